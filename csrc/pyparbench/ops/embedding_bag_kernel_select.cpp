#include "pyparbench/ops/embedding_bag_kernel.hpp"

namespace ppb {

BagKernel select_bag_kernel() {
  static const BagKernel k = [] {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
      return &bag_kernel_avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &bag_kernel_avx2;
    return &bag_kernel_generic;
  }();
  return k;
}

const char* bag_kernel_isa() {
  const BagKernel k = select_bag_kernel();
  return k == &bag_kernel_avx512 ? "avx512" : k == &bag_kernel_avx2 ? "avx2" : "generic";
}

}  // namespace ppb
