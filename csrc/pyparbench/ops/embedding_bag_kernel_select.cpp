#include "pyparbench/ops/embedding_bag_kernel.hpp"

#include "pyparbench/core/tiered_kernel.hpp"

#include <string>

namespace ppb {

namespace {

TieredKernel<BagKernel>& bag_kernels() {
#if PPB_ARCH_X86
  static TieredKernel<BagKernel> k("embedding-bag kernel", &bag_kernel_generic, &bag_kernel_avx2,
                                   &bag_kernel_avx512);
#else
  static TieredKernel<BagKernel> k("embedding-bag kernel", &bag_kernel_generic, nullptr, nullptr);
#endif
  return k;
}

}  // namespace

BagKernel select_bag_kernel() { return bag_kernels().get(); }

void set_bag_isa(const std::string& isa) { bag_kernels().set(isa); }

const char* bag_kernel_isa() { return bag_kernels().isa(); }

}  // namespace ppb
