// The decode attention rows built for avx2.
#include "pyparbench/ops/decode_attention_kernel.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#pragma GCC target("avx2,fma")
#define PPB_DIRECT_VEC_BYTES 32
#define PPB_DECODE_ROWS decode_rows_avx2
#include "pyparbench/ops/decode_attention_kernel.inc"
