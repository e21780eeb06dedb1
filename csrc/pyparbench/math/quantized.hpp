// int8 matrix product and convolution on oneDNN: u8 or s8 activations (with
// a zero point), s8 weights quantised per output channel and symmetric (no
// weight zero point), s32 accumulation, then either a float32 output
// (acc · x_scale · w_scale[oc] + bias) or a u8 / s8 output requantised with
// its own scale and zero point; an optional fused ReLU acts on the rescaled
// value. dnnl_compat.hpp holds how oneDNN 2.x and 3.x take the scales.
// These kernels have their own entry points, not a `precision` of Linear /
// Conv2d: a quantised tensor carries its scale and zero point, which a
// precision name cannot.
#pragma once

#include "pyparbench/dnnl_compat.hpp"
#include "pyparbench/math/conv2d_op.hpp"
#include "pyparbench/ops/primitive_kernel.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ppb {

enum class QuantType { u8, s8, f32 };

// numpy's names ("uint8", "int8", "float32"); and back, "u8" / "s8" / "f32"
// accepted too (std::invalid_argument naming the kinds).
const char* quant_type_name(QuantType t);
QuantType parse_quant_type(const std::string& name, const char* what);

// What every int8 kernel takes besides its shapes.
struct QuantizedConfig {
  QuantType x_type = QuantType::u8;  // u8 or s8
  float x_scale = 1.f;
  int32_t x_zero_point = 0;
  std::vector<float> weight_scales;  // one per output channel, all > 0
  QuantType out_type = QuantType::f32;
  float out_scale = 1.f;  // u8 / s8 output only
  int32_t out_zero_point = 0;
  bool bias = false;  // float32, added after dequantisation
  bool relu = false;
};

// Bytes of x (u8 or s8, as prepared) and of the output (its prepared type).
using ConstByteView = View<const uint8_t>;
using ByteView = View<uint8_t>;

// What QuantizedLinear and QuantizedConv2d share: the checks of the
// quantisation, the runtime scale / zero point arguments, the weights' load
// and the runs.
class QuantizedKernel : public PrimitiveKernel {
 public:
  const QuantizedConfig& quantization() const { return q_; }
  // oneDNN's implementation name, and whether it runs int8 dot-product
  // instructions (VNNI, AMX) natively (dnnl_compat.hpp says how).
  const std::string& implementation() const { return implementation_; }
  bool native() const { return compat::int8_native(implementation_); }
  bool has_weights() const { return has_weights_; }
  const Shape& input_shape() const { return x_shape_; }
  const Shape& output_shape() const { return out_shape_; }
  const Shape& weight_shape() const { return w_shape_; }

  // Copies the s8 weight and the float32 bias (when prepared with one);
  // std::invalid_argument for a wrong shape or a missing / extra bias.
  void set_weights(View<const int8_t> weight, ConstFloatView bias);
  // out = the quantised op of x; std::invalid_argument before set_weights()
  // or for wrong shapes.
  void run(ConstByteView x, ByteView out);
  std::vector<double> timeit(ConstByteView x, ByteView out, int repeats, int warmup);

 protected:
  // Throws std::invalid_argument naming a bad type, scale or zero point;
  // `channels`: the number of output channels (weight scales expected).
  QuantizedKernel(const QuantizedConfig& q, int64_t channels, const char* name,
                  std::optional<int> threads);
  // The attributes for the quantisation (and the fused ReLU); keeps the
  // runtime arguments to add once the primitive exists.
  dnnl::primitive_attr quantized_attr(int weights_oc_mask, int dst_oc_mask);
  // After the primitive descriptor: scratchpad, arguments, runtime values.
  void finish(const dnnl::primitive_desc_base& pd, const dnnl::memory::desc& src,
              const dnnl::memory::desc& dst, const dnnl::memory::desc& weights,
              const dnnl::memory::desc& bias);

  QuantizedConfig q_;
  const char* name_;
  Shape x_shape_, out_shape_, w_shape_;
  dnnl::memory::desc user_weights_md_;
  std::string implementation_;

 private:
  void bind(ConstByteView x, ByteView out);

  compat::Int8Attr int8_attr_;
  bool has_weights_ = false;
};

dnnl::memory::data_type dnnl_type(QuantType t);

// y (m, n) = x (m, k) · Wᵀ with W (n, k), PyTorch's layout, reordered once
// into the layout the matmul picked.
class QuantizedLinear : public QuantizedKernel {
 public:
  QuantizedLinear(int64_t m, int64_t n, int64_t k, const QuantizedConfig& q,
                  std::optional<int> threads);
  double flops() const { return 2.0 * double(m_) * double(n_) * double(k_); }

 private:
  int64_t m_, n_, k_;
};

// 2-D convolution: geometry and layout (nchw / nhwc) from a Conv2dConfig
// (its bias and relu are the QuantizedConfig's; activation, sum and
// precision must be left as they are); weights OIHW, I = C / groups.
class QuantizedConv2d : public QuantizedKernel {
 public:
  QuantizedConv2d(const Conv2dConfig& geometry, const QuantizedConfig& q,
                  std::optional<int> threads);
  const Conv2dConfig& geometry() const { return g_; }
  double flops() const;

 private:
  Conv2dConfig g_;
};

}  // namespace ppb
