// A convolution computed as im2col followed by one Matmul per image and
// group, weights (O, C/g·KH·KW) on the left: the shared body of the eigen and
// blas libraries' Conv2dOp. NCHW only; the output of each product lands in
// place in the NCHW output.
#pragma once

#include "pyparbench/math/conv2d_op.hpp"
#include "pyparbench/math/kernel_op.hpp"
#include "pyparbench/math/matmul.hpp"

#include <functional>

namespace ppb {

class Im2colConv2d : public KernelOp<Kernel, Conv2dOp> {
 public:
  MathLibrary library() const override { return library_; }
  std::string implementation() const override {
    return std::string("im2col+") + knob_name(library_);
  }
  // Copies the weights (OIHW is already the (O, C/g·KH·KW) matrix) and bias.
  void set_weights(ConstFloatView weight, ConstFloatView bias) override;
  void run(ConstFloatView x, FloatView out) override;
  std::vector<double> timeit(ConstFloatView x, FloatView out, int repeats, int warmup) override;

 protected:
  // `name` is the class name for messages.
  // Throws std::invalid_argument for NHWC.
  Im2colConv2d(const Conv2dConfig& cfg, const char* name, MathLibrary library,
               std::optional<int> threads);
  // Runs f(begin, end) over [0, n) on the library's threads; each item
  // reads about `bytes_per_item` bytes and writes as many.
  virtual void parallel_for(int64_t n, double bytes_per_item,
                            const std::function<void(int64_t, int64_t)>& f) = 0;
  // One product on the library, with the kernel's threads.
  virtual void matmul(const Matmul& p) = 0;

 private:
  void bind(ConstFloatView x, FloatView out);
  void execute() override;

  MathLibrary library_;
  bool identity_;                // the image is its own column matrix
  std::vector<float> columns_;   // one image's column matrix (empty when identity_)
  std::vector<float> weights_, bias_;
  const float* x_ = nullptr;
  float* out_ = nullptr;
};

}  // namespace ppb
