// The 2-D convolution of the Library layer, fp32, computed by oneDNN, Eigen
// or BLAS (onednn_ops.hpp, eigen_ops.hpp, blas_ops.hpp). Conv2dOp holds what
// does not depend on the library (output size, shapes, FLOPs, the checks of
// the arguments), so every library accepts and rejects exactly the same
// input; each library's kernel adds set_weights(), run() and timeit().
#pragma once

#include "pyparbench/core/knobs.hpp"
#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/activation_layout.hpp"

#include <string>
#include <vector>

namespace ppb {

class Kernel;

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
  // How the activations are stored (activation_layout.hpp); plain_src: the
  // input is plain NCHW all the same (a first convolution whose few input
  // channels do not fill a block, writing blocked data).
  ActLayout layout = ActLayout::nchw;
  bool plain_src = false;
  // A fused eltwise activation, as GemmConfig's; relu = true is "relu".
  std::string activation;
  // dst = conv(x) + dst before the activation: the output buffer holds a
  // residual on entry (oneDNN's sum post-op).
  bool sum = false;
  // bf16: x and the weights are bf16 (run_bf16; set_weights converts fp32
  // weights), the products accumulate in fp32, the output and the bias are
  // fp32. Conv2d (the onednn library's direct convolution) only.
  Precision precision = Precision::fp32;
  // bf16 only, without `sum`: the output is bf16 (the fp32 result, bias
  // and activation included, rounded to nearest even as it is stored), for
  // a value only bf16 matrix nodes read; run_bf16 with a Bf16View out.
  bool bf16_dst = false;
};

// Output size along one axis (PyTorch's floor rule). Throws
// std::invalid_argument when the dilated kernel is larger than the padded
// input; `axis` ("height", "width") names it.
int64_t conv_out_size(const char* axis, int64_t in, int64_t k, int64_t stride, int64_t pad_lo,
                      int64_t pad_hi, int64_t dilation);

class Conv2dOp {
 public:
  using Config = Conv2dConfig;

  virtual ~Conv2dOp() = default;
  Conv2dOp(const Conv2dOp&) = delete;
  Conv2dOp& operator=(const Conv2dOp&) = delete;

  virtual MathLibrary library() const = 0;
  // Intra-op threads, fixed at creation.
  virtual int threads() const = 0;
  // The kernel behind the op: placement (pin) and audit.
  virtual Kernel& kernel() = 0;
  // What computes it: oneDNN's implementation name ("jit:avx2",
  // "brgconv:avx512_core", ...), "im2col+" and the product's.
  virtual std::string implementation() const = 0;

  // Whether bf16 runs without bf16 dot-product instructions (dnnl_compat.hpp
  // says how that is decided); false for fp32.
  virtual bool emulated() const { return false; }

  const Conv2dConfig& config() const { return cfg_; }
  Precision precision() const { return cfg_.precision; }
  ActLayout src_layout() const { return cfg_.plain_src ? ActLayout::nchw : cfg_.layout; }
  int64_t out_h() const { return oh_; }
  int64_t out_w() const { return ow_; }
  const Shape& input_shape() const { return in_shape_; }    // in the activation layout
  const Shape& output_shape() const { return out_shape_; }  // in the activation layout
  const Shape& weight_shape() const { return w_shape_; }    // OIHW with I = C / groups
  const Shape& bias_shape() const { return bias_shape_; }
  double flops() const;
  bool has_weights() const { return has_weights_; }

  // Copies the weights (OIHW) and the bias (absent unless prepared with
  // bias) into the kernel.
  virtual void set_weights(ConstFloatView weight, ConstFloatView bias) = 0;
  virtual void run(ConstFloatView x, FloatView out) = 0;
  // Per-run nanoseconds of `repeats` timed runs after `warmup` untimed ones.
  virtual std::vector<double> timeit(ConstFloatView x, FloatView out, int repeats,
                                     int warmup) = 0;
  // The same with bf16 x and weights (precision bf16); std::invalid_argument
  // on a kernel prepared for fp32 or one without bf16.
  virtual void set_weights_bf16(ConstBf16View weight, ConstFloatView bias);
  virtual void run_bf16(ConstBf16View x, FloatView out);
  // bf16 x to a bf16 output (prepared with bf16_dst).
  virtual void run_bf16(ConstBf16View x, Bf16View out);
  virtual std::vector<double> timeit_bf16(ConstBf16View x, FloatView out, int repeats,
                                          int warmup);

 protected:
  // Throws std::invalid_argument naming a bad size, stride, padding,
  // dilation or group count, or a kernel larger than the padded input.
  Conv2dOp(const Conv2dConfig& cfg, const char* name);
  // Throws std::invalid_argument for NCHW-only implementations given another layout;
  // `library` is named in the message.
  void require_nchw(MathLibrary library) const;
  // Throws std::invalid_argument unless the weight and bias fit.
  void check_weights(ConstFloatView weight, ConstFloatView bias) const;
  void check_weights(ConstBf16View weight, ConstFloatView bias) const;
  // Throws std::invalid_argument unless weights are set, x and out have the
  // prepared shapes and do not overlap. Allocation-free on success.
  void check_run(ConstFloatView x, FloatView out) const;
  void check_run(ConstBf16View x, FloatView out) const;
  void check_run(ConstBf16View x, Bf16View out) const;
  // std::invalid_argument unless the kernel was prepared for `p`.
  void require_precision(Precision p) const;
  // Called by set_weights() once the weights are in place.
  void mark_weights_set() { has_weights_ = true; }

 private:
  void check_weight_shapes(Dims weight, ConstFloatView bias) const;
  template <class T, class U>
  void check_views(View<const T> x, View<U> out) const;

  Conv2dConfig cfg_;
  const char* name_;
  int64_t oh_ = 0, ow_ = 0;
  Shape in_shape_, out_shape_, w_shape_, bias_shape_;
  bool has_weights_ = false;
};

}  // namespace ppb
