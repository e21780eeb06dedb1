// The decode attention rows built for generic.
#include "pyparbench/ops/decode_attention_kernel.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#define PPB_DIRECT_VEC_BYTES 16
#define PPB_DECODE_ROWS decode_rows_generic
#include "pyparbench/ops/decode_attention_kernel.inc"
