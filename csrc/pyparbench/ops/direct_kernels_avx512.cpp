// The direct kernels built for avx512.
#include "pyparbench/ops/direct_kernels.hpp"

#include <cstdint>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
#define PPB_DIRECT_VEC_BYTES 64
#define PPB_DIRECT_ISA "avx512"
#define PPB_DIRECT_TABLE direct_kernels_avx512
#include "pyparbench/ops/direct_kernels.inc"
