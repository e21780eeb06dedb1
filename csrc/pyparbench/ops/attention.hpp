// Scaled dot-product attention in one kernel: softmax(scale * q k^T + mask)
// v per (batch, head, query row), with an optional additive mask, an
// optional causal mask, and grouped-query attention (H query heads sharing
// Hkv key / value heads, H a multiple of Hkv: head h reads key / value head
// h / (H / Hkv); the shared heads are never repeated in memory).
//
// q (B, H, Sq, D), k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv) -> (B, H, Sq, Dv).
// The mask is 4-D and broadcasts into (B, H, Sq, Sk) (each axis 1 or full).
// Causal: query i sees keys j <= i + Sk - Sq (the queries are the last Sq
// positions); a hidden key's score is causal_fill (the float32 minimum, as
// exporters' masks write it: with any key seen it weighs nothing, with none
// every hidden key weighs the same; -inf: hidden keys leave the softmax). A
// row whose scores are all -inf is zero (the NaN guard exporters write
// after their softmax).
//
// Each run transposes k once into a padded buffer, then tiles of query rows
// of one (batch, head) run in parallel through the direct kernels' ISA
// tile (direct_attention.inc); a causal tile skips the keys it cannot see,
// and a row the keys past the last one its mask keeps, where the mask hides
// them at the float32 minimum or -inf (their weight is exactly 0). Only
// non-finite k or v rows tell the difference: a key left out drops the NaN
// a full sum would carry from it, and a key weighed 0 in a 4-row block (one
// row hides it, another sees it) carries 0 x inf = NaN.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/kernel.hpp"

#include <vector>

namespace ppb {

struct AttentionTileArgs;

class Attention : public Kernel {
 public:
  // mask: empty for none.
  Attention(Shape q, Shape k, Shape v, Shape mask, bool causal, float scale, float causal_fill,
            std::optional<int> threads);
  const Shape& output_shape() const { return out_; }

  // mask absent (data null) exactly when the kernel was made without one.
  void run(ConstFloatView q, ConstFloatView k, ConstFloatView v, ConstFloatView mask,
           FloatView out);
  std::vector<double> timeit(ConstFloatView q, ConstFloatView k, ConstFloatView v,
                             ConstFloatView mask, FloatView out, int repeats, int warmup);

 protected:
  void execute() override;

 private:
  void bind(ConstFloatView q, ConstFloatView k, ConstFloatView v, ConstFloatView mask,
            FloatView out);

  Shape q_shape_, k_shape_, v_shape_, mask_shape_, out_;
  bool causal_;
  float scale_, causal_fill_;
  ConstFloatView q_, k_, v_, mask_;
  FloatView y_;
  // k^T per (batch, key head): D rows of ldk_ floats, the keys past Sk zero.
  int64_t ldk_;
  std::vector<float> kt_;
  void (*tile_)(const AttentionTileArgs&);
};

}  // namespace ppb
