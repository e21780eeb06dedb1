#include "pyparbench/ops/attention.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/ops/attention_row.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace ppb {

Attention::Attention(Shape q, Shape k, Shape v, Shape mask, bool causal, float scale,
                     float causal_fill, std::optional<int> threads)
    : Kernel(threads),
      q_shape_(std::move(q)),
      k_shape_(std::move(k)),
      v_shape_(std::move(v)),
      mask_shape_(std::move(mask)),
      causal_(causal),
      scale_(scale),
      causal_fill_(causal_fill) {
  const std::string shapes = "q " + shape_str(q_shape_) + ", k " + shape_str(k_shape_) +
                             ", v " + shape_str(v_shape_);
  if (q_shape_.size() != 4 || k_shape_.size() != 4 || v_shape_.size() != 4)
    throw std::invalid_argument("attention expects 4-D q, k, v, got " + shapes);
  require_positive_dims("q shape", q_shape_);
  require_positive_dims("k shape", k_shape_);
  require_positive_dims("v shape", v_shape_);
  const int64_t b = q_shape_[0], h = q_shape_[1], sq = q_shape_[2], d = q_shape_[3];
  const int64_t hkv = k_shape_[1], sk = k_shape_[2];
  if (k_shape_[0] != b || v_shape_[0] != b || v_shape_[1] != hkv || v_shape_[2] != sk ||
      k_shape_[3] != d || h % hkv != 0)
    throw std::invalid_argument(
        "attention needs k (B, Hkv, Sk, D) and v (B, Hkv, Sk, Dv) with H a multiple of Hkv, "
        "got " + shapes);
  if (!std::isfinite(scale_))
    throw std::invalid_argument("attention scale must be finite, got " + std::to_string(scale_));
  if (std::isnan(causal_fill_) || causal_fill_ == std::numeric_limits<float>::infinity())
    throw std::invalid_argument("attention causal_fill must be a number below +inf, got " +
                                std::to_string(causal_fill_));
  if (!mask_shape_.empty()) {
    const Shape full{b, h, sq, sk};
    bool ok = mask_shape_.size() == 4;
    for (size_t i = 0; ok && i < 4; ++i) ok = mask_shape_[i] == 1 || mask_shape_[i] == full[i];
    if (!ok)
      throw std::invalid_argument("attention mask " + shape_str(mask_shape_) +
                                  " does not broadcast into " + shape_str(full));
  }
  out_ = {b, h, sq, v_shape_[3]};
}

void Attention::bind(ConstFloatView q, ConstFloatView k, ConstFloatView v, ConstFloatView mask,
                     FloatView out) {
  require_shape("q", q.shape, q_shape_);
  require_shape("k", k.shape, k_shape_);
  require_shape("v", v.shape, v_shape_);
  if (mask_shape_.empty() != !mask.present())
    throw std::invalid_argument(mask_shape_.empty() ? "attention was made without a mask"
                                                    : "attention needs its mask");
  if (mask.present()) require_shape("mask", mask.shape, mask_shape_);
  require_shape("out", out.shape, out_);
  require_no_partial_overlap("out", out, "q", q, false);
  require_no_partial_overlap("out", out, "k", k, false);
  require_no_partial_overlap("out", out, "v", v, false);
  q_ = q;
  k_ = k;
  v_ = v;
  mask_ = mask;
  y_ = out;
}

void Attention::run(ConstFloatView q, ConstFloatView k, ConstFloatView v, ConstFloatView mask,
                    FloatView out) {
  run_with([&] { bind(q, k, v, mask, out); });
}

std::vector<double> Attention::timeit(ConstFloatView q, ConstFloatView k, ConstFloatView v,
                                      ConstFloatView mask, FloatView out, int repeats,
                                      int warmup) {
  return timed_with([&] { bind(q, k, v, mask, out); }, repeats, warmup);
}

void Attention::execute() {
  ThreadsScope scope(threads_);
  const int64_t b = q_shape_[0], h = q_shape_[1], sq = q_shape_[2], d = q_shape_[3];
  const int64_t hkv = k_shape_[1], sk = k_shape_[2], dv = v_shape_[3];
  const int64_t group = h / hkv, rows = b * h * sq;
  // The mask's strides, 0 along its broadcast axes.
  int64_t ms[4] = {0, 0, 0, 0};
  if (mask_.present()) {
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      ms[i] = mask_shape_[i] == 1 ? 0 : stride;
      stride *= mask_shape_[i];
    }
  }
  const float* q = q_.data;
  const float* k = k_.data;
  const float* v = v_.data;
  const float* mask = mask_.data;
  float* y = y_.data;
  const float scale = scale_;
  const bool causal = causal_;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const float fill = causal_fill_;
  // Hidden keys stay in the softmax at the fill score unless it is -inf.
  const bool filled = causal && fill != neg_inf;
#pragma omp parallel
  {
    std::vector<float> p(static_cast<size_t>(sk));
    std::vector<float> acc(static_cast<size_t>(dv));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % sq, bh = r / sq, hh = bh % h, bb = bh / h;
      const int64_t kv = bb * hkv + hh / group;
      const float* qr = q + r * d;
      const float* kb = k + kv * sk * d;
      const float* vb = v + kv * sk * dv;
      const float* mr = mask ? mask + bb * ms[0] + hh * ms[1] + i * ms[2] : nullptr;
      const int64_t seen = causal ? std::min(sk, std::max<int64_t>(0, i + sk - sq + 1)) : sk;
      float top = neg_inf;
      for (int64_t j = 0; j < seen; ++j) {
        const float* kr = kb + j * d;
        float s = 0;
        // Vectorised (the reduction's order is free here: an fp32 dot of d terms).
#pragma omp simd reduction(+ : s)
        for (int64_t t = 0; t < d; ++t) s += qr[t] * kr[t];
        s *= scale;
        if (mr) s += mr[j * ms[3]];
        p[j] = s;
        top = std::max(top, s);
      }
      const int64_t used = filled ? sk : seen;
      for (int64_t j = seen; j < used; ++j) p[j] = fill;
      if (used > seen) top = std::max(top, fill);
      float* yr = y + r * dv;
      if (used == 0 || top == neg_inf) {
        std::fill(yr, yr + dv, 0.0f);
        continue;
      }
      softmax_weighted_sum(p, used, top, [&](int64_t j) { return vb + j * dv; }, acc, yr, dv);
    }
  }
}

}  // namespace ppb
