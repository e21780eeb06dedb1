// The gemm of the Library layer: C = op(A)·op(B) (+ bias) (+ ReLU) in fp32
// (bf16 A and B with fp32 accumulation on the onednn library), 2-D or batched, computed by oneDNN, Eigen or BLAS (onednn_ops.hpp,
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
  // bf16: A and B arrive as bf16 (run_bf16), the products accumulate in fp32,
  // C and the bias are fp32. The onednn library only.
  Precision precision = Precision::fp32;
};

// The activation a gemm or conv config asks for ("" for none);
// std::invalid_argument when relu and another activation are both set.
std::string fused_activation(bool relu, const std::string& activation);
// std::invalid_argument unless the fused activation is none or relu (the
// Eigen and BLAS epilogues know only ReLU); `op` and `library` name it.
void require_relu_only(const char* op, MathLibrary library, const std::string& activation);
// std::invalid_argument unless `precision` is fp32 (a library or kernel
// without a bf16 path); `op` names the kernel.
void require_fp32(const char* op, Precision precision);

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
  Precision precision() const { return cfg_.precision; }
  // What computes it: oneDNN's implementation name, or the library's.
  virtual std::string implementation() const { return knob_name(library()); }
  // Whether bf16 runs without bf16 dot-product instructions (dnnl_compat.hpp
  // says how that is decided); false for fp32.
  virtual bool emulated() const { return false; }
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
  // The same with bf16 A and B (precision bf16); std::invalid_argument on a
  // kernel prepared for fp32 or a library without bf16.
  virtual void run_bf16(ConstBf16View a, ConstBf16View b, ConstFloatView bias, FloatView out);
  virtual std::vector<double> timeit_bf16(ConstBf16View a, ConstBf16View b, ConstFloatView bias,
                                          FloatView out, int repeats, int warmup);

 protected:
  // Throws std::invalid_argument naming a size < 1 (batch < 0).
  GemmOp(const GemmConfig& cfg, const char* name);
  // Throws std::invalid_argument unless one run's arrays fit the prepared
  // shapes, bias is given exactly when prepared with it, and `out` overlaps
  // no input. Allocation-free on success.
  void check_run(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out) const;
  void check_run(ConstBf16View a, ConstBf16View b, ConstFloatView bias, FloatView out) const;
  // std::invalid_argument unless the kernel was prepared for `p`.
  void require_precision(Precision p) const;

 private:
  template <class T>
  void check_views(View<const T> a, View<const T> b, ConstFloatView bias, FloatView out) const;

  GemmConfig cfg_;
  const char* name_;
  Shape a_shape_, b_shape_, bias_shape_, out_shape_;
};

}  // namespace ppb
