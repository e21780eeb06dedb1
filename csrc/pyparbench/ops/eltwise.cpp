#include "pyparbench/ops/eltwise.hpp"

#include "pyparbench/dnnl_compat.hpp"

#include <stdexcept>

namespace ppb {

Eltwise::Eltwise(const std::string& kind, Shape shape, std::optional<int> threads)
    : UnaryKernel(threads, std::move(shape), true), kind_(kind) {
  const EltwiseAlgorithm e = eltwise_algorithm(kind);
  ThreadsScope scope(threads_);
  const auto md = plain_md(input_shape());
  const auto pd = compat::eltwise_pd(cpu_engine(), e.alg, md, e.alpha, e.beta, base_attr());
  prim_ = dnnl::eltwise_forward(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, md);
  add_arg(DNNL_ARG_DST, md);
}

}  // namespace ppb
