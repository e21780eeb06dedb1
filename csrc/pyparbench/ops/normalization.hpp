// Inference-time normalisations (oneDNN batch and layer normalisation).
// Parameters are passed on each run and read in place, not copied.
#pragma once

#include "pyparbench/ops/activation_layout.hpp"
#include "pyparbench/ops/primitive_kernel.hpp"

namespace ppb {

// y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + shift[c], channels on
// axis 1 of an (N, C) or (N, C, H, W) input. In place is allowed.
class BatchNorm : public PrimitiveKernel {
 public:
  // layout: how a 4-D input (logical N, C, H, W) is stored; shape() and
  // run()'s checks are its stored_shape ((N, H, W, C) for nhwc).
  BatchNorm(Shape shape, float eps, std::optional<int> threads,
            ActLayout layout = ActLayout::nchw);
  const Shape& shape() const { return shape_; }
  float eps() const { return eps_; }

  void run(ConstFloatView x, ConstFloatView mean, ConstFloatView var, ConstFloatView scale,
           ConstFloatView shift, FloatView out);
  std::vector<double> timeit(ConstFloatView x, ConstFloatView mean, ConstFloatView var,
                             ConstFloatView scale, ConstFloatView shift, FloatView out,
                             int repeats, int warmup);

 private:
  void bind(ConstFloatView x, ConstFloatView mean, ConstFloatView var, ConstFloatView scale,
            ConstFloatView shift, FloatView out);
  Shape shape_, param_shape_;
  float eps_;
};

// Normalises over the last axis with its own statistics, then scale and
// shift of that axis' length. In place is allowed.
class LayerNorm : public PrimitiveKernel {
 public:
  LayerNorm(Shape shape, float eps, std::optional<int> threads);
  const Shape& shape() const { return shape_; }
  float eps() const { return eps_; }

  void run(ConstFloatView x, ConstFloatView scale, ConstFloatView shift, FloatView out);
  std::vector<double> timeit(ConstFloatView x, ConstFloatView scale, ConstFloatView shift,
                             FloatView out, int repeats, int warmup);

 private:
  void bind(ConstFloatView x, ConstFloatView scale, ConstFloatView shift, FloatView out);
  Shape shape_, param_shape_;
  float eps_;
};

}  // namespace ppb
