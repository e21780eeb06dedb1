// The byte lookup built for avx512 without VBMI: AVX512BW's vpshufb, 64
// bytes a step.
#include "pyparbench/ops/lookup_kernel.hpp"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
#define PPB_LOOKUP_KERNEL lookup_kernel_avx512
#define PPB_LOOKUP_VEC_BYTES 64
#define PPB_LOOKUP_VBMI 0
#include "pyparbench/ops/lookup_kernel.inc"
