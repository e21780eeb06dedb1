// Concatenation along one axis (oneDNN concat), e.g. Inception's channel
// concat of its branches.
#pragma once

#include "pyparbench/ops/primitive_kernel.hpp"

namespace ppb {

class Concat : public PrimitiveKernel {
 public:
  Concat(std::vector<Shape> inputs, int axis, std::optional<int> threads);
  const std::vector<Shape>& input_shapes() const { return inputs_; }
  const Shape& output_shape() const { return out_; }
  int axis() const { return axis_; }

  void run(const std::vector<ConstFloatView>& xs, FloatView out);
  std::vector<double> timeit(const std::vector<ConstFloatView>& xs, FloatView out, int repeats,
                             int warmup);

 private:
  void bind(const std::vector<ConstFloatView>& xs, FloatView out);
  std::vector<Shape> inputs_;
  Shape out_;
  int axis_;
};

}  // namespace ppb
