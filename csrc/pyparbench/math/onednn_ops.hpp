// The onednn math library: gemm as one oneDNN matmul primitive, conv2d as
// one oneDNN convolution primitive, each with fused post-ops (an eltwise
// activation; for conv also the sum of a residual held in the output).
// gemm_op.hpp and conv2d_op.hpp hold the shapes and checks all libraries
// share.
#pragma once

#include "pyparbench/math/conv2d_op.hpp"
#include "pyparbench/math/gemm_op.hpp"
#include "pyparbench/math/kernel_op.hpp"
#include "pyparbench/ops/primitive_kernel.hpp"

namespace ppb {

// C = A·B (+ bias) (+ ReLU), 2-D or batched 3-D, optional transposes; fp32,
// or bf16 A and B (bf16 memory descriptors: oneDNN accumulates in fp32 and
// writes fp32 C).
class Gemm : public KernelOp<PrimitiveKernel, GemmOp> {
 public:
  Gemm(const GemmConfig& cfg, std::optional<int> threads);

  MathLibrary library() const override { return MathLibrary::onednn; }
  std::string implementation() const override { return implementation_; }
  bool emulated() const override;
  void run(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out) override;
  std::vector<double> timeit(ConstFloatView a, ConstFloatView b, ConstFloatView bias,
                             FloatView out, int repeats, int warmup) override;
  void run_bf16(ConstBf16View a, ConstBf16View b, ConstFloatView bias, FloatView out) override;
  std::vector<double> timeit_bf16(ConstBf16View a, ConstBf16View b, ConstFloatView bias,
                                  FloatView out, int repeats, int warmup) override;

 private:
  template <class T>
  void bind(View<const T> a, View<const T> b, ConstFloatView bias, FloatView out);

  std::string implementation_;  // oneDNN's name for what runs
};

// What the onednn library's convolutions (Conv2d, GemmConv2d) share: one
// primitive, weights reordered once into its layout, run() and timeit()
// around the subclass's bind().
class PrimitiveConv2d : public KernelOp<PrimitiveKernel, Conv2dOp> {
 public:
  MathLibrary library() const override { return MathLibrary::onednn; }
  std::string implementation() const override { return implementation_; }
  bool emulated() const override;
  void run(ConstFloatView x, FloatView out) override;
  std::vector<double> timeit(ConstFloatView x, FloatView out, int repeats, int warmup) override;

 protected:
  using KernelOp::KernelOp;
  // Checks x and out and points the primitive at them.
  virtual void bind(ConstFloatView x, FloatView out) = 0;
  // Checks the OIHW weight and the bias, then loads `weights` (the same
  // values, laid out as user_weights_md_) and the bias.
  void load_checked(ConstFloatView weight, const float* weights, ConstFloatView bias);

  dnnl::memory::desc user_weights_md_;
  std::string implementation_;  // oneDNN's name for what runs
};

// 2-D convolution, fp32 or bf16 (x and weights bf16, fp32 accumulation,
// fp32 output, or bf16 with Conv2dConfig::bf16_dst). Activations are NCHW (or NHWC); weights arrive as OIHW (PyTorch's
// layout), fp32 or bf16 whatever the precision, and are reordered once, in
// set_weights(), into the blocked layout and type the primitive picked.
class Conv2d : public PrimitiveConv2d {
 public:
  Conv2d(const Conv2dConfig& cfg, std::optional<int> threads);

  // Copies weights (reordered) and bias into the kernel.
  void set_weights(ConstFloatView weight, ConstFloatView bias) override;
  void set_weights_bf16(ConstBf16View weight, ConstFloatView bias) override;
  void run_bf16(ConstBf16View x, FloatView out) override;
  void run_bf16(ConstBf16View x, Bf16View out) override;
  std::vector<double> timeit_bf16(ConstBf16View x, FloatView out, int repeats,
                                  int warmup) override;

 private:
  void bind(ConstFloatView x, FloatView out) override;
  void bind_bf16(ConstBf16View x, FloatView out);

  dnnl::memory::desc user_bf16_weights_md_;
};

}  // namespace ppb
