// Base of the one-input, one-output glue ops (eltwise, softmax, pooling):
// shapes fixed at creation, run(x, out) binds and executes.
#pragma once

#include "pyparbench/ops/primitive_kernel.hpp"

namespace ppb {

class UnaryKernel : public PrimitiveKernel {
 public:
  const Shape& input_shape() const { return in_shape_; }
  const Shape& output_shape() const { return out_shape_; }

  void run(ConstFloatView x, FloatView out);
  std::vector<double> timeit(ConstFloatView x, FloatView out, int repeats, int warmup);

 protected:
  UnaryKernel(std::optional<int> threads, Shape in, bool in_place_ok);
  // Subclasses set the output shape, create prim_ and call add_arg for
  // DNNL_ARG_SRC / DNNL_ARG_DST (and any argument of their own).
  void set_output_shape(Shape out) { out_shape_ = std::move(out); }
  void bind_io(ConstFloatView x, FloatView out);

 private:
  Shape in_shape_, out_shape_;
  bool in_place_ok_;
};

}  // namespace ppb
