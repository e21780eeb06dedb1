// A gemm computed as one Matmul per batch entry by a library's matmul():
// the shared body of the eigen and blas libraries' GemmOp.
#pragma once

#include "pyparbench/math/gemm_op.hpp"
#include "pyparbench/math/kernel_op.hpp"
#include "pyparbench/math/matmul.hpp"

namespace ppb {

class MatmulGemm : public KernelOp<Kernel, GemmOp> {
 public:
  MathLibrary library() const override { return library_; }
  void run(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out) override;
  std::vector<double> timeit(ConstFloatView a, ConstFloatView b, ConstFloatView bias,
                             FloatView out, int repeats, int warmup) override;

 protected:
  // `name` is the class name for messages.
  MatmulGemm(const GemmConfig& cfg, const char* name, MathLibrary library,
             std::optional<int> threads);
  // One product on the library, with the kernel's threads.
  virtual void matmul(const Matmul& p) = 0;

 private:
  void bind(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out);
  void execute() override;

  MathLibrary library_;
  const float* a_ = nullptr;
  const float* b_ = nullptr;
  const float* bias_ = nullptr;
  float* out_ = nullptr;
};

}  // namespace ppb
