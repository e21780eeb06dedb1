// RMS normalisation over the last axis (Llama's, T5's, ONNX's
// RMSNormalization): y = x / sqrt(mean(x^2) + eps) * scale.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/kernel.hpp"

#include <vector>

namespace ppb {

class RmsNorm : public Kernel {
 public:
  RmsNorm(Shape shape, float eps, std::optional<int> threads);
  const Shape& shape() const { return shape_; }

  // scale: (last axis,). out may be x.
  void run(ConstFloatView x, ConstFloatView scale, FloatView out);
  std::vector<double> timeit(ConstFloatView x, ConstFloatView scale, FloatView out, int repeats,
                             int warmup);

 protected:
  void execute() override;

 private:
  void bind(ConstFloatView x, ConstFloatView scale, FloatView out);

  Shape shape_;
  float eps_;
  ConstFloatView x_, scale_;
  FloatView y_;
};

}  // namespace ppb
