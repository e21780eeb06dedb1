#include "pyparbench/ops/rotary.hpp"

#include "pyparbench/core/checks.hpp"

#include <cmath>
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
  positions_ = nullptr;
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

void Rotary::run_positions(ConstFloatView x, const int64_t* positions, ConstFloatView inv_freq,
                           float scaling, FloatView out) {
  run_with([&] {
    require_shape("inv_freq", inv_freq.shape, Shape{shape_.back() / 2});
    bind_positions(x, positions, out, false);
    inv_freq_ = inv_freq;
    scaling_ = scaling;
  });
}

void Rotary::run_indexed(ConstFloatView x, const int64_t* positions, ConstFloatView cos,
                         ConstFloatView sin, FloatView out) {
  run_with([&] {
    if (cos.shape.size() != 2 || cos.shape[1] != shape_.back())
      throw std::invalid_argument("rotary cos table must be (C, " +
                                  std::to_string(shape_.back()) + "), got " +
                                  shape_str(cos.shape));
    require_shape("sin", sin.shape, cos.shape);
    bind_positions(x, positions, out, true);
    // Checked here: a row past the tables cannot be refused inside the loop.
    const int64_t n = shape_[0] * shape_[shape_.size() - 2];
    for (int64_t i = 0; i < n; ++i)
      if (positions[i] < 0 || positions[i] >= cos.shape[0])
        throw std::invalid_argument("rotary position " + std::to_string(positions[i]) +
                                    " is outside its tables' " +
                                    std::to_string(cos.shape[0]) + " rows");
    cos_ = cos;
    sin_ = sin;
  });
}

void Rotary::bind_positions(ConstFloatView x, const int64_t* positions, FloatView out,
                            bool indexed) {
  require_shape("x", x.shape, shape_);
  require_shape("out", out.shape, shape_);
  require_no_partial_overlap("out", out, "x", x, false);
  if (positions == nullptr) throw std::invalid_argument("rotary positions are null");
  x_ = x;
  y_ = out;
  positions_ = positions;
  indexed_ = indexed;
}

void Rotary::execute_positions() {
  const int64_t d = shape_.back(), half = d / 2, s = shape_[shape_.size() - 2];
  const int64_t batch = shape_[0];
  // Rows between one batch's sequence and the next (the heads of (B, H, S, D)).
  const int64_t inner = x_.size() / d / (batch * s);
  const float* x = x_.data;
  const float* f = inv_freq_.data;
  const int64_t* p = positions_;
  const float scaling = scaling_;
  float* y = y_.data;
  const bool indexed = indexed_;
  const float* cos_table = cos_.data;
  const float* sin_table = sin_.data;
#pragma omp parallel
  {
    std::vector<float> computed(static_cast<size_t>(d));
#pragma omp for schedule(static)
    for (int64_t bs = 0; bs < batch * s; ++bs) {
      // The first half of each table row: both halves are the same angles
      // where the exporters' cat(freqs, freqs) made them; an indexed
      // table's second half is read as it is.
      const float* c = computed.data();
      const float* sn = computed.data() + half;
      const float* c2 = c;
      const float* sn2 = sn;
      if (indexed) {
        c = cos_table + p[bs] * d;
        sn = sin_table + p[bs] * d;
        c2 = c + half;
        sn2 = sn + half;
      } else {
        // The exporters' float32 angle, its cos / sin, then the scaling.
        const float at = static_cast<float>(p[bs]);
        for (int64_t i = 0; i < half; ++i) {
          const float angle = at * f[i];
          computed[i] = std::cos(angle) * scaling;
          computed[i + half] = std::sin(angle) * scaling;
        }
      }
      const int64_t b = bs / s, q = bs % s;
      for (int64_t h = 0; h < inner; ++h) {
        const int64_t r = (b * inner + h) * s + q;
        const float* xr = x + r * d;
        float* yr = y + r * d;
        for (int64_t i = 0; i < half; ++i) yr[i] = xr[i] * c[i] - xr[i + half] * sn[i];
        for (int64_t i = 0; i < half; ++i)
          yr[i + half] = xr[i + half] * c2[i] + xr[i] * sn2[i];
      }
    }
  }
}

void Rotary::execute() {
  ThreadsScope scope(threads_);
  if (positions_ != nullptr) {
    execute_positions();
    return;
  }
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
