// C = A·B (+ bias) (+ ReLU), fp32, 2-D or batched 3-D, optional transposes.
// One oneDNN matmul primitive with a ReLU post-op.
#pragma once

#include "pyparbench/ops/primitive_kernel.hpp"

namespace ppb {

struct GemmConfig {
  int64_t batch = 0;  // 0: plain 2-D matrices; >= 1: a batch of that many
  int64_t m = 1, n = 1, k = 1;
  bool trans_a = false;  // A is stored as (k, m)
  bool trans_b = false;  // B is stored as (n, k)
  bool bias = false;     // a bias vector of length n is added to every row
  bool relu = false;
};

class Gemm : public PrimitiveKernel {
 public:
  Gemm(const GemmConfig& cfg, std::optional<int> threads);

  const GemmConfig& config() const { return cfg_; }
  const Shape& a_shape() const { return a_shape_; }
  const Shape& b_shape() const { return b_shape_; }
  const Shape& bias_shape() const { return bias_shape_; }
  const Shape& out_shape() const { return out_shape_; }
  double flops() const;

  void run(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out);
  std::vector<double> timeit(ConstFloatView a, ConstFloatView b, ConstFloatView bias,
                             FloatView out, int repeats, int warmup);

 private:
  void bind(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out);
  GemmConfig cfg_;
  Shape a_shape_, b_shape_, bias_shape_, out_shape_;
};

}  // namespace ppb
