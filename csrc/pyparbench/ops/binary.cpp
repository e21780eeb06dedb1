#include "pyparbench/ops/binary.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/dnnl_compat.hpp"

#include <stdexcept>

namespace ppb {

Binary::Binary(const std::string& kind, Shape a, Shape b, bool relu, std::optional<int> threads)
    : PrimitiveKernel(threads), kind_(kind), a_(std::move(a)), b_(std::move(b)), relu_(relu) {
  if (kind != "add" && kind != "mul")
    throw std::invalid_argument("binary kind must be 'add' or 'mul', got '" + kind + "'");
  require_positive_dims("a", a_);
  require_positive_dims("b", b_);
  bool ok = a_.size() == b_.size() && !a_.empty();
  for (size_t i = 0; ok && i < a_.size(); ++i) ok = b_[i] == a_[i] || b_[i] == 1;
  if (!ok)
    throw std::invalid_argument(kind + ": b of shape " + shape_str(b_) +
                                " does not broadcast to a of shape " + shape_str(a_) +
                                " (same rank, each size equal or 1)");
  ThreadsScope scope(threads_);
  const auto a_md = plain_md(a_), b_md = plain_md(b_);
  const dnnl::primitive_attr attr = base_attr(relu);
  const auto pd = compat::binary_pd(
      cpu_engine(), kind == "add" ? dnnl::algorithm::binary_add : dnnl::algorithm::binary_mul,
      a_md, b_md, a_md, attr);
  prim_ = dnnl::binary(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC_0, a_md);
  add_arg(DNNL_ARG_SRC_1, b_md);
  add_arg(DNNL_ARG_DST, a_md);
}

void Binary::bind(ConstFloatView a, ConstFloatView b, FloatView out) {
  require_shape("a", a.shape, a_);
  require_shape("b", b.shape, b_);
  require_shape("out", out.shape, a_);
  require_no_partial_overlap("out", out, "a", a, true);
  require_no_partial_overlap("out", out, "b", b, b_ == a_);
  bind_arg(DNNL_ARG_SRC_0, a.data);
  bind_arg(DNNL_ARG_SRC_1, b.data);
  bind_arg(DNNL_ARG_DST, out.data);
}

void Binary::run(ConstFloatView a, ConstFloatView b, FloatView out) {
  run_with([&] { bind(a, b, out); });
}

std::vector<double> Binary::timeit(ConstFloatView a, ConstFloatView b, FloatView out, int repeats,
                                int warmup) {
  return timed_with([&] { bind(a, b, out); }, repeats, warmup);
}

}  // namespace ppb
