// The gemm of the Library layer: C = op(A)·op(B) (+ bias) (+ ReLU) in fp32,
// 2-D or batched, computed by oneDNN, Eigen or BLAS (onednn_ops.hpp,
// eigen_ops.hpp, blas_ops.hpp). GemmOp holds what does not depend on the
// library (shapes, FLOPs, the checks of the arguments), so every library
// accepts and rejects exactly the same input; each library's kernel adds
// run() and timeit().
#pragma once

#include "pyparbench/core/knobs.hpp"
#include "pyparbench/core/tensor.hpp"

#include <string>
#include <vector>

namespace ppb {

class Kernel;

struct GemmConfig {
  int64_t batch = 0;  // 0: plain 2-D matrices; >= 1: a batch of that many
  int64_t m = 1, n = 1, k = 1;
  bool trans_a = false;  // A is stored as (k, m)
  bool trans_b = false;  // B is stored as (n, k)
  bool bias = false;     // a bias vector of length n is added to every row
  bool relu = false;
  // A fused eltwise activation (relu, relu6, sigmoid, tanh, gelu,
  // gelu_tanh, swish, hardswish); empty for none. relu = true is the same as "relu".
  std::string activation;
};

// The activation a gemm or conv config asks for ("" for none);
// std::invalid_argument when relu and another activation are both set.
std::string fused_activation(bool relu, const std::string& activation);
// std::invalid_argument unless the fused activation is none or relu (the
// Eigen and BLAS epilogues know only ReLU); `op` and `library` name it.
void require_relu_only(const char* op, MathLibrary library, const std::string& activation);

class GemmOp {
 public:
  using Config = GemmConfig;

  virtual ~GemmOp() = default;
  GemmOp(const GemmOp&) = delete;
  GemmOp& operator=(const GemmOp&) = delete;

  virtual MathLibrary library() const = 0;
  // Intra-op threads, fixed at creation.
  virtual int threads() const = 0;
  // The kernel behind the op: placement (pin) and audit.
  virtual Kernel& kernel() = 0;

  const GemmConfig& config() const { return cfg_; }
  const Shape& a_shape() const { return a_shape_; }
  const Shape& b_shape() const { return b_shape_; }
  const Shape& bias_shape() const { return bias_shape_; }
  const Shape& out_shape() const { return out_shape_; }
  double flops() const;

  // `bias` is absent (data == nullptr) unless the op was prepared with bias.
  virtual void run(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out) = 0;
  // Per-run nanoseconds of `repeats` timed runs after `warmup` untimed ones.
  virtual std::vector<double> timeit(ConstFloatView a, ConstFloatView b, ConstFloatView bias,
                                     FloatView out, int repeats, int warmup) = 0;

 protected:
  // Throws std::invalid_argument naming a size < 1 (batch < 0).
  GemmOp(const GemmConfig& cfg, const char* name);
  // Throws std::invalid_argument unless one run's arrays fit the prepared
  // shapes, bias is given exactly when prepared with it, and `out` overlaps
  // no input. Allocation-free on success.
  void check_run(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out) const;

 private:
  GemmConfig cfg_;
  const char* name_;
  Shape a_shape_, b_shape_, bias_shape_, out_shape_;
};

}  // namespace ppb
