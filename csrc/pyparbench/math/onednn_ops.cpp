#include "pyparbench/math/onednn_ops.hpp"

#include "pyparbench/dnnl_compat.hpp"


namespace ppb {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// A (rows x cols) operand stored either row-major or transposed.
memory::desc operand_md(int64_t batch, int64_t rows, int64_t cols, bool transposed,
                        memory::data_type type) {
  memory::dims strides = transposed ? memory::dims{rows * cols, 1, rows}
                                    : memory::dims{rows * cols, cols, 1};
  memory::dims dims{batch, rows, cols};
  if (batch == 0) {
    dims.erase(dims.begin());
    strides.erase(strides.begin());
  }
  return memory::desc(dims, type, strides);
}

}  // namespace

Gemm::Gemm(const GemmConfig& cfg, std::optional<int> threads)
    : KernelOp(cfg, "Gemm", threads) {
  ThreadsScope scope(threads_);

  const auto in_type = data_type_of(cfg.precision);
  const auto src = operand_md(cfg.batch, cfg.m, cfg.k, cfg.trans_a, in_type);
  const auto wei = operand_md(cfg.batch, cfg.k, cfg.n, cfg.trans_b, in_type);
  const auto dst = operand_md(cfg.batch, cfg.m, cfg.n, false, memory::data_type::f32);
  const auto bias = cfg.bias ? plain_md(cfg.batch > 0 ? Shape{1, 1, cfg.n} : Shape{1, cfg.n})
                             : memory::desc();
  const dnnl::primitive_attr attr = post_op_attr(config().activation, false);
  const auto pd = compat::bf16_pd(cfg.precision == Precision::bf16, "Gemm", "matmul", [&] {
    return compat::matmul_pd(cpu_engine(), src, wei, bias, dst, attr);
  });
  implementation_ = pd.impl_info_str();
  prim_ = dnnl::matmul(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, src);
  add_arg(DNNL_ARG_WEIGHTS, wei);
  add_arg(DNNL_ARG_DST, dst);
  if (cfg.bias) add_arg(DNNL_ARG_BIAS, bias);
}

bool Gemm::emulated() const {
  return precision() == Precision::bf16 && compat::bf16_emulated(implementation_);
}

template <class T>
void Gemm::bind(View<const T> a, View<const T> b, ConstFloatView bias, FloatView out) {
  check_run(a, b, bias, out);
  bind_arg(DNNL_ARG_SRC, a.data);
  bind_arg(DNNL_ARG_WEIGHTS, b.data);
  bind_arg(DNNL_ARG_DST, out.data);
  if (bias.present()) bind_arg(DNNL_ARG_BIAS, bias.data);
}

void Gemm::run(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out) {
  run_with([&] { bind(a, b, bias, out); });
}

std::vector<double> Gemm::timeit(ConstFloatView a, ConstFloatView b, ConstFloatView bias,
                                 FloatView out, int repeats, int warmup) {
  return timed_with([&] { bind(a, b, bias, out); }, repeats, warmup);
}

void Gemm::run_bf16(ConstBf16View a, ConstBf16View b, ConstFloatView bias, FloatView out) {
  run_with([&] { bind(a, b, bias, out); });
}

std::vector<double> Gemm::timeit_bf16(ConstBf16View a, ConstBf16View b, ConstFloatView bias,
                                      FloatView out, int repeats, int warmup) {
  return timed_with([&] { bind(a, b, bias, out); }, repeats, warmup);
}

Conv2d::Conv2d(const Conv2dConfig& cfg, std::optional<int> threads)
    : PrimitiveConv2d(cfg, "Conv2d", threads) {
  ThreadsScope scope(threads_);
  const auto f32 = memory::data_type::f32;
  const auto in_type = data_type_of(cfg.precision);
  const memory::desc src = act_md({cfg.n, cfg.c, cfg.h, cfg.w}, src_layout(), in_type);
  // A bf16 dst: oneDNN accumulates and applies the bias and post-ops in
  // fp32, then rounds to nearest even as it stores.
  const memory::desc dst = act_md({cfg.n, cfg.out_channels, out_h(), out_w()}, cfg.layout,
                                  cfg.bf16_dst ? memory::data_type::bf16 : f32);
  const int64_t g = cfg.groups;
  memory::dims wdims = g > 1 ? memory::dims{g, cfg.out_channels / g, cfg.c / g, cfg.kh, cfg.kw}
                             : memory::dims{cfg.out_channels, cfg.c, cfg.kh, cfg.kw};
  user_weights_md_ = memory::desc(wdims, f32, g > 1 ? tag::goihw : tag::oihw);
  user_bf16_weights_md_ = memory::desc(wdims, memory::data_type::bf16, g > 1 ? tag::goihw : tag::oihw);
  const memory::desc any_weights(wdims, in_type, tag::any);
  const memory::desc bias = cfg.bias ? memory::desc({cfg.out_channels}, f32, tag::x)
                                     : memory::desc();
  const dnnl::primitive_attr attr = post_op_attr(config().activation, cfg.sum);
  // oneDNN counts dilation from 0 (0 = dense kernel).
  const auto pd = compat::bf16_pd(cfg.precision == Precision::bf16, "Conv2d", "convolution", [&] {
    return compat::conv_pd(cpu_engine(), src, any_weights, bias, dst,
                           {cfg.stride_h, cfg.stride_w}, {cfg.dilation_h - 1, cfg.dilation_w - 1},
                           {cfg.pad_top, cfg.pad_left}, {cfg.pad_bottom, cfg.pad_right}, attr);
  });
  implementation_ = pd.impl_info_str();
  prim_ = dnnl::convolution_forward(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, src);
  add_arg(DNNL_ARG_DST, dst);
  add_owned_arg(DNNL_ARG_WEIGHTS, pd.weights_desc());
  if (cfg.bias) add_owned_arg(DNNL_ARG_BIAS, bias);
}

bool PrimitiveConv2d::emulated() const {
  return precision() == Precision::bf16 && compat::bf16_emulated(implementation_);
}

void PrimitiveConv2d::run(ConstFloatView x, FloatView out) {
  run_with([&] { bind(x, out); });
}

std::vector<double> PrimitiveConv2d::timeit(ConstFloatView x, FloatView out, int repeats,
                                            int warmup) {
  return timed_with([&] { bind(x, out); }, repeats, warmup);
}

void PrimitiveConv2d::load_checked(ConstFloatView weight, const float* weights,
                                   ConstFloatView bias) {
  check_weights(weight, bias);
  locked([&] {
    load_weights(user_weights_md_, weights, bias.present() ? bias.data : nullptr,
                 config().out_channels);
    mark_weights_set();
  });
}

void Conv2d::set_weights(ConstFloatView weight, ConstFloatView bias) {
  load_checked(weight, weight.data, bias);
}

void Conv2d::set_weights_bf16(ConstBf16View weight, ConstFloatView bias) {
  check_weights(weight, bias);
  locked([&] {
    load_weights(user_bf16_weights_md_, weight.data, bias.present() ? bias.data : nullptr,
                 config().out_channels);
    mark_weights_set();
  });
}

void Conv2d::bind(ConstFloatView x, FloatView out) {
  check_run(x, out);
  bind_arg(DNNL_ARG_SRC, x.data);
  bind_arg(DNNL_ARG_DST, out.data);
}

void Conv2d::bind_bf16(ConstBf16View x, FloatView out) {
  check_run(x, out);
  bind_arg(DNNL_ARG_SRC, x.data);
  bind_arg(DNNL_ARG_DST, out.data);
}

void Conv2d::run_bf16(ConstBf16View x, FloatView out) {
  run_with([&] { bind_bf16(x, out); });
}

void Conv2d::run_bf16(ConstBf16View x, Bf16View out) {
  run_with([&] {
    check_run(x, out);
    bind_arg(DNNL_ARG_SRC, x.data);
    bind_arg(DNNL_ARG_DST, out.data);
  });
}

std::vector<double> Conv2d::timeit_bf16(ConstBf16View x, FloatView out, int repeats,
                                        int warmup) {
  return timed_with([&] { bind_bf16(x, out); }, repeats, warmup);
}

}  // namespace ppb
