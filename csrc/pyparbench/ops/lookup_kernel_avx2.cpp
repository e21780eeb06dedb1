// The byte lookup built for avx2: vpshufb, 32 bytes a step.
#include "pyparbench/ops/lookup_kernel.hpp"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#pragma GCC target("avx2,fma")
#define PPB_LOOKUP_KERNEL lookup_kernel_avx2
#define PPB_LOOKUP_VEC_BYTES 32
#define PPB_LOOKUP_VBMI 0
#include "pyparbench/ops/lookup_kernel.inc"
