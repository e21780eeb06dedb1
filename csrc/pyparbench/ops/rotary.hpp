// Rotary position embedding, rotate-half form (Llama's, Qwen2's, ONNX's
// RotaryEmbedding non-interleaved): for x (..., S, D), D even, and tables
// cos, sin (S, D), y = x * cos + rotate_half(x) * sin, where
// rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2]). Or, with int64
// positions (B, S) of an x (B, ..., S, D), the tables computed as the node
// runs, as exporters write them: angle = float32(position) * inv_freq[i]
// (float32), cos / sin of it times a scaling, each angle in both halves;
// or the rows of tables (C, D) at those positions (ONNX's RotaryEmbedding
// with position_ids), each position in 0 .. C - 1.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/kernel.hpp"

#include <vector>

namespace ppb {

class Rotary : public Kernel {
 public:
  Rotary(Shape shape, std::optional<int> threads);
  const Shape& shape() const { return shape_; }

  // cos, sin: (S, D), the positions of the input's rows. out must not be x.
  void run(ConstFloatView x, ConstFloatView cos, ConstFloatView sin, FloatView out);
  std::vector<double> timeit(ConstFloatView x, ConstFloatView cos, ConstFloatView sin,
                             FloatView out, int repeats, int warmup);
  // positions: (B, S) int64, B the input's leading axis; inv_freq (D / 2).
  void run_positions(ConstFloatView x, const int64_t* positions, ConstFloatView inv_freq,
                     float scaling, FloatView out);
  // positions: (B, S) int64 rows of cos, sin (C, D).
  void run_indexed(ConstFloatView x, const int64_t* positions, ConstFloatView cos,
                   ConstFloatView sin, FloatView out);

 protected:
  void execute() override;

 private:
  void bind(ConstFloatView x, ConstFloatView cos, ConstFloatView sin, FloatView out);
  // The checks and views both positions runs share.
  void bind_positions(ConstFloatView x, const int64_t* positions, FloatView out, bool indexed);
  void execute_positions();

  Shape shape_;
  ConstFloatView x_, cos_, sin_;
  FloatView y_;
  const int64_t* positions_ = nullptr;  // null: the tables cos_, sin_
  bool indexed_ = false;                 // positions index cos_, sin_ (C, D)
  ConstFloatView inv_freq_;
  float scaling_ = 1.0f;
};

}  // namespace ppb
