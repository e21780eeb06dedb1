// Gated linear units of transformer MLPs: y = act(gate) * up, act one of
// swish (SwiGLU: SiLU), gelu (GeGLU, exact) or gelu_tanh (its tanh form).
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/direct_kernels.hpp"
#include "pyparbench/ops/kernel.hpp"

#include <vector>

#include <string>

namespace ppb {

class Glu : public Kernel {
 public:
  Glu(const std::string& kind, Shape shape, std::optional<int> threads);
  const Shape& shape() const { return shape_; }

  // gate, up and out of shape(); out may be either input.
  void run(ConstFloatView gate, ConstFloatView up, FloatView out);
  std::vector<double> timeit(ConstFloatView gate, ConstFloatView up, FloatView out, int repeats,
                             int warmup);

 protected:
  void execute() override;

 private:
  void bind(ConstFloatView gate, ConstFloatView up, FloatView out);

  DirectEltwise act_;
  Shape shape_;
  ConstFloatView gate_, up_;
  FloatView y_;
};

}  // namespace ppb
