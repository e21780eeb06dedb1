#include "pyparbench/ops/conv2d.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/dnnl_compat.hpp"

#include <cstring>
#include <stdexcept>

namespace ppb {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

int64_t out_size(const char* axis, int64_t in, int64_t k, int64_t stride, int64_t pad_lo,
                 int64_t pad_hi, int64_t dilation) {
  const int64_t span = dilation * (k - 1) + 1;
  const int64_t padded = in + pad_lo + pad_hi;
  if (padded < span)
    throw std::invalid_argument(std::string("conv2d: the dilated kernel (") +
                                std::to_string(span) + ") is larger than the padded input " +
                                axis + " (" + std::to_string(padded) + ")");
  return (padded - span) / stride + 1;
}

}  // namespace

Conv2d::Conv2d(const Conv2dConfig& cfg, std::optional<int> threads)
    : PrimitiveKernel(threads), cfg_(cfg) {
  require_positive_dims("input", Shape{cfg.n, cfg.c, cfg.h, cfg.w});
  require_at_least("out_channels", cfg.out_channels, 1);
  require_positive_dims("kernel", Shape{cfg.kh, cfg.kw});
  require_positive_dims("stride", Shape{cfg.stride_h, cfg.stride_w});
  require_positive_dims("dilation", Shape{cfg.dilation_h, cfg.dilation_w});
  for (auto p : {cfg.pad_top, cfg.pad_bottom, cfg.pad_left, cfg.pad_right})
    require_at_least("padding", p, 0);
  require_at_least("groups", cfg.groups, 1);
  if (cfg.c % cfg.groups || cfg.out_channels % cfg.groups)
    throw std::invalid_argument("conv2d: groups=" + std::to_string(cfg.groups) +
                                " must divide in_channels=" + std::to_string(cfg.c) +
                                " and out_channels=" + std::to_string(cfg.out_channels));
  oh_ = out_size("height", cfg.h, cfg.kh, cfg.stride_h, cfg.pad_top, cfg.pad_bottom,
                 cfg.dilation_h);
  ow_ = out_size("width", cfg.w, cfg.kw, cfg.stride_w, cfg.pad_left, cfg.pad_right,
                 cfg.dilation_w);

  in_shape_ = cfg.nhwc ? Shape{cfg.n, cfg.h, cfg.w, cfg.c} : Shape{cfg.n, cfg.c, cfg.h, cfg.w};
  out_shape_ = cfg.nhwc ? Shape{cfg.n, oh_, ow_, cfg.out_channels}
                        : Shape{cfg.n, cfg.out_channels, oh_, ow_};
  w_shape_ = {cfg.out_channels, cfg.c / cfg.groups, cfg.kh, cfg.kw};
  bias_shape_ = {cfg.out_channels};
  ThreadsScope scope(threads_);
  const auto f32 = memory::data_type::f32;
  const auto act = cfg.nhwc ? tag::nhwc : tag::nchw;
  const memory::desc src({cfg.n, cfg.c, cfg.h, cfg.w}, f32, act);
  const memory::desc dst({cfg.n, cfg.out_channels, oh_, ow_}, f32, act);
  const int64_t g = cfg.groups;
  memory::dims wdims = g > 1 ? memory::dims{g, cfg.out_channels / g, cfg.c / g, cfg.kh, cfg.kw}
                             : memory::dims{cfg.out_channels, cfg.c, cfg.kh, cfg.kw};
  user_weights_md_ = memory::desc(wdims, f32, g > 1 ? tag::goihw : tag::oihw);
  const memory::desc any_weights(wdims, f32, tag::any);
  const memory::desc bias = cfg.bias ? memory::desc({cfg.out_channels}, f32, tag::x)
                                     : memory::desc();
  dnnl::primitive_attr attr = base_attr();
  if (cfg.relu) {
    dnnl::post_ops ops;
    compat::append_eltwise(ops, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  // oneDNN counts dilation from 0 (0 = dense kernel).
  const auto pd = compat::conv_pd(cpu_engine(), src, any_weights, bias, dst,
                                  {cfg.stride_h, cfg.stride_w},
                                  {cfg.dilation_h - 1, cfg.dilation_w - 1},
                                  {cfg.pad_top, cfg.pad_left}, {cfg.pad_bottom, cfg.pad_right},
                                  attr);
  prim_ = dnnl::convolution_forward(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, src);
  add_arg(DNNL_ARG_DST, dst);
  add_owned_arg(DNNL_ARG_WEIGHTS, pd.weights_desc());
  if (cfg.bias) add_owned_arg(DNNL_ARG_BIAS, bias);
}

double Conv2d::flops() const {
  return 2.0 * cfg_.n * cfg_.out_channels * oh_ * ow_ * (cfg_.c / cfg_.groups) * cfg_.kh * cfg_.kw;
}

void Conv2d::set_weights(ConstFloatView weight, ConstFloatView bias) {
  require_shape("weight", weight.shape, weight_shape());
  if (cfg_.bias != bias.present())
    throw std::invalid_argument(cfg_.bias ? "bias is required: this Conv2d was prepared with bias"
                                          : "bias was given but this Conv2d was prepared "
                                            "without bias");
  if (bias.present()) require_shape("bias", bias.shape, bias_shape_);
  locked([&] {
    ThreadsScope scope(threads_);
    dnnl::memory user(user_weights_md_, cpu_engine(), const_cast<float*>(weight.data));
    auto& s = thread_stream();
    dnnl::reorder(user, args_.at(DNNL_ARG_WEIGHTS)).execute(s, user, args_.at(DNNL_ARG_WEIGHTS));
    s.wait();
    if (bias.present())
      std::memcpy(args_.at(DNNL_ARG_BIAS).get_data_handle(), bias.data,
                  sizeof(float) * static_cast<size_t>(cfg_.out_channels));
    has_weights_ = true;
  });
}

void Conv2d::bind(ConstFloatView x, FloatView out) {
  if (!has_weights_)
    throw std::invalid_argument("Conv2d has no weights yet: call set_weights(weight, bias) first");
  require_shape("x", x.shape, input_shape());
  require_shape("out", out.shape, output_shape());
  require_no_partial_overlap("out", out, "x", x, false);
  bind_arg(DNNL_ARG_SRC, x.data);
  bind_arg(DNNL_ARG_DST, out.data);
}

void Conv2d::run(ConstFloatView x, FloatView out) {
  run_with([&] { bind(x, out); });
}

std::vector<double> Conv2d::timeit(ConstFloatView x, FloatView out, int repeats, int warmup) {
  return timed_with([&] { bind(x, out); }, repeats, warmup);
}

}  // namespace ppb
