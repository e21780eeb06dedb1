// DLRM's pairwise-interaction gather: (B, n, n) -> (B, n*(n-1)/2), the
// strictly lower triangle of each n x n matrix, row by row (the order of the
// dlrm reference's interact_features without self-interaction).
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/kernel.hpp"

namespace ppb {

class TrilFlatten : public Kernel {
 public:
  TrilFlatten(Shape input, std::optional<int> threads);
  const Shape& input_shape() const { return in_; }
  const Shape& output_shape() const { return out_; }

  void run(ConstFloatView x, FloatView out);
  std::vector<double> timeit(ConstFloatView x, FloatView out, int repeats, int warmup);

 protected:
  void execute() override;

 private:
  void bind(ConstFloatView x, FloatView out);
  Shape in_, out_;
  ConstFloatView x_;
  FloatView y_;
};

}  // namespace ppb
