#include "pyparbench/ops/eltwise.hpp"

#include "pyparbench/dnnl_compat.hpp"

#include <stdexcept>

namespace ppb {

Eltwise::Eltwise(const std::string& kind, Shape shape, std::optional<int> threads)
    : UnaryKernel(threads, std::move(shape), true), kind_(kind) {
  using alg = dnnl::algorithm;
  alg a;
  float alpha = 0.f, beta = 0.f;
  if (kind == "relu") {
    a = alg::eltwise_relu;
  } else if (kind == "relu6") {
    a = alg::eltwise_clip;
    beta = 6.f;
  } else if (kind == "sigmoid") {
    a = alg::eltwise_logistic;
  } else if (kind == "tanh") {
    a = alg::eltwise_tanh;
  } else if (kind == "gelu") {
    a = alg::eltwise_gelu_erf;
  } else if (kind == "gelu_tanh") {
    a = alg::eltwise_gelu_tanh;
  } else {
    throw std::invalid_argument("unknown eltwise kind '" + kind +
                                "'; expected relu, relu6, sigmoid, tanh, gelu or gelu_tanh");
  }
  ThreadsScope scope(threads_);
  const auto md = plain_md(input_shape());
  const auto pd = compat::eltwise_pd(cpu_engine(), a, md, alpha, beta, base_attr());
  prim_ = dnnl::eltwise_forward(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, md);
  add_arg(DNNL_ARG_DST, md);
}

}  // namespace ppb
