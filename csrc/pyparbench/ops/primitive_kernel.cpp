#include "pyparbench/ops/primitive_kernel.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/dnnl_compat.hpp"

#include <cstring>
#include <stdexcept>

namespace ppb {

dnnl::memory::data_type data_type_of(Precision precision) {
  return precision == Precision::bf16 ? dnnl::memory::data_type::bf16
                                      : dnnl::memory::data_type::f32;
}

dnnl::memory::desc plain_md(const Shape& shape, dnnl::memory::data_type type) {
  dnnl::memory::dims dims(shape.begin(), shape.end());
  dnnl::memory::dims strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return dnnl::memory::desc(dims, type, strides);
}

EltwiseAlgorithm eltwise_algorithm(const std::string& kind) {
  using alg = dnnl::algorithm;
  if (kind == "relu") return {alg::eltwise_relu};
  if (kind == "relu6") return {alg::eltwise_clip, 0.f, 6.f};
  if (kind == "sigmoid") return {alg::eltwise_logistic};
  if (kind == "tanh") return {alg::eltwise_tanh};
  if (kind == "gelu") return {alg::eltwise_gelu_erf};
  if (kind == "gelu_tanh") return {alg::eltwise_gelu_tanh};
  // x * sigmoid(alpha x), alpha 1 (SiLU).
  if (kind == "swish") return {alg::eltwise_swish, 1.f};
  // x * min(1, max(0, alpha x + beta)): oneDNN 3 reads alpha and beta, 2.x
  // ignores them and applies these very constants.
  if (kind == "hardswish") return {alg::eltwise_hardswish, 1.f / 6.f, 0.5f};
  throw std::invalid_argument("unknown eltwise kind '" + kind +
                              "'; expected relu, relu6, sigmoid, tanh, gelu, gelu_tanh, swish or hardswish");
}

dnnl::primitive_attr PrimitiveKernel::base_attr(bool fused_relu) {
  return post_op_attr(fused_relu ? "relu" : "", false);
}

dnnl::primitive_attr PrimitiveKernel::post_op_attr(const std::string& activation, bool sum) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (!activation.empty() || sum) {
    dnnl::post_ops ops;
    if (sum) compat::append_sum(ops);
    if (!activation.empty()) {
      const EltwiseAlgorithm e = eltwise_algorithm(activation);
      compat::append_eltwise(ops, e.alg, e.alpha, e.beta);
    }
    attr.set_post_ops(ops);
  }
  return attr;
}

void PrimitiveKernel::init_reorder(const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
  ThreadsScope scope(threads_);
  const dnnl::reorder::primitive_desc pd(cpu_engine(), src, cpu_engine(), dst, base_attr());
  prim_ = dnnl::reorder(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, src);
  add_arg(DNNL_ARG_DST, dst);
}

void PrimitiveKernel::add_scratchpad(const dnnl::primitive_desc_base& pd) {
  const auto md = pd.scratchpad_desc();
  if (md.get_size() > 0) add_owned_arg(DNNL_ARG_SCRATCHPAD, md);
}

void PrimitiveKernel::add_arg(int key, const dnnl::memory::desc& md) {
  args_[key] = dnnl::memory(md, cpu_engine(), DNNL_MEMORY_NONE);
}

dnnl::memory& PrimitiveKernel::add_owned_arg(int key, const dnnl::memory::desc& md) {
  args_[key] = dnnl::memory(md, cpu_engine());
  return args_[key];
}

void PrimitiveKernel::load_weights(const dnnl::memory::desc& user, const void* weights,
                                   const float* bias, int64_t bias_len) {
  ThreadsScope scope(threads_);
  dnnl::memory src(user, cpu_engine(), const_cast<void*>(weights));
  auto& s = thread_stream();
  dnnl::reorder(src, args_.at(DNNL_ARG_WEIGHTS)).execute(s, src, args_.at(DNNL_ARG_WEIGHTS));
  s.wait();
  if (bias)
    std::memcpy(args_.at(DNNL_ARG_BIAS).get_data_handle(), bias,
                sizeof(float) * static_cast<size_t>(bias_len));
}

void PrimitiveKernel::bind_arg(int key, const void* ptr) {
  args_.at(key).set_data_handle(const_cast<void*>(ptr));
}

void PrimitiveKernel::execute() {
  ThreadsScope scope(threads_);
  auto& s = thread_stream();
  prim_.execute(s, args_);
  s.wait();
}

}  // namespace ppb
