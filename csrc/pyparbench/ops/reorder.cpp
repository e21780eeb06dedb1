#include "pyparbench/ops/reorder.hpp"

#include "pyparbench/core/checks.hpp"

#include <stdexcept>

namespace ppb {

namespace {

dnnl::memory::desc stored_md(const Shape& nchw, ActLayout layout, dnnl::memory::data_type type) {
  // A plain tensor of another rank than 4 (a linear's rows) keeps its shape.
  if (nchw.size() != 4 && layout == ActLayout::nchw) return plain_md(nchw, type);
  return act_md(nchw, layout, type);
}

}  // namespace

Reorder::Reorder(const Shape& nchw, ActLayout from, ActLayout to, std::optional<int> threads,
                 Precision to_type)
    : UnaryKernel(threads, stored_shape(nchw, from), false), to_type_(to_type) {
  set_output_shape(stored_shape(nchw, to));
  init_reorder(stored_md(nchw, from, dnnl::memory::data_type::f32),
               stored_md(nchw, to, data_type_of(to_type)));
}

void Reorder::run_to_bf16(ConstFloatView x, View<uint16_t> out) {
  if (to_type_ != Precision::bf16)
    throw std::invalid_argument("run_to_bf16 needs a reorder prepared to write bf16");
  run_with([&] {
    require_shape("x", x.shape, input_shape());
    require_shape("out", out.shape, output_shape());
    require_no_partial_overlap("out", out, "x", x, false);
    bind_arg(DNNL_ARG_SRC, x.data);
    bind_arg(DNNL_ARG_DST, out.data);
  });
}

}  // namespace ppb
