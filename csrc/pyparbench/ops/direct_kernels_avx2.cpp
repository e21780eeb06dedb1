// The direct kernels built for avx2.
#include "pyparbench/ops/direct_kernels.hpp"

#include <cstdint>

#pragma GCC target("avx2,fma")
#define PPB_DIRECT_VEC_BYTES 32
#define PPB_DIRECT_ISA "avx2"
#define PPB_DIRECT_TABLE direct_kernels_avx2
#include "pyparbench/ops/direct_kernels.inc"
