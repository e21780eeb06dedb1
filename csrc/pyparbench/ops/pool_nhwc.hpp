// Max and average pooling over channels-last (N, H, W, C) data, written
// directly and separably: an output row's window rows are folded into one
// row (a contiguous stream), then each pixel folds its window's columns of
// it, a vector pass over C each. Blocked data (N, C/b, H, W, b) is N * C / b
// such images of b channels. oneDNN 2.6 runs channels-last pooling on AVX2 machines
// about 100x slower than its bytes need (a 3x3 max pool over 14x14x512 took
// 0.27 ms on two cores), which made pooling a tenth of GoogLeNet's time.
#pragma once

#include "pyparbench/ops/pooling.hpp"

#include <cstdint>

namespace ppb {

struct PoolNhwcShape {
  int64_t n, h, w, c;  // input
  int64_t oh, ow;      // output
};

// y (N, OH, OW, C) from x (N, H, W, C) under cfg's window, stride, padding
// and average rule, on the calling thread's OpenMP team. Padding never
// enters a max; an average divides by the taps inside the input
// (count_include_pad false) or by the window clipped to the padded input
// (true: PyTorch's rule, which differs from the full kernel in ceil mode).
// A NaN in a window makes its max NaN, as numpy's and PyTorch's do.
void pool_nhwc(const Pool2dConfig& cfg, const PoolNhwcShape& s, const float* x, float* y);

// The same on the calling thread alone, with no OpenMP region (a small pool
// of a plan's node); `cols` holds W * C floats of scratch.
void pool_nhwc_serial(const Pool2dConfig& cfg, const PoolNhwcShape& s, const float* x, float* y,
                      float* cols);

// The build of the row loop this CPU runs: "avx512", "avx2" or "generic".
const char* pool_nhwc_isa();

}  // namespace ppb
