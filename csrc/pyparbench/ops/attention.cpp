#include "pyparbench/ops/attention.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/ops/direct_kernels.hpp"

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
  // A multiple of 16 floats: whole vectors of keys on every ISA.
  ldk_ = (sk + 15) / 16 * 16;
  kt_.assign(static_cast<size_t>(b * hkv * d * ldk_), 0.0f);
  tile_ = direct_kernels().attention_tile;
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
  const int64_t group = h / hkv, ldk = ldk_;
  // The mask's strides, 0 along its broadcast axes.
  int64_t ms[4] = {0, 0, 0, 0};
  if (mask_.present()) {
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      ms[i] = mask_shape_[i] == 1 ? 0 : stride;
      stride *= mask_shape_[i];
    }
  }
  // Query rows per task: 32, fewer where that leaves under 4 tasks a thread
  // (a multiple of the tile's 4-row blocks while Sq allows).
  const int64_t heads = b * h;
  const int64_t wanted = 4 * static_cast<int64_t>(threads_);
  int64_t chunk = std::min<int64_t>(sq, 32);
  while (chunk > 4 && heads * ((sq + chunk - 1) / chunk) < wanted) chunk = (chunk + 1) / 2;
  const int64_t chunks = (sq + chunk - 1) / chunk, tasks = heads * chunks;
  const float* q = q_.data;
  const float* k = k_.data;
  const float* v = v_.data;
  const float* mask = mask_.data;
  float* y = y_.data;
  float* kt = kt_.data();
  const bool filled = causal_ && causal_fill_ != -std::numeric_limits<float>::infinity();
#pragma omp parallel
  {
    // k^T in blocks of 16 keys: their rows stay in L1 while each is read
    // across, and each write is 16 neighbouring floats.
    const int64_t key_blocks = ldk / 16;
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < b * hkv * key_blocks; ++blk) {
      const int64_t kv = blk / key_blocks, j0 = blk % key_blocks * 16;
      const int64_t n = std::min<int64_t>(16, sk - j0);
      const float* kb = k + (kv * sk + j0) * d;
      float* out = kt + kv * d * ldk + j0;
      for (int64_t t = 0; t < d; ++t)
        for (int64_t j = 0; j < n; ++j) out[t * ldk + j] = kb[j * d + t];
    }
    std::vector<float> scratch(static_cast<size_t>(4 * ldk));
    AttentionTileArgs a{};
    a.d = d;
    a.dv = dv;
    a.sk = sk;
    a.ldk = ldk;
    a.causal = causal_;
    a.filled = filled;
    a.scale = scale_;
    a.fill = causal_fill_;
    a.mask_row = ms[2];
    a.mask_key = ms[3];
    a.scratch = scratch.data();
    // Causal rows cost more further down: tasks are handed out as threads free up.
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bh = task / chunks, i0 = task % chunks * chunk;
      const int64_t hh = bh % h, bb = bh / h, kv = bb * hkv + hh / group;
      a.rows = std::min(chunk, sq - i0);
      a.q = q + (bh * sq + i0) * d;
      a.kt = kt + kv * d * ldk;
      a.v = v + kv * sk * dv;
      a.mask = mask ? mask + bb * ms[0] + hh * ms[1] + i0 * ms[2] : nullptr;
      a.y = y + (bh * sq + i0) * dv;
      a.first_seen = i0 + sk - sq + 1;
      tile_(a);
    }
  }
}

}  // namespace ppb
