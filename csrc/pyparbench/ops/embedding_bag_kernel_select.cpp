#include "pyparbench/ops/embedding_bag_kernel.hpp"

#include "pyparbench/core/cpu_features.hpp"

#include <string>

namespace ppb {

BagKernel select_bag_kernel() {
  static const BagKernel k = [] {
#if PPB_ARCH_X86
    const std::string widest = x86_kernel_tiers().front();
    if (widest == "avx512") return &bag_kernel_avx512;
    if (widest == "avx2") return &bag_kernel_avx2;
#endif
    return &bag_kernel_generic;
  }();
  return k;
}

const char* bag_kernel_isa() {
  const BagKernel k = select_bag_kernel();
#if PPB_ARCH_X86
  if (k == &bag_kernel_avx512) return "avx512";
  if (k == &bag_kernel_avx2) return "avx2";
#endif
  return k == &bag_kernel_generic ? "generic" : "?";
}

}  // namespace ppb
