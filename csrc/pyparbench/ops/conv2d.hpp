// 2-D convolution, fp32, as one oneDNN convolution primitive. Activations are
// NCHW (or NHWC); weights arrive as OIHW (PyTorch's layout) and are reordered
// once, in set_weights(), into the blocked layout the primitive picked.
#pragma once

#include "pyparbench/ops/primitive_kernel.hpp"

namespace ppb {

struct Conv2dConfig {
  int64_t n = 1, c = 1, h = 1, w = 1;  // input, logical NCHW
  int64_t out_channels = 1;
  int64_t kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;  // 1 = no dilation (PyTorch's convention)
  int64_t groups = 1;
  bool bias = false;
  bool relu = false;
  bool nhwc = false;  // activations stored N,H,W,C instead of N,C,H,W
};

class Conv2d : public PrimitiveKernel {
 public:
  Conv2d(const Conv2dConfig& cfg, std::optional<int> threads);

  const Conv2dConfig& config() const { return cfg_; }
  int64_t out_h() const { return oh_; }
  int64_t out_w() const { return ow_; }
  const Shape& input_shape() const { return in_shape_; }    // in the activation layout
  const Shape& output_shape() const { return out_shape_; }  // in the activation layout
  const Shape& weight_shape() const { return w_shape_; }    // OIHW with I = C / groups
  double flops() const;
  bool has_weights() const { return has_weights_; }

  // Copies weights (reordered) and bias into the kernel.
  void set_weights(ConstFloatView weight, ConstFloatView bias);
  void run(ConstFloatView x, FloatView out);
  std::vector<double> timeit(ConstFloatView x, FloatView out, int repeats, int warmup);

 private:
  void bind(ConstFloatView x, FloatView out);
  Conv2dConfig cfg_;
  int64_t oh_ = 0, ow_ = 0;
  Shape in_shape_, out_shape_, w_shape_, bias_shape_;
  dnnl::memory::desc user_weights_md_;
  bool has_weights_ = false;
};

}  // namespace ppb
