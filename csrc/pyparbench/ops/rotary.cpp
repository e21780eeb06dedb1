#include "pyparbench/ops/rotary.hpp"

#include "pyparbench/core/checks.hpp"

#include <stdexcept>

namespace ppb {

Rotary::Rotary(Shape shape, std::optional<int> threads) : Kernel(threads), shape_(std::move(shape)) {
  if (shape_.size() < 2 || shape_.back() % 2 != 0)
    throw std::invalid_argument("rotary expects (..., S, D) with D even, got shape " +
                                shape_str(shape_));
  require_positive_dims("input shape", shape_);
}

void Rotary::bind(ConstFloatView x, ConstFloatView cos, ConstFloatView sin, FloatView out) {
  const Shape table{shape_[shape_.size() - 2], shape_.back()};
  require_shape("x", x.shape, shape_);
  require_shape("cos", cos.shape, table);
  require_shape("sin", sin.shape, table);
  require_shape("out", out.shape, shape_);
  require_no_partial_overlap("out", out, "x", x, false);
  x_ = x;
  cos_ = cos;
  sin_ = sin;
  y_ = out;
}

void Rotary::run(ConstFloatView x, ConstFloatView cos, ConstFloatView sin, FloatView out) {
  run_with([&] { bind(x, cos, sin, out); });
}

std::vector<double> Rotary::timeit(ConstFloatView x, ConstFloatView cos, ConstFloatView sin,
                                   FloatView out, int repeats, int warmup) {
  return timed_with([&] { bind(x, cos, sin, out); }, repeats, warmup);
}

void Rotary::execute() {
  ThreadsScope scope(threads_);
  const int64_t d = shape_.back(), half = d / 2, s = shape_[shape_.size() - 2];
  const int64_t rows = x_.size() / d;
  const float* x = x_.data;
  const float* c = cos_.data;
  const float* sn = sin_.data;
  float* y = y_.data;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    const float* cr = c + (r % s) * d;
    const float* sr = sn + (r % s) * d;
    float* yr = y + r * d;
    for (int64_t i = 0; i < half; ++i) yr[i] = xr[i] * cr[i] - xr[i + half] * sr[i];
    for (int64_t i = half; i < d; ++i) yr[i] = xr[i] * cr[i] + xr[i - half] * sr[i];
  }
}

}  // namespace ppb
