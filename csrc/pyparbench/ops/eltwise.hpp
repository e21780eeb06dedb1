// Element-wise activations (oneDNN eltwise). In place is allowed.
#pragma once

#include "pyparbench/ops/unary_kernel.hpp"

#include <string>

namespace ppb {

class Eltwise : public UnaryKernel {
 public:
  // kind: "relu", "relu6" (clip to [0, 6]), "sigmoid", "tanh", "gelu" (exact,
  // erf form, as BERT), "gelu_tanh" (the tanh approximation), "swish" (x sigmoid x,
  // SiLU), "hardswish" (x relu6(x + 3) / 6)
  Eltwise(const std::string& kind, Shape shape, std::optional<int> threads);
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
};

}  // namespace ppb
