#include "pyparbench/math/gemm_conv2d.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/dnnl_compat.hpp"
#include "pyparbench/math/im2col.hpp"
#include "pyparbench/math/linear.hpp"

#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace ppb {

namespace {

using dnnl::memory;

const Conv2dConfig& lowerable(const Conv2dConfig& cfg) {
  if (cfg.layout != ActLayout::nhwc || cfg.plain_src)
    throw std::invalid_argument(std::string("GemmConv2d: activations must be channels-last "
                                            "(nhwc=True), got ") +
                                act_layout_name(cfg.plain_src ? ActLayout::nchw : cfg.layout));
  if (cfg.groups != 1)
    throw std::invalid_argument("GemmConv2d: groups must be 1, got " +
                                std::to_string(cfg.groups));
  require_fp32("GemmConv2d", cfg.precision);
  return cfg;
}

}  // namespace

GemmConv2d::GemmConv2d(const Conv2dConfig& cfg, std::optional<int> threads)
    : PrimitiveConv2d(lowerable(cfg), "GemmConv2d", threads) {
  const Conv2dConfig& c = config();
  rows_ = c.n * out_h() * out_w();
  width_ = c.kh * c.kw * c.c;
  const double bytes = 4.0 * static_cast<double>(rows_) * static_cast<double>(width_);
  if (bytes > static_cast<double>(kMaxGemmConvBytes))
    throw std::invalid_argument("GemmConv2d: the gathered patches would take " +
                                std::to_string(static_cast<int64_t>(bytes)) +
                                " bytes, more than " + std::to_string(kMaxGemmConvBytes) +
                                "; use Conv2d");
  ThreadsScope scope(threads_);
  const auto f32 = memory::data_type::f32;
  const memory::desc src = plain_md({rows_, width_});
  const memory::desc dst = plain_md({rows_, c.out_channels});
  // OHWI weights, the user's OIHW permuted in set_weights, are the
  // (KH·KW·C) x O matrix stored column by column.
  user_weights_md_ = memory::desc({width_, c.out_channels}, f32, memory::format_tag::ba);
  const memory::desc bias = c.bias ? plain_md({1, c.out_channels}) : memory::desc();
  const auto pd = constant_weights_matmul_pd(src, width_, c.out_channels, bias, dst,
                                             post_op_attr(c.activation, c.sum));
  implementation_ = "im2col+" + std::string(pd.impl_info_str());
  prim_ = dnnl::matmul(pd);
  add_scratchpad(pd);
  // oneDNN's own (aligned) buffer holds the patches.
  patches_ = static_cast<float*>(add_owned_arg(DNNL_ARG_SRC, src).get_data_handle());
  add_arg(DNNL_ARG_DST, dst);
  add_owned_arg(DNNL_ARG_WEIGHTS, pd.weights_desc());
  if (c.bias) add_owned_arg(DNNL_ARG_BIAS, bias);
}

void GemmConv2d::set_weights(ConstFloatView weight, ConstFloatView bias) {
  check_weights(weight, bias);
  const Conv2dConfig& c = config();
  const int64_t taps = c.kh * c.kw;
  std::vector<float> ohwi(static_cast<size_t>(c.out_channels * width_));
  for (int64_t o = 0; o < c.out_channels; ++o)
    for (int64_t ch = 0; ch < c.c; ++ch)
      for (int64_t t = 0; t < taps; ++t)
        ohwi[static_cast<size_t>((o * taps + t) * c.c + ch)] =
            weight.data[(o * c.c + ch) * taps + t];
  load_checked(weight, ohwi.data(), bias);
}

void GemmConv2d::bind(ConstFloatView x, FloatView out) {
  check_run(x, out);
  x_ = x.data;
  bind_arg(DNNL_ARG_DST, out.data);
}

void GemmConv2d::execute() {
  // One contiguous block of rows per thread of the kernel's team, the team
  // the matmul then runs on.
  const int team = static_cast<int>(std::clamp<int64_t>(rows_, 1, threads_));
#pragma omp parallel num_threads(team) if (team > 1)
  {
    const int64_t t = omp_get_thread_num(), size = omp_get_num_threads();
    im2col_nhwc_rows(config(), out_h(), out_w(), x_, patches_, rows_ * t / size,
                     rows_ * (t + 1) / size);
  }
  PrimitiveKernel::execute();
}

bool gemm_conv2d_pays(const Conv2dOp& direct) {
  const Conv2dConfig& cfg = direct.config();
  const std::string impl = direct.implementation();
  const bool older_jit = impl.rfind("jit:avx2", 0) == 0 || impl.rfind("jit:sse41", 0) == 0;
  const int64_t pixels = direct.out_h() * direct.out_w();
  const double bytes = 4.0 * static_cast<double>(cfg.n * pixels) *
                       static_cast<double>(cfg.kh * cfg.kw * cfg.c);
  return older_jit && cfg.layout == ActLayout::nhwc && !cfg.plain_src && cfg.groups == 1 &&
         cfg.kh * cfg.kw > 1 && pixels <= 14 * 14 && bytes <= 16.0 * (1 << 20);
}

}  // namespace ppb
