// C = A·B (+ bias) (+ ReLU), fp32, 2-D or batched 3-D, optional transposes.
// One oneDNN matmul primitive with a ReLU post-op: the onednn library's
// GemmOp (math/gemm_op.hpp holds the shapes and checks all libraries share).
#pragma once

#include "pyparbench/math/gemm_op.hpp"
#include "pyparbench/math/kernel_op.hpp"
#include "pyparbench/ops/primitive_kernel.hpp"

namespace ppb {

class Gemm : public KernelOp<PrimitiveKernel, GemmOp> {
 public:
  Gemm(const GemmConfig& cfg, std::optional<int> threads);

  const char* library() const override { return "onednn"; }
  void run(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out) override;
  std::vector<double> timeit(ConstFloatView a, ConstFloatView b, ConstFloatView bias,
                             FloatView out, int repeats, int warmup) override;

 private:
  void bind(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out);
};

}  // namespace ppb
