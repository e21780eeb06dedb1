// The same logical NCHW tensor copied from one activation layout into
// another (activation_layout.hpp) by oneDNN's reorder, and, for the bf16
// plan of a graph, fp32 values converted to bf16 (round to nearest even)
// in one pass, in their layout or into another.
#pragma once

#include "pyparbench/core/knobs.hpp"
#include "pyparbench/ops/activation_layout.hpp"
#include "pyparbench/ops/unary_kernel.hpp"

namespace ppb {

class Reorder : public UnaryKernel {
 public:
  // nchw: the logical (N, C, H, W) dims (any rank, plain, when converting
  // to bf16 without a layout change); run() takes the stored shapes of
  // `from` and `to` (stored_shape), fp32 in, `to_type` out (a bf16 output
  // buffer holds 2-byte elements). std::invalid_argument when a layout
  // cannot hold them.
  Reorder(const Shape& nchw, ActLayout from, ActLayout to, std::optional<int> threads,
          Precision to_type = Precision::fp32);

  // The conversion to bf16 (to_type bf16): out holds bf16 bits.
  // std::invalid_argument for an fp32 reorder, wrong shapes or overlap.
  void run_to_bf16(ConstFloatView x, View<uint16_t> out);

 private:
  Precision to_type_;
};

}  // namespace ppb
