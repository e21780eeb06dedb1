// Joins a kernel base (Kernel, or PrimitiveKernel for oneDNN) with the op
// interface every math library implements (GemmOp, Conv2dOp), so that the
// members all implementations answer alike are written once.
#pragma once

#include "pyparbench/ops/kernel.hpp"

#include <optional>

namespace ppb {

template <class KernelBase, class Op>
class KernelOp : public KernelBase, public Op {
 public:
  int threads() const override { return KernelBase::threads(); }
  Kernel& kernel() override { return *this; }

 protected:
  // `name` is the class name used in error messages ("Gemm", "EigenGemm").
  KernelOp(const typename Op::Config& cfg, const char* name, std::optional<int> threads)
      : KernelBase(threads), Op(cfg, name) {}
};

}  // namespace ppb
