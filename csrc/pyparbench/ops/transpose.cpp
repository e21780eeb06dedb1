#include "pyparbench/ops/transpose.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/core/engine.hpp"

#include <stdexcept>

namespace ppb {

Transpose::Transpose(Shape input, std::vector<int64_t> perm, std::optional<int> threads)
    : UnaryKernel(threads, std::move(input), false), perm_(std::move(perm)) {
  const Shape& in = input_shape();
  const size_t rank = in.size();
  std::vector<bool> seen(rank, false);
  bool ok = perm_.size() == rank;
  for (size_t i = 0; ok && i < rank; ++i) {
    ok = perm_[i] >= 0 && static_cast<size_t>(perm_[i]) < rank && !seen[perm_[i]];
    if (ok) seen[perm_[i]] = true;
  }
  if (!ok)
    throw std::invalid_argument("perm " + shape_str(perm_) + " is not a permutation of the " +
                                std::to_string(rank) + " axes of shape " + shape_str(in));
  Shape out(rank);
  dnnl::memory::dims strides_in(rank, 1), view_strides(rank);
  for (int i = static_cast<int>(rank) - 2; i >= 0; --i) strides_in[i] = strides_in[i + 1] * in[i + 1];
  for (size_t i = 0; i < rank; ++i) {
    out[i] = in[perm_[i]];
    view_strides[i] = strides_in[perm_[i]];
  }
  set_output_shape(out);
  // The input seen in output order: output dims, input strides.
  init_reorder(dnnl::memory::desc(dnnl::memory::dims(out.begin(), out.end()),
                                  dnnl::memory::data_type::f32, view_strides),
               plain_md(out));
}

}  // namespace ppb
