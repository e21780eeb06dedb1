// The same logical NCHW tensor copied from one activation layout into
// another (activation_layout.hpp) by oneDNN's reorder.
#pragma once

#include "pyparbench/ops/activation_layout.hpp"
#include "pyparbench/ops/unary_kernel.hpp"

namespace ppb {

class Reorder : public UnaryKernel {
 public:
  // nchw: the logical (N, C, H, W) dims; run() takes the stored shapes of
  // `from` and `to` (stored_shape). std::invalid_argument when a layout
  // cannot hold them.
  Reorder(const Shape& nchw, ActLayout from, ActLayout to, std::optional<int> threads);
};

}  // namespace ppb
