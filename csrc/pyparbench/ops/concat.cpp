#include "pyparbench/ops/concat.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/dnnl_compat.hpp"

#include <stdexcept>

namespace ppb {

Concat::Concat(std::vector<Shape> inputs, int axis, std::optional<int> threads)
    : PrimitiveKernel(threads), inputs_(std::move(inputs)), axis_(axis) {
  if (inputs_.empty()) throw std::invalid_argument("concat needs at least one input");
  const int rank = static_cast<int>(inputs_[0].size());
  if (axis_ < 0) axis_ += rank;
  if (axis_ < 0 || axis_ >= rank)
    throw std::out_of_range("axis " + std::to_string(axis) + " is out of range for rank " +
                            std::to_string(rank));
  out_ = inputs_[0];
  out_[axis_] = 0;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Shape& s = inputs_[i];
    require_positive_dims("input " + std::to_string(i), s);
    bool ok = static_cast<int>(s.size()) == rank;
    for (int d = 0; ok && d < rank; ++d) ok = d == axis_ || s[d] == inputs_[0][d];
    if (!ok)
      throw std::invalid_argument("concat: input " + std::to_string(i) + " has shape " +
                                  shape_str(s) + ", which does not match input 0 " +
                                  shape_str(inputs_[0]) + " outside axis " +
                                  std::to_string(axis_));
    out_[axis_] += s[axis_];
  }
  ThreadsScope scope(threads_);
  std::vector<dnnl::memory::desc> srcs;
  for (const auto& s : inputs_) srcs.push_back(plain_md(s));
  const auto dst = plain_md(out_);
  const auto pd = compat::concat_pd(cpu_engine(), dst, axis_, srcs, base_attr());
  prim_ = dnnl::concat(pd);
  add_scratchpad(pd);
  for (size_t i = 0; i < srcs.size(); ++i) add_arg(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), srcs[i]);
  add_arg(DNNL_ARG_DST, dst);
}

void Concat::bind(const std::vector<ConstFloatView>& xs, FloatView out) {
  if (xs.size() != inputs_.size())
    throw std::invalid_argument("concat was prepared for " + std::to_string(inputs_.size()) +
                                " inputs, got " + std::to_string(xs.size()));
  require_shape("out", out.shape, out_);
  for (size_t i = 0; i < xs.size(); ++i) {
    const std::string name = "input " + std::to_string(i);
    require_shape(name, xs[i].shape, inputs_[i]);
    require_no_partial_overlap("out", out, name.c_str(), xs[i], false);
    bind_arg(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), xs[i].data);
  }
  bind_arg(DNNL_ARG_DST, out.data);
}

void Concat::run(const std::vector<ConstFloatView>& xs, FloatView out) {
  run_with([&] { bind(xs, out); });
}

std::vector<double> Concat::timeit(const std::vector<ConstFloatView>& xs, FloatView out,
                                   int repeats, int warmup) {
  return timed_with([&] { bind(xs, out); }, repeats, warmup);
}

}  // namespace ppb
