#include "pyparbench/ops/reorder.hpp"

namespace ppb {

Reorder::Reorder(const Shape& nchw, ActLayout from, ActLayout to, std::optional<int> threads)
    : UnaryKernel(threads, stored_shape(nchw, from), false) {
  set_output_shape(stored_shape(nchw, to));
  init_reorder(act_md(nchw, from), act_md(nchw, to));
}

}  // namespace ppb
