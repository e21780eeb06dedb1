#pragma once
// The tail of one attention row of the decode step: the scores turned into
// softmax weights in place and the weighted sum of the value rows written to
// the output row. (The prefill attention runs whole row tiles instead:
// direct_attention.inc.)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ppb {

// p[0, used): scores whose maximum is `top` (finite); value_row(j): the j-th
// value row (dv floats). Accumulates in fp32, a value row at a time
// (contiguous, vectorised), the exponentials' sum in double; acc holds dv.
template <class ValueRow>
inline void softmax_weighted_sum(std::vector<float>& p, int64_t used, float top, ValueRow&& value_row,
                                 std::vector<float>& acc, float* out, int64_t dv) {
  double sum = 0;
  for (int64_t j = 0; j < used; ++j) {
    p[j] = std::exp(p[j] - top);
    sum += p[j];
  }
  float* a = acc.data();
  std::fill(acc.begin(), acc.end(), 0.0f);
  for (int64_t j = 0; j < used; ++j) {
    const float e = p[j];
    const float* vr = value_row(j);
#pragma omp simd
    for (int64_t t = 0; t < dv; ++t) a[t] += e * vr[t];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t t = 0; t < dv; ++t) out[t] = a[t] * inv;
}

}  // namespace ppb
