// The decode attention rows built for avx512.
#include "pyparbench/ops/decode_attention_kernel.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
#define PPB_DIRECT_VEC_BYTES 64
#define PPB_DECODE_ROWS decode_rows_avx512
#include "pyparbench/ops/decode_attention_kernel.inc"
