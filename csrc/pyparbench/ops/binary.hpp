// Element-wise a + b or a * b (oneDNN binary), b broadcast over any axis
// where its size is 1, with an optional fused ReLU (a residual add). In
// place is allowed.
#pragma once

#include "pyparbench/ops/primitive_kernel.hpp"

#include <string>

namespace ppb {

class Binary : public PrimitiveKernel {
 public:
  // kind: "add" or "mul".
  Binary(const std::string& kind, Shape a, Shape b, bool relu, std::optional<int> threads);
  const std::string& kind() const { return kind_; }
  const Shape& a_shape() const { return a_; }
  const Shape& b_shape() const { return b_; }
  bool relu() const { return relu_; }

  void run(ConstFloatView a, ConstFloatView b, FloatView out);
  std::vector<double> timeit(ConstFloatView a, ConstFloatView b, FloatView out, int repeats,
                             int warmup);

 private:
  void bind(ConstFloatView a, ConstFloatView b, FloatView out);
  std::string kind_;
  Shape a_, b_;
  bool relu_;
};

}  // namespace ppb
