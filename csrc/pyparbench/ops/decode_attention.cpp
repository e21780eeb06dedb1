#include "pyparbench/ops/decode_attention.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/ops/decode_attention_kernel.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace ppb {

TieredKernel<DecodeRowsKernel>& decode_rows_kernels() {
  static TieredKernel<DecodeRowsKernel> k("decode attention kernel", &decode_rows_generic,
                                          PPB_X86_BUILD(decode_rows_avx2),
                                          PPB_X86_BUILD(decode_rows_avx512));
  return k;
}

void decode_attention_rows(const DecodeStep& st) { decode_rows_kernels().get()(st); }

void copy_head_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                    int64_t at, int64_t heads, int64_t rows, int64_t width) {
  const size_t bytes = static_cast<size_t>(rows * width) * sizeof(float);
#pragma omp for schedule(static)
  for (int64_t hd = 0; hd < heads; ++hd)
    std::memcpy(dst + (hd * dst_stride + at) * width, src + hd * src_stride * width, bytes);
}

DecodeAttention::DecodeAttention(Shape q, Shape k_new, Shape v_new, Shape keys, Shape mask,
                                 bool in_place, float scale, float causal_fill,
                                 std::optional<int> threads)
    : Kernel(threads),
      q_shape_(std::move(q)),
      k_shape_(std::move(k_new)),
      v_shape_(std::move(v_new)),
      keys_shape_(std::move(keys)),
      mask_shape_(std::move(mask)),
      in_place_(in_place),
      scale_(scale),
      causal_fill_(causal_fill) {
  const std::string shapes = "q " + shape_str(q_shape_) + ", new k " + shape_str(k_shape_) +
                             ", new v " + shape_str(v_shape_) +
                             (in_place_ ? ", cache " : ", past k ") + shape_str(keys_shape_);
  if (q_shape_.size() != 4 || k_shape_.size() != 4 || v_shape_.size() != 4 ||
      keys_shape_.size() != 4)
    throw std::invalid_argument("decode attention expects 4-D tensors, got " + shapes);
  require_positive_dims("q shape", q_shape_);
  require_positive_dims("new k shape", k_shape_);
  require_positive_dims("new v shape", v_shape_);
  const int64_t b = q_shape_[0], h = q_shape_[1], s = q_shape_[2], d = q_shape_[3];
  const int64_t hkv = k_shape_[1], dv = v_shape_[3], rows = keys_shape_[2];
  if (k_shape_[0] != b || k_shape_[2] != s || k_shape_[3] != d || v_shape_[0] != b ||
      v_shape_[1] != hkv || v_shape_[2] != s || h % hkv != 0 || keys_shape_[0] != b ||
      keys_shape_[1] != hkv || keys_shape_[3] != d || rows < (in_place_ ? s : 0))
    throw std::invalid_argument(
        "decode attention needs q (B, H, S, D), new k (B, Hkv, S, D), new v (B, Hkv, S, Dv) "
        "and past / cache keys (B, Hkv, rows, D) with H a multiple of Hkv, got " + shapes);
  if (!std::isfinite(scale_))
    throw std::invalid_argument("decode attention scale must be finite, got " +
                                std::to_string(scale_));
  if (std::isnan(causal_fill_) || causal_fill_ == std::numeric_limits<float>::infinity())
    throw std::invalid_argument("decode attention causal_fill must be a number below +inf, got " +
                                std::to_string(causal_fill_));
  values_shape_ = {b, hkv, rows, dv};
  present_k_ = {b, hkv, rows + s, d};
  present_v_ = {b, hkv, rows + s, dv};
  if (!mask_shape_.empty()) {
    const Shape full{b, h, s, in_place_ ? rows : rows + s};
    bool ok = mask_shape_.size() == 4;
    for (size_t i = 0; ok && i < 4; ++i) ok = mask_shape_[i] == 1 || mask_shape_[i] == full[i];
    if (!ok)
      throw std::invalid_argument("decode attention mask " + shape_str(mask_shape_) +
                                  " does not broadcast into " + shape_str(full));
  }
  out_ = {b, h, s, dv};
}

void DecodeAttention::check_common(ConstFloatView q, ConstFloatView k_new, ConstFloatView v_new,
                                   ConstFloatView mask, FloatView out) const {
  require_shape("q", q.shape, q_shape_);
  require_shape("new k", k_new.shape, k_shape_);
  require_shape("new v", v_new.shape, v_shape_);
  if (mask_shape_.empty() != !mask.present())
    throw std::invalid_argument(mask_shape_.empty() ? "decode attention was made without a mask"
                                                    : "decode attention needs its mask");
  if (mask.present()) require_shape("mask", mask.shape, mask_shape_);
  require_shape("out", out.shape, out_);
  require_no_partial_overlap("out", out, "q", q, false);
  require_no_partial_overlap("out", out, "new k", k_new, false);
  require_no_partial_overlap("out", out, "new v", v_new, false);
}

void DecodeAttention::bind_graph(ConstFloatView q, ConstFloatView k_new, ConstFloatView v_new,
                                 ConstFloatView past_k, ConstFloatView past_v,
                                 ConstFloatView mask, FloatView out) {
  if (in_place_) throw std::invalid_argument("decode attention made for a cache runs in place");
  check_common(q, k_new, v_new, mask, out);
  require_shape("past k", past_k.shape, keys_shape_);
  require_shape("past v", past_v.shape, values_shape_);
  require_no_partial_overlap("out", out, "past k", past_k, false);
  require_no_partial_overlap("out", out, "past v", past_v, false);
  mode_ = Mode::graph;
  q_ = q, k_new_ = k_new, v_new_ = v_new, past_k_ = past_k, past_v_ = past_v, mask_ = mask;
  y_ = out;
}

void DecodeAttention::run(ConstFloatView q, ConstFloatView k_new, ConstFloatView v_new,
                          ConstFloatView past_k, ConstFloatView past_v, ConstFloatView mask,
                          FloatView out) {
  run_with([&] { bind_graph(q, k_new, v_new, past_k, past_v, mask, out); });
}

std::vector<double> DecodeAttention::timeit(ConstFloatView q, ConstFloatView k_new,
                                            ConstFloatView v_new, ConstFloatView past_k,
                                            ConstFloatView past_v, ConstFloatView mask,
                                            FloatView out, int repeats, int warmup) {
  return timed_with([&] { bind_graph(q, k_new, v_new, past_k, past_v, mask, out); }, repeats,
                    warmup);
}

void DecodeAttention::run_present(ConstFloatView q, ConstFloatView k_new, ConstFloatView v_new,
                                  ConstFloatView past_k, ConstFloatView past_v,
                                  ConstFloatView mask, FloatView out, FloatView present_k,
                                  FloatView present_v) {
  run_with([&] {
    if (in_place_) throw std::invalid_argument("decode attention made for a cache runs in place");
    check_common(q, k_new, v_new, mask, out);
    require_shape("past k", past_k.shape, keys_shape_);
    require_shape("past v", past_v.shape, values_shape_);
    require_shape("present k", present_k.shape, present_k_);
    require_shape("present v", present_v.shape, present_v_);
    for (const FloatView* w : {&out, &present_k, &present_v})
      for (const ConstFloatView* r : {&q, &k_new, &v_new, &past_k, &past_v})
        require_no_partial_overlap("an output", *w, "an input", *r, false);
    require_no_partial_overlap("out", out, "present k", present_k, false);
    require_no_partial_overlap("out", out, "present v", present_v, false);
    mode_ = Mode::present;
    q_ = q, k_new_ = k_new, v_new_ = v_new, past_k_ = past_k, past_v_ = past_v, mask_ = mask;
    y_ = out, present_k_out_ = present_k, present_v_out_ = present_v;
  });
}

void DecodeAttention::run_in_place(ConstFloatView q, ConstFloatView k_new, ConstFloatView v_new,
                                   FloatView cache_k, FloatView cache_v, int64_t length,
                                   ConstFloatView mask, FloatView out) {
  run_with([&] {
    if (!in_place_) throw std::invalid_argument("decode attention made for a past is not in place");
    check_common(q, k_new, v_new, mask, out);
    require_shape("cache k", cache_k.shape, keys_shape_);
    require_shape("cache v", cache_v.shape, values_shape_);
    if (length < 0 || length + q_shape_[2] > keys_shape_[2])
      throw std::invalid_argument("decode attention length " + std::to_string(length) + " plus " +
                                  std::to_string(q_shape_[2]) + " new rows does not fit a cache of " +
                                  std::to_string(keys_shape_[2]) + " rows");
    for (const ConstFloatView* r : {&q, &k_new, &v_new, &mask})
      for (const FloatView* w : {&out, &cache_k, &cache_v})
        if (r->present()) require_no_partial_overlap("an output", *w, "an input", *r, false);
    mode_ = Mode::in_place;
    length_ = length;
    q_ = q, k_new_ = k_new, v_new_ = v_new, mask_ = mask;
    y_ = out, present_k_out_ = cache_k, present_v_out_ = cache_v;
  });
}

void DecodeAttention::execute() {
  ThreadsScope scope(threads_);
  DecodeStep st;
  st.b = q_shape_[0], st.h = q_shape_[1], st.s = q_shape_[2], st.d = q_shape_[3];
  st.hkv = k_shape_[1], st.dv = v_shape_[3];
  st.q = q_.data, st.mask = mask_.data, st.y = y_.data;
  st.scale = scale_, st.causal_fill = causal_fill_;
  if (mask_.present()) {
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      st.mask_strides[i] = mask_shape_[i] == 1 ? 0 : stride;
      stride *= mask_shape_[i];
    }
  }
  const int64_t heads = st.b * st.hkv, rows = keys_shape_[2];
  // Where the new rows go (present: after the past; in place: at length),
  // and the cache the attention then reads them and the past from.
  float* cache_k = present_k_out_.data;
  float* cache_v = present_v_out_.data;
  int64_t cache_rows = 0, at = 0;
  switch (mode_) {
    case Mode::graph:
      st.past = rows;
      st.past_k = past_k_.data, st.past_v = past_v_.data, st.past_stride = rows;
      st.new_k = k_new_.data, st.new_v = v_new_.data, st.new_stride = st.s;
      break;
    case Mode::present:
      cache_rows = rows + st.s, at = rows;
      break;
    case Mode::in_place:
      cache_rows = rows, at = length_;
      break;
  }
  if (mode_ != Mode::graph) {
    st.past = at;
    st.past_k = cache_k, st.past_v = cache_v, st.past_stride = cache_rows;
    st.new_k = cache_k, st.new_v = cache_v, st.new_stride = cache_rows, st.new_offset = at;
  }
  const Mode mode = mode_;
  const float* pk = past_k_.data;
  const float* pv = past_v_.data;
#pragma omp parallel
  {
    if (mode == Mode::present) {
      copy_head_rows(pk, rows, cache_k, cache_rows, 0, heads, rows, st.d);
      copy_head_rows(pv, rows, cache_v, cache_rows, 0, heads, rows, st.dv);
    }
    if (mode != Mode::graph) {
      copy_head_rows(k_new_.data, st.s, cache_k, cache_rows, at, heads, st.s, st.d);
      copy_head_rows(v_new_.data, st.s, cache_v, cache_rows, at, heads, st.s, st.dv);
    }
    // (each omp for ends in a barrier: the rows are in the cache before
    // any query reads them)
    decode_attention_rows(st);
  }
}

}  // namespace ppb
