#include "pyparbench/math/streamed_linear_kernel.hpp"

#include "pyparbench/core/tiered_kernel.hpp"

#include <string>

namespace ppb {

namespace {

TieredKernel<StreamedKernel>& streamed_kernels() {
#if PPB_ARCH_X86
  static TieredKernel<StreamedKernel> k("streamed linear kernel", &streamed_kernel_generic,
                                        &streamed_kernel_avx2, &streamed_kernel_avx512);
#else
  static TieredKernel<StreamedKernel> k("streamed linear kernel", &streamed_kernel_generic,
                                        nullptr, nullptr);
#endif
  return k;
}

}  // namespace

StreamedKernel select_streamed_kernel() { return streamed_kernels().get(); }

void set_streamed_isa(const std::string& isa) { streamed_kernels().set(isa); }

const char* streamed_kernel_isa() { return streamed_kernels().isa(); }

}  // namespace ppb
