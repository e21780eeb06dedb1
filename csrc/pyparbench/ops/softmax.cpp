#include "pyparbench/ops/softmax.hpp"

#include "pyparbench/dnnl_compat.hpp"

#include <stdexcept>
#include <string>

namespace ppb {

Softmax::Softmax(Shape shape, int axis, std::optional<int> threads)
    : UnaryKernel(threads, std::move(shape), true), axis_(axis) {
  const int rank = static_cast<int>(input_shape().size());
  if (axis_ < 0) axis_ += rank;
  if (axis_ < 0 || axis_ >= rank)
    throw std::out_of_range("axis " + std::to_string(axis) + " is out of range for rank " +
                            std::to_string(rank));
  ThreadsScope scope(threads_);
  const auto md = plain_md(input_shape());
  const auto pd = compat::softmax_pd(cpu_engine(), md, axis_, base_attr());
  prim_ = dnnl::softmax_forward(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, md);
  add_arg(DNNL_ARG_DST, md);
}

}  // namespace ppb
