#include "pyparbench/math/conv2d_op.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/core/limits.hpp"
#include "pyparbench/math/gemm_op.hpp"

#include <stdexcept>
#include <string>

namespace ppb {

int64_t conv_out_size(const char* axis, int64_t in, int64_t k, int64_t stride, int64_t pad_lo,
                      int64_t pad_hi, int64_t dilation) {
  const int64_t span = dilation * (k - 1) + 1;
  const int64_t padded = in + pad_lo + pad_hi;
  if (padded < span)
    throw std::invalid_argument(std::string("conv2d: the dilated kernel (") +
                                std::to_string(span) + ") is larger than the padded input " +
                                axis + " (" + std::to_string(padded) + ")");
  return (padded - span) / stride + 1;
}

Conv2dOp::Conv2dOp(const Conv2dConfig& cfg, const char* name) : cfg_(cfg), name_(name) {
  cfg_.activation = fused_activation(cfg.relu, cfg.activation);
  cfg_.relu = cfg_.activation == "relu";
  require_positive_dims("input", Shape{cfg.n, cfg.c, cfg.h, cfg.w});
  require_at_least("out_channels", cfg.out_channels, 1);
  require_positive_dims("kernel", Shape{cfg.kh, cfg.kw});
  require_positive_dims("stride", Shape{cfg.stride_h, cfg.stride_w});
  require_positive_dims("dilation", Shape{cfg.dilation_h, cfg.dilation_w});
  for (auto p : {cfg.pad_top, cfg.pad_bottom, cfg.pad_left, cfg.pad_right})
    require_at_least("padding", p, 0);
  require_at_least("groups", cfg.groups, 1);
  // The sum post-op adds an fp32 residual held in dst.
  if (cfg.bf16_dst && (cfg.precision != Precision::bf16 || cfg.sum))
    throw std::invalid_argument(std::string(name) +
                                ": a bf16 output needs precision bf16 and no residual sum");
  // Bounded before the output size is computed from them.
  for (auto v : {cfg.kh, cfg.kw, cfg.stride_h, cfg.stride_w, cfg.dilation_h, cfg.dilation_w,
                 cfg.pad_top, cfg.pad_bottom, cfg.pad_left, cfg.pad_right})
    require_at_most("conv2d kernel, stride, dilation and padding", v, kMaxDim);
  require_positive_dims("output channels", Shape{cfg.out_channels});
  if (cfg.c % cfg.groups || cfg.out_channels % cfg.groups)
    throw std::invalid_argument("conv2d: groups=" + std::to_string(cfg.groups) +
                                " must divide in_channels=" + std::to_string(cfg.c) +
                                " and out_channels=" + std::to_string(cfg.out_channels));
  oh_ = conv_out_size("height", cfg.h, cfg.kh, cfg.stride_h, cfg.pad_top, cfg.pad_bottom,
                      cfg.dilation_h);
  ow_ = conv_out_size("width", cfg.w, cfg.kw, cfg.stride_w, cfg.pad_left, cfg.pad_right,
                      cfg.dilation_w);
  in_shape_ = stored_shape({cfg.n, cfg.c, cfg.h, cfg.w}, src_layout());
  out_shape_ = stored_shape({cfg.n, cfg.out_channels, oh_, ow_}, cfg.layout);
  w_shape_ = {cfg.out_channels, cfg.c / cfg.groups, cfg.kh, cfg.kw};
  require_positive_dims("output", out_shape_);
  require_positive_dims("weight", w_shape_);
  bias_shape_ = {cfg.out_channels};
}

double Conv2dOp::flops() const {
  return 2.0 * cfg_.n * cfg_.out_channels * oh_ * ow_ * (cfg_.c / cfg_.groups) * cfg_.kh *
         cfg_.kw;
}

void Conv2dOp::require_nchw(MathLibrary library) const {
  if (cfg_.layout != ActLayout::nchw)
    throw std::invalid_argument(std::string("conv2d: the ") + knob_name(library) +
                                " library supports nchw only, got " +
                                act_layout_name(cfg_.layout) +
                                "; use the onednn library for other activation layouts");
}

void Conv2dOp::require_precision(Precision p) const {
  if (cfg_.precision != p)
    throw std::invalid_argument(std::string(name_) + " was prepared with precision '" +
                                knob_name(cfg_.precision) + "', so x must be " +
                                (cfg_.precision == Precision::bf16
                                     ? "a bfloat16 array (ml_dtypes.bfloat16)"
                                     : "a float32 array") +
                                ", not " + (p == Precision::bf16 ? "bfloat16" : "float32"));
}

// A kernel without a bf16 path (see GemmOp::run_bf16): the call is refused,
// saying which the kernel takes.
void Conv2dOp::set_weights_bf16(ConstBf16View, ConstFloatView) {
  throw std::invalid_argument(std::string(name_) +
                              " takes float32 weights only (it computes fp32); bfloat16 "
                              "weights go to Conv2d, the onednn library's convolution");
}

void Conv2dOp::run_bf16(ConstBf16View, FloatView) {
  require_precision(Precision::bf16);
  require_fp32(name_, Precision::bf16);
}

void Conv2dOp::run_bf16(ConstBf16View, Bf16View) {
  require_precision(Precision::bf16);
  require_fp32(name_, Precision::bf16);
}

std::vector<double> Conv2dOp::timeit_bf16(ConstBf16View, FloatView, int, int) {
  require_precision(Precision::bf16);
  require_fp32(name_, Precision::bf16);
  return {};
}

void Conv2dOp::check_weights(ConstFloatView weight, ConstFloatView bias) const {
  check_weight_shapes(weight.shape, bias);
}

void Conv2dOp::check_weights(ConstBf16View weight, ConstFloatView bias) const {
  check_weight_shapes(weight.shape, bias);
}

void Conv2dOp::check_weight_shapes(Dims weight, ConstFloatView bias) const {
  require_shape("weight", weight, w_shape_);
  require_bias_presence(name_, cfg_.bias, bias.present());
  if (bias.present()) require_shape("bias", bias.shape, bias_shape_);
}

void Conv2dOp::check_run(ConstFloatView x, FloatView out) const {
  require_precision(Precision::fp32);
  check_views(x, out);
}

void Conv2dOp::check_run(ConstBf16View x, FloatView out) const {
  require_precision(Precision::bf16);
  if (cfg_.bf16_dst)
    throw std::invalid_argument(std::string(name_) +
                                " was prepared with a bf16 output: out must be bfloat16");
  check_views(x, out);
}

void Conv2dOp::check_run(ConstBf16View x, Bf16View out) const {
  require_precision(Precision::bf16);
  if (!cfg_.bf16_dst)
    throw std::invalid_argument(std::string(name_) +
                                " was prepared with a float32 output: out must be float32");
  check_views(x, out);
}

template <class T, class U>
void Conv2dOp::check_views(View<const T> x, View<U> out) const {
  if (!has_weights_)
    throw std::invalid_argument(std::string(name_) +
                                " has no weights yet: call set_weights(weight, bias) first");
  require_shape("x", x.shape, in_shape_);
  require_shape("out", out.shape, out_shape_);
  require_no_partial_overlap("out", out, "x", x, false);
}

}  // namespace ppb
