// A prepared kernel backed by one oneDNN primitive. Memory objects are made
// once without a data handle; each run only points them at the caller's
// buffers, so running creates nothing.
#pragma once

#include "pyparbench/core/engine.hpp"
#include "pyparbench/core/knobs.hpp"
#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/kernel.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <unordered_map>

namespace ppb {

// A plain (row-major, dense) descriptor of any rank, fp32 unless `type` says.
dnnl::memory::desc plain_md(const Shape& shape,
                            dnnl::memory::data_type type = dnnl::memory::data_type::f32);
// oneDNN's element type for a precision's weights and activations.
dnnl::memory::data_type data_type_of(Precision precision);

// An eltwise kind (relu, relu6, sigmoid, tanh, gelu, gelu_tanh, swish,
// hardswish) as oneDNN's algorithm and its alpha / beta; std::invalid_argument
// naming the kinds.
struct EltwiseAlgorithm {
  dnnl::algorithm alg;
  float alpha = 0.f, beta = 0.f;
};
EltwiseAlgorithm eltwise_algorithm(const std::string& kind);

class PrimitiveKernel : public Kernel {
 protected:
  using Kernel::Kernel;

  // Attributes every primitive is created with: a user-managed scratchpad
  // (oneDNN's library-managed one is shared between primitives, which then
  // cannot run at once, and the async executor runs independent nodes at
  // once), and a ReLU post-op when `fused_relu`.
  static dnnl::primitive_attr base_attr(bool fused_relu = false);
  // base_attr with post-ops: `sum` adds what dst holds (a residual) to the
  // result, then `activation` (an eltwise kind, empty for none) is applied.
  static dnnl::primitive_attr post_op_attr(const std::string& activation, bool sum);
  // Makes prim_ a oneDNN reorder copying src's layout into dst's (the
  // SRC / DST arguments and scratchpad included).
  void init_reorder(const dnnl::memory::desc& src, const dnnl::memory::desc& dst);
  // Gives the kernel its own scratchpad, sized for this primitive.
  void add_scratchpad(const dnnl::primitive_desc_base& pd);

  // Creates the memory object for argument `key`, with no buffer yet.
  void add_arg(int key, const dnnl::memory::desc& md);
  // Adds an argument that owns its buffer (weights in the primitive's layout).
  dnnl::memory& add_owned_arg(int key, const dnnl::memory::desc& md);
  // Reorders `weights`, laid out (and typed) as `user`, into the weights
  // argument's layout and type (fp32 to bf16 rounds to nearest even), and
  // copies `bias_len` floats of `bias` (when not null) into the bias
  // argument. Call it under the kernel's lock.
  void load_weights(const dnnl::memory::desc& user, const void* weights, const float* bias,
                    int64_t bias_len);
  void bind_arg(int key, const void* ptr);
  void execute() override;

  dnnl::primitive prim_;
  std::unordered_map<int, dnnl::memory> args_;
};

}  // namespace ppb
