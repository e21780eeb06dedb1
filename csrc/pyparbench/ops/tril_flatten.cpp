#include "pyparbench/ops/tril_flatten.hpp"

#include "pyparbench/core/checks.hpp"

#include <stdexcept>

namespace ppb {

TrilFlatten::TrilFlatten(Shape input, std::optional<int> threads)
    : Kernel(threads), in_(std::move(input)) {
  if (in_.size() != 3 || in_[1] != in_[2])
    throw std::invalid_argument("tril_flatten expects (B, n, n), got shape " + shape_str(in_));
  require_positive_dims("input shape", in_);
  out_ = {in_[0], in_[1] * (in_[1] - 1) / 2};
}

void TrilFlatten::bind(ConstFloatView x, FloatView out) {
  require_shape("x", x.shape, in_);
  require_shape("out", out.shape, out_);
  require_no_partial_overlap("out", out, "x", x, false);
  x_ = x;
  y_ = out;
}

void TrilFlatten::execute() {
  ThreadsScope scope(threads_);
  const int64_t batch = in_[0], n = in_[1], pairs = out_[1];
  const float* x = x_.data;
  float* y = y_.data;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    const float* m = x + b * n * n;
    float* o = y + b * pairs;
    for (int64_t i = 1; i < n; ++i)
      for (int64_t j = 0; j < i; ++j) *o++ = m[i * n + j];
  }
}

void TrilFlatten::run(ConstFloatView x, FloatView out) {
  run_with([&] { bind(x, out); });
}

std::vector<double> TrilFlatten::timeit(ConstFloatView x, FloatView out, int repeats,
                                        int warmup) {
  return timed_with([&] { bind(x, out); }, repeats, warmup);
}

}  // namespace ppb
