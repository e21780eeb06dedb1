#include "pyparbench/ops/pooling.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/core/threads.hpp"
#include "pyparbench/dnnl_compat.hpp"
#include "pyparbench/ops/pool_nhwc.hpp"

#include <stdexcept>

namespace ppb {

namespace {

using dnnl::memory;

void require_nchw(const Shape& s) {
  if (s.size() != 4)
    throw std::invalid_argument("pooling expects a 4-D NCHW input, got shape " + shape_str(s));
}

// Output size; in ceil mode the last window must still start inside the
// input or the left padding (PyTorch's rule).
int64_t pooled_size(const char* axis, int64_t in, int64_t k, int64_t s, int64_t lo, int64_t hi,
                    bool ceil_mode) {
  const int64_t span = in + lo + hi - k;
  if (span < 0)
    throw std::invalid_argument(std::string("pooling: kernel ") + std::to_string(k) +
                                " is larger than the padded input " + axis + " (" +
                                std::to_string(in + lo + hi) + ")");
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + lo) --out;
  return out;
}

}  // namespace

Pool2d::Pool2d(const Pool2dConfig& cfg, Shape input_nchw, std::optional<int> threads,
               ActLayout layout)
    : UnaryKernel(threads, stored_shape(input_nchw, layout), false),
      cfg_(cfg),
      layout_(layout),
      in_nchw_(input_nchw) {
  require_nchw(input_nchw);
  // Channels-last and blocked data both keep a pixel's channels (all of
  // them, or a block's) contiguous: pool_nhwc runs on either.
  const bool lanes = layout != ActLayout::nchw;
  if (cfg.impl != "auto" && cfg.impl != "onednn" && cfg.impl != "direct")
    throw std::invalid_argument("pooling impl must be 'auto', 'onednn' or 'direct', got '" +
                                cfg.impl + "'");
  if (cfg.impl == "direct" && !lanes)
    throw std::invalid_argument(
        "pooling impl 'direct' needs channels-last or blocked data (nhwc=True)");
  // Auto: oneDNN 2.6's channels-last max pooling, and its average that
  // leaves the padding out, are 2-10x slower than pool_nhwc on AVX2 machines
  // (bench/pool_nhwc.py), its blocked max pooling about 3x (GoogLeNet batch 8);
  // its average over the padded window is faster, so it keeps that one.
  direct_ = cfg.impl == "direct" ||
            (cfg.impl == "auto" && lanes && !(cfg.kind == "avg" && cfg.count_include_pad));
  const Shape& in = input_nchw;
  require_positive_dims("kernel", Shape{cfg.kh, cfg.kw});
  require_positive_dims("stride", Shape{cfg.stride_h, cfg.stride_w});
  for (auto p : {cfg.pad_top, cfg.pad_bottom, cfg.pad_left, cfg.pad_right})
    require_at_least("padding", p, 0);
  if (cfg.pad_top >= cfg.kh || cfg.pad_bottom >= cfg.kh || cfg.pad_left >= cfg.kw ||
      cfg.pad_right >= cfg.kw)
    throw std::invalid_argument(
        "pooling: padding (" + std::to_string(cfg.pad_top) + ", " +
        std::to_string(cfg.pad_bottom) + ", " + std::to_string(cfg.pad_left) + ", " +
        std::to_string(cfg.pad_right) + ") must be smaller than the kernel (" +
        std::to_string(cfg.kh) + ", " + std::to_string(cfg.kw) + ")");
  dnnl::algorithm alg;
  if (cfg.kind == "max")
    alg = dnnl::algorithm::pooling_max;
  else if (cfg.kind == "avg")
    alg = cfg.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                : dnnl::algorithm::pooling_avg_exclude_padding;
  else
    throw std::invalid_argument("pooling kind must be 'max' or 'avg', got '" + cfg.kind + "'");

  const int64_t oh = pooled_size("height", in[2], cfg.kh, cfg.stride_h, cfg.pad_top,
                                 cfg.pad_bottom, cfg.ceil_mode);
  const int64_t ow = pooled_size("width", in[3], cfg.kw, cfg.stride_w, cfg.pad_left,
                                 cfg.pad_right, cfg.ceil_mode);
  const Shape out_nchw{in[0], in[1], oh, ow};
  set_output_shape(stored_shape(out_nchw, layout));
  // oneDNN derives nothing from ceil mode: the extra windows are expressed as
  // extra right/bottom padding.
  const int64_t pb = (oh - 1) * cfg.stride_h + cfg.kh - in[2] - cfg.pad_top;
  const int64_t pr = (ow - 1) * cfg.stride_w + cfg.kw - in[3] - cfg.pad_left;
  if (cfg.kind == "avg" && cfg.count_include_pad) {
    if (pb > cfg.pad_bottom)
      last_row_scale_ = static_cast<float>(cfg.kh) / static_cast<float>(cfg.kh - (pb - cfg.pad_bottom));
    if (pr > cfg.pad_right)
      last_col_scale_ = static_cast<float>(cfg.kw) / static_cast<float>(cfg.kw - (pr - cfg.pad_right));
  }

  const auto src = act_md(in, layout);
  const auto dst = act_md(out_nchw, layout);
  add_arg(DNNL_ARG_SRC, src);
  add_arg(DNNL_ARG_DST, dst);
  if (direct_) return;  // pool_nhwc computes the clipped divisors itself
  ThreadsScope scope(threads_);
  const auto pd = compat::pooling_pd(cpu_engine(), alg, src, dst, {cfg.stride_h, cfg.stride_w},
                                     {cfg.kh, cfg.kw}, {cfg.pad_top, cfg.pad_left}, {pb, pr},
                                     base_attr());
  prim_ = dnnl::pooling_forward(pd);
  add_scratchpad(pd);
}

void Pool2d::execute() {
  if (direct_) {
    ThreadsScope scope(threads_);
    const Shape& o = output_shape();
    const Shape& i = in_nchw_;
    // Blocked data is N * C / b channels-last images of b channels each.
    const int64_t b = channel_block(layout_);
    const PoolNhwcShape shape = layout_ == ActLayout::nhwc
                                    ? PoolNhwcShape{i[0], i[2], i[3], i[1], o[1], o[2]}
                                    : PoolNhwcShape{i[0] * i[1] / b, i[2], i[3], b, o[2], o[3]};
    pool_nhwc(cfg_, shape,
              static_cast<const float*>(args_.at(DNNL_ARG_SRC).get_data_handle()),
              static_cast<float*>(args_.at(DNNL_ARG_DST).get_data_handle()));
    return;
  }
  PrimitiveKernel::execute();
  if (last_row_scale_ == 1.f && last_col_scale_ == 1.f) return;
  auto* y = static_cast<float*>(args_.at(DNNL_ARG_DST).get_data_handle());
  // Every layout is planes of OH x OW pixels, each `lanes` floats: NCHW one
  // plane per channel, NHWC one per image with C lanes, blocked one per
  // block of b channels with b lanes.
  const Shape& in = in_nchw_;
  const int64_t b = channel_block(layout_);
  const int64_t lanes = layout_ == ActLayout::nhwc ? in[1] : b;
  const int64_t planes = in[0] * in[1] / lanes;
  const Shape& o = output_shape();
  const int64_t oh = layout_ == ActLayout::nhwc ? o[1] : o[2];
  const int64_t ow = layout_ == ActLayout::nhwc ? o[2] : o[3];
  const float rs = last_row_scale_, cs = last_col_scale_;
  ThreadsScope scope(threads_);
#pragma omp parallel for
  for (int64_t p = 0; p < planes * oh; ++p) {
    const int64_t row = p % oh;
    float* line = y + p * ow * lanes;
    for (int64_t j = 0; j < ow; ++j) {
      const float s = (row == oh - 1 ? rs : 1.f) * (j == ow - 1 ? cs : 1.f);
      if (s != 1.f)
        for (int64_t k = 0; k < lanes; ++k) line[j * lanes + k] *= s;
    }
  }
}

GlobalAvgPool::GlobalAvgPool(Shape input_nchw, std::optional<int> threads, ActLayout layout)
    : UnaryKernel(threads, stored_shape(input_nchw, layout), false) {
  require_nchw(input_nchw);
  const Shape& in = input_nchw;
  set_output_shape({in[0], in[1]});
  ThreadsScope scope(threads_);
  // (N, C, 1, 1) is the same memory in every layout (blocks filled).
  const auto src = act_md(in, layout);
  const auto dst = act_md({in[0], in[1], 1, 1}, layout);
  const auto pd = compat::pooling_pd(cpu_engine(), dnnl::algorithm::pooling_avg_exclude_padding,
                                     src, dst, {1, 1}, {in[2], in[3]}, {0, 0}, {0, 0},
                                     base_attr());
  prim_ = dnnl::pooling_forward(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, src);
  add_arg(DNNL_ARG_DST, dst);
}

}  // namespace ppb
