#include "pyparbench/ops/rms_norm.hpp"

#include "pyparbench/core/checks.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ppb {

RmsNorm::RmsNorm(Shape shape, float eps, std::optional<int> threads)
    : Kernel(threads), shape_(std::move(shape)), eps_(eps) {
  if (shape_.empty())
    throw std::invalid_argument("rms_norm expects an input of rank >= 1, got shape " +
                                shape_str(shape_));
  require_positive_dims("input shape", shape_);
  if (!(eps_ >= 0.0f) || !std::isfinite(eps_))
    throw std::invalid_argument("rms_norm eps must be finite and >= 0, got " +
                                std::to_string(eps_));
}

void RmsNorm::bind(ConstFloatView x, ConstFloatView scale, FloatView out) {
  require_shape("x", x.shape, shape_);
  require_shape("scale", scale.shape, Shape{shape_.back()});
  require_shape("out", out.shape, shape_);
  require_no_partial_overlap("out", out, "x", x, true);
  x_ = x;
  scale_ = scale;
  y_ = out;
}

void RmsNorm::run(ConstFloatView x, ConstFloatView scale, FloatView out) {
  run_with([&] { bind(x, scale, out); });
}

std::vector<double> RmsNorm::timeit(ConstFloatView x, ConstFloatView scale, FloatView out,
                                    int repeats, int warmup) {
  return timed_with([&] { bind(x, scale, out); }, repeats, warmup);
}

void RmsNorm::execute() {
  ThreadsScope scope(threads_);
  const int64_t d = shape_.back(), rows = x_.size() / d;
  const float* x = x_.data;
  const float* g = scale_.data;
  float* y = y_.data;
  const double eps = eps_;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    // A double sum: a row of thousands of squares keeps float32's precision.
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
    for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * inv * g[i];
  }
}

}  // namespace ppb
