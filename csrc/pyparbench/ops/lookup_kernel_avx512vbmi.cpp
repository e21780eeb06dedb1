// The byte lookup built for avx512 with VBMI: vpermi2b over the table's
// two halves, 64 bytes a step.
#include "pyparbench/ops/lookup_kernel.hpp"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi")
#define PPB_LOOKUP_KERNEL lookup_kernel_avx512vbmi
#define PPB_LOOKUP_VEC_BYTES 64
#define PPB_LOOKUP_VBMI 1
#include "pyparbench/ops/lookup_kernel.inc"
