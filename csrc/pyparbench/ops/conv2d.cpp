#include "pyparbench/ops/conv2d.hpp"

#include "pyparbench/dnnl_compat.hpp"

#include <cstring>

namespace ppb {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

}  // namespace

Conv2d::Conv2d(const Conv2dConfig& cfg, std::optional<int> threads)
    : KernelOp(cfg, "Conv2d", threads) {
  ThreadsScope scope(threads_);
  const auto f32 = memory::data_type::f32;
  const auto act = cfg.nhwc ? tag::nhwc : tag::nchw;
  const memory::desc src({cfg.n, cfg.c, cfg.h, cfg.w}, f32, act);
  const memory::desc dst({cfg.n, cfg.out_channels, out_h(), out_w()}, f32, act);
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

void Conv2d::set_weights(ConstFloatView weight, ConstFloatView bias) {
  check_weights(weight, bias);
  locked([&] {
    ThreadsScope scope(threads_);
    dnnl::memory user(user_weights_md_, cpu_engine(), const_cast<float*>(weight.data));
    auto& s = thread_stream();
    dnnl::reorder(user, args_.at(DNNL_ARG_WEIGHTS)).execute(s, user, args_.at(DNNL_ARG_WEIGHTS));
    s.wait();
    if (bias.present())
      std::memcpy(args_.at(DNNL_ARG_BIAS).get_data_handle(), bias.data,
                  sizeof(float) * static_cast<size_t>(config().out_channels));
    mark_weights_set();
  });
}

void Conv2d::bind(ConstFloatView x, FloatView out) {
  check_run(x, out);
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
