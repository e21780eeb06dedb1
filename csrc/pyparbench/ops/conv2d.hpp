// 2-D convolution, fp32, as one oneDNN convolution primitive: the onednn
// library's Conv2dOp (math/conv2d_op.hpp holds the shapes and checks all
// libraries share). Activations are NCHW (or NHWC); weights arrive as OIHW
// (PyTorch's layout) and are reordered once, in set_weights(), into the
// blocked layout the primitive picked.
#pragma once

#include "pyparbench/math/conv2d_op.hpp"
#include "pyparbench/math/kernel_op.hpp"
#include "pyparbench/ops/primitive_kernel.hpp"

namespace ppb {

class Conv2d : public KernelOp<PrimitiveKernel, Conv2dOp> {
 public:
  Conv2d(const Conv2dConfig& cfg, std::optional<int> threads);

  const char* library() const override { return "onednn"; }
  // Copies weights (reordered) and bias into the kernel.
  void set_weights(ConstFloatView weight, ConstFloatView bias) override;
  void run(ConstFloatView x, FloatView out) override;
  std::vector<double> timeit(ConstFloatView x, FloatView out, int repeats, int warmup) override;

 private:
  void bind(ConstFloatView x, FloatView out);
  dnnl::memory::desc user_weights_md_;
};

}  // namespace ppb
