#include "pyparbench/math/quantized.hpp"

#include "pyparbench/math/int8_weight_reach.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/math/linear.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ppb {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

void require_finite_positive(const std::string& what, float v) {
  if (!(std::isfinite(v) && v > 0.f))
    throw std::invalid_argument(what + " must be a finite number > 0, got " + std::to_string(v));
}

void require_zero_point(const char* what, int32_t zp, QuantType t) {
  const int32_t lo = t == QuantType::u8 ? 0 : -128, hi = t == QuantType::u8 ? 255 : 127;
  if (zp < lo || zp > hi)
    throw std::invalid_argument(std::string(what) + " must lie in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "] for " + quant_type_name(t) + ", got " +
                                std::to_string(zp));
}

}  // namespace

const char* quant_type_name(QuantType t) {
  switch (t) {
    case QuantType::u8: return "uint8";
    case QuantType::s8: return "int8";
    case QuantType::f32: return "float32";
  }
  return "?";
}

QuantType parse_quant_type(const std::string& name, const char* what) {
  if (name == "u8" || name == "uint8") return QuantType::u8;
  if (name == "s8" || name == "int8") return QuantType::s8;
  if (name == "f32" || name == "float32") return QuantType::f32;
  throw std::invalid_argument(std::string(what) + " must be 'uint8', 'int8' or 'float32', got '" +
                              name + "'");
}

memory::data_type dnnl_type(QuantType t) {
  switch (t) {
    case QuantType::u8: return memory::data_type::u8;
    case QuantType::s8: return memory::data_type::s8;
    case QuantType::f32: break;
  }
  return memory::data_type::f32;
}

QuantizedKernel::QuantizedKernel(const QuantizedConfig& q, int64_t channels, const char* name,
                                 std::optional<int> threads)
    : PrimitiveKernel(threads), q_(q), name_(name) {
  if (q_.x_type == QuantType::f32)
    throw std::invalid_argument(std::string(name) + ": x must be u8 or s8, not f32");
  require_finite_positive("x_scale", q_.x_scale);
  require_zero_point("x_zero_point", q_.x_zero_point, q_.x_type);
  if (static_cast<int64_t>(q_.weight_scales.size()) != channels)
    throw std::invalid_argument(std::string(name) + ": weight_scales must hold one scale per "
                                "output channel (" + std::to_string(channels) + "), got " +
                                std::to_string(q_.weight_scales.size()));
  for (size_t c = 0; c < q_.weight_scales.size(); ++c)
    require_finite_positive("weight_scales[" + std::to_string(c) + "]", q_.weight_scales[c]);
  if (q_.out_type != QuantType::f32) {
    require_finite_positive("out_scale", q_.out_scale);
    require_zero_point("out_zero_point", q_.out_zero_point, q_.out_type);
  }
}

dnnl::primitive_attr QuantizedKernel::quantized_attr(int weights_oc_mask, int dst_oc_mask) {
  dnnl::primitive_attr attr = base_attr(q_.relu);
  compat::Int8Quantization iq;
  iq.src_scale = q_.x_scale;
  iq.src_zero_point = q_.x_zero_point;
  iq.weight_scales = q_.weight_scales;
  iq.requantize = q_.out_type != QuantType::f32;
  iq.dst_scale = q_.out_scale;
  iq.dst_zero_point = q_.out_zero_point;
  int8_attr_ = compat::set_int8_quantization(attr, iq, weights_oc_mask, dst_oc_mask);
  return attr;
}

void QuantizedKernel::finish(const dnnl::primitive_desc_base& pd, const memory::desc& src,
                             const memory::desc& dst, const memory::desc& weights,
                             const memory::desc& bias) {
  implementation_ = pd.impl_info_str();
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, src);
  add_arg(DNNL_ARG_DST, dst);
  add_owned_arg(DNNL_ARG_WEIGHTS, weights);
  if (q_.bias) add_owned_arg(DNNL_ARG_BIAS, bias);
  for (const auto& r : int8_attr_.runtime) {
    const memory::desc md = r.md();
    std::memcpy(add_owned_arg(r.arg, md).get_data_handle(), r.data(), md.get_size());
  }
}

void QuantizedKernel::set_weights(View<const int8_t> weight, ConstFloatView bias) {
  require_shape("weight", weight.shape, w_shape_);
  require_bias_presence(name_, q_.bias, bias.present());
  require_int8_weight_reach(name_, implementation_, weight.data, weight.size());
  if (q_.x_type == QuantType::s8 && w_shape_.size() == 4)
    require_int8_signed_source(name_, implementation_);
  const int64_t channels = static_cast<int64_t>(q_.weight_scales.size());
  std::vector<float> scaled_bias;
  if (bias.present()) {
    require_shape("bias", bias.shape, Shape{channels});
    scaled_bias.resize(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c)
      scaled_bias[size_t(c)] = bias.data[c] * int8_attr_.bias_factor[size_t(c)];
  }
  locked([&] {
    load_weights(user_weights_md_, weight.data, bias.present() ? scaled_bias.data() : nullptr,
                 channels);
    has_weights_ = true;
  });
}

void QuantizedKernel::bind(ConstByteView x, ByteView out) {
  if (!has_weights_)
    throw std::invalid_argument(std::string(name_) +
                                " has no weights yet: call set_weights(weight, bias) first");
  require_shape("x", x.shape, x_shape_);
  require_shape("out", out.shape, out_shape_);
  bind_arg(DNNL_ARG_SRC, x.data);
  bind_arg(DNNL_ARG_DST, out.data);
}

void QuantizedKernel::run(ConstByteView x, ByteView out) {
  run_with([&] { bind(x, out); });
}

std::vector<double> QuantizedKernel::timeit(ConstByteView x, ByteView out, int repeats,
                                            int warmup) {
  return timed_with([&] { bind(x, out); }, repeats, warmup);
}

QuantizedLinear::QuantizedLinear(int64_t m, int64_t n, int64_t k, const QuantizedConfig& q,
                                 std::optional<int> threads)
    : QuantizedKernel(q, n, "QuantizedLinear", threads), m_(m), n_(n), k_(k) {
  require_at_least("m", m, 1);
  require_at_least("n", n, 1);
  require_at_least("k", k, 1);
  ThreadsScope scope(threads_);
  x_shape_ = {m, k};
  out_shape_ = {m, n};
  w_shape_ = {n, k};
  const memory::desc src = plain_md(x_shape_, dnnl_type(q_.x_type));
  const memory::desc dst = plain_md(out_shape_, dnnl_type(q_.out_type));
  // The matmul's weights are (k, n); the user's (n, k) rows are its columns.
  user_weights_md_ = memory::desc({k, n}, memory::data_type::s8, tag::ba);
  const memory::desc bias = q_.bias ? plain_md({1, n}) : memory::desc();
  // Output channels: dimension 1 of the (k, n) weights and of the (m, n) dst.
  const dnnl::primitive_attr attr = quantized_attr(1 << 1, 1 << 1);
  const auto pd = constant_weights_matmul_pd(src, k, n, bias, dst, attr, memory::data_type::s8);
  prim_ = dnnl::matmul(pd);
  finish(pd, src, dst, pd.weights_desc(), bias);
}

QuantizedConv2d::QuantizedConv2d(const Conv2dConfig& geometry, const QuantizedConfig& q,
                                 std::optional<int> threads)
    : QuantizedKernel(q, geometry.out_channels, "QuantizedConv2d", threads), g_(geometry) {
  const Conv2dConfig& c = g_;
  for (auto [what, v] : {std::pair{"n", c.n}, {"c", c.c}, {"h", c.h}, {"w", c.w},
                         {"out_channels", c.out_channels}, {"kh", c.kh}, {"kw", c.kw},
                         {"stride_h", c.stride_h}, {"stride_w", c.stride_w},
                         {"dilation_h", c.dilation_h}, {"dilation_w", c.dilation_w},
                         {"groups", c.groups}})
    require_at_least(what, v, 1);
  for (auto [what, v] : {std::pair{"pad_top", c.pad_top}, {"pad_bottom", c.pad_bottom},
                         {"pad_left", c.pad_left}, {"pad_right", c.pad_right}})
    require_at_least(what, v, 0);
  if (c.c % c.groups != 0 || c.out_channels % c.groups != 0)
    throw std::invalid_argument("QuantizedConv2d: groups (" + std::to_string(c.groups) +
                                ") must divide the input channels (" + std::to_string(c.c) +
                                ") and the output channels (" + std::to_string(c.out_channels) +
                                ")");
  if (c.layout != ActLayout::nchw && c.layout != ActLayout::nhwc)
    throw std::invalid_argument("QuantizedConv2d: the layout must be nchw or nhwc");
  const int64_t oh = conv_out_size("height", c.h, c.kh, c.stride_h, c.pad_top, c.pad_bottom,
                                   c.dilation_h);
  const int64_t ow = conv_out_size("width", c.w, c.kw, c.stride_w, c.pad_left, c.pad_right,
                                   c.dilation_w);
  ThreadsScope scope(threads_);
  const bool nhwc = c.layout == ActLayout::nhwc;
  x_shape_ = nhwc ? Shape{c.n, c.h, c.w, c.c} : Shape{c.n, c.c, c.h, c.w};
  out_shape_ = nhwc ? Shape{c.n, oh, ow, c.out_channels} : Shape{c.n, c.out_channels, oh, ow};
  w_shape_ = {c.out_channels, c.c / c.groups, c.kh, c.kw};
  const tag act = nhwc ? tag::nhwc : tag::nchw;
  const memory::desc src({c.n, c.c, c.h, c.w}, dnnl_type(q_.x_type), act);
  const memory::desc dst({c.n, c.out_channels, oh, ow}, dnnl_type(q_.out_type), act);
  const int64_t g = c.groups;
  const memory::dims wdims = g > 1 ? memory::dims{g, c.out_channels / g, c.c / g, c.kh, c.kw}
                                   : memory::dims{c.out_channels, c.c, c.kh, c.kw};
  user_weights_md_ = memory::desc(wdims, memory::data_type::s8, g > 1 ? tag::goihw : tag::oihw);
  const memory::desc any_weights(wdims, memory::data_type::s8, tag::any);
  const memory::desc bias = q_.bias ? memory::desc({c.out_channels}, memory::data_type::f32,
                                                   tag::x)
                                    : memory::desc();
  // Output channels: weights' dimension 0 (with groups, 0 and 1), dst's 1.
  const dnnl::primitive_attr attr = quantized_attr(g > 1 ? 0b11 : 0b1, 1 << 1);
  // oneDNN counts dilation from 0 (0 = dense kernel).
  const auto pd = compat::conv_pd(cpu_engine(), src, any_weights, bias, dst,
                                  {c.stride_h, c.stride_w}, {c.dilation_h - 1, c.dilation_w - 1},
                                  {c.pad_top, c.pad_left}, {c.pad_bottom, c.pad_right}, attr);
  prim_ = dnnl::convolution_forward(pd);
  finish(pd, src, dst, pd.weights_desc(), bias);
}

double QuantizedConv2d::flops() const {
  double outputs = 1;
  for (int64_t d : out_shape_) outputs *= double(d);
  return 2.0 * outputs * double(g_.c / g_.groups) * double(g_.kh) *
         double(g_.kw);
}

}  // namespace ppb
