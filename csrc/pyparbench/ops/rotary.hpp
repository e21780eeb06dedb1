// Rotary position embedding, rotate-half form (Llama's, Qwen2's, ONNX's
// RotaryEmbedding non-interleaved): for x (..., S, D), D even, and tables
// cos, sin (S, D), y = x * cos + rotate_half(x) * sin, where
// rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2]).
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

 protected:
  void execute() override;

 private:
  void bind(ConstFloatView x, ConstFloatView cos, ConstFloatView sin, FloatView out);

  Shape shape_;
  ConstFloatView x_, cos_, sin_;
  FloatView y_;
};

}  // namespace ppb
