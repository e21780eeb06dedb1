// Softmax along one axis (oneDNN softmax, accurate form). In place is allowed.
#pragma once

#include "pyparbench/ops/unary_kernel.hpp"

namespace ppb {

class Softmax : public UnaryKernel {
 public:
  Softmax(Shape shape, int axis, std::optional<int> threads);
  int axis() const { return axis_; }

 private:
  int axis_;
};

}  // namespace ppb
