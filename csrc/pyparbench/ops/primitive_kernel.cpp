#include "pyparbench/ops/primitive_kernel.hpp"

#include "pyparbench/dnnl_compat.hpp"

namespace ppb {

dnnl::memory::desc plain_md(const Shape& shape) {
  dnnl::memory::dims dims(shape.begin(), shape.end());
  dnnl::memory::dims strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

dnnl::primitive_attr PrimitiveKernel::base_attr(bool fused_relu) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (fused_relu) {
    dnnl::post_ops ops;
    compat::append_eltwise(ops, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  return attr;
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
