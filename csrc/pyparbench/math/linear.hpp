// A fully connected layer with constant weights, y = x·Wᵀ (+ bias)
// (+ activation), fp32, as one oneDNN matmul: the graph's `linear` node on
// the onednn library. The weights arrive as (n, k), PyTorch's layout, and
// are reordered once, in set_weights(), into the blocked layout the matmul
// picked (format `any`): given plain weights, the matmul packs them again on
// every run, 5x slower for one row of 512 x 512 on one thread.
#pragma once

#include "pyparbench/core/knobs.hpp"
#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/primitive_kernel.hpp"

#include <optional>
#include <string>
#include <vector>

namespace ppb {

struct LinearConfig {
  int64_t m = 1;  // rows of x
  int64_t n = 1;  // output features
  int64_t k = 1;  // input features
  bool bias = false;
  // A fused eltwise activation (relu, relu6, sigmoid, tanh, gelu,
  // gelu_tanh, swish, hardswish); empty for none.
  std::string activation;
  // bf16: x and the weights are bf16 (run_bf16; set_weights converts fp32
  // weights), the products accumulate in fp32, y and the bias are fp32.
  Precision precision = Precision::fp32;
  // Read the caller's (n, k) weights where they are, with no copy, when the
  // matmul's own pick keeps them plain anyway (gemm:jit, on machines without
  // AVX-512) and the same implementation takes them as given: the same sums,
  // bit for bit, without a second copy of the weights. Elsewhere (a blocked
  // layout picked, bf16) they are packed as usual: weights_in_place() says.
  bool weights_in_place = false;
};

// The matmul primitive for constant (k, n) weights, in the layout it picks
// (format any) and type `weights_type`; where it keeps them plain with rows a multiple of 1 KiB
// apart, they are padded by one cache line (L1 set aliasing). Linear and
// GemmConv2d (gemm_conv2d.hpp) use it.
dnnl::matmul::primitive_desc constant_weights_matmul_pd(const dnnl::memory::desc& src, int64_t k,
                                                        int64_t n, const dnnl::memory::desc& bias,
                                                        const dnnl::memory::desc& dst,
                                                        const dnnl::primitive_attr& attr,
                                                        dnnl::memory::data_type weights_type =
                                                            dnnl::memory::data_type::f32);

class Linear : public PrimitiveKernel {
 public:
  // Throws std::invalid_argument naming a size < 1 or an unknown activation.
  Linear(const LinearConfig& cfg, std::optional<int> threads);

  const LinearConfig& config() const { return cfg_; }
  double flops() const { return 2.0 * cfg_.m * cfg_.n * cfg_.k; }
  bool has_weights() const { return has_weights_; }
  // oneDNN's implementation name, and whether bf16 runs emulated
  // (dnnl_compat.hpp says how that is decided; false for fp32).
  const std::string& implementation() const { return implementation_; }
  bool emulated() const;
  // Whether set_weights() keeps a pointer to the caller's weights rather
  // than a copy (config().weights_in_place, where the matmul allows it): the
  // caller then keeps them alive and unchanged as long as this kernel.
  bool weights_in_place() const { return in_place_; }

  // Copies the weight (n, k) reordered, and the bias (n) when prepared with
  // one; std::invalid_argument for a wrong shape or a missing bias.
  void set_weights(ConstFloatView weight, ConstFloatView bias);
  void set_weights_bf16(ConstBf16View weight, ConstFloatView bias);
  // out (m, n) = x (m, k) · Wᵀ ...; std::invalid_argument before
  // set_weights(), for wrong shapes, or when out overlaps x.
  void run(ConstFloatView x, FloatView out);
  // Per-run nanoseconds of `repeats` timed runs after `warmup` untimed ones.
  std::vector<double> timeit(ConstFloatView x, FloatView out, int repeats, int warmup);
  // The same with bf16 x (precision bf16); std::invalid_argument otherwise.
  void run_bf16(ConstBf16View x, FloatView out);
  std::vector<double> timeit_bf16(ConstBf16View x, FloatView out, int repeats, int warmup);

 private:
  template <class T>
  void bind(View<const T> x, FloatView out);
  void load(const dnnl::memory::desc& user, Dims weight_shape, const void* weight,
            ConstFloatView bias);

  LinearConfig cfg_;
  Shape x_shape_, out_shape_, weight_shape_, bias_shape_;
  dnnl::memory::desc user_weights_md_, user_bf16_weights_md_;
  std::string implementation_;
  bool in_place_ = false;
  bool has_weights_ = false;
};

}  // namespace ppb
