// The heavy ops by math library (the study's Library layer): oneDNN, Eigen
// or BLAS behind one interface per op.
#pragma once

#include "pyparbench/core/knobs.hpp"
#include "pyparbench/math/conv2d_op.hpp"
#include "pyparbench/math/gemm_op.hpp"

#include <memory>
#include <optional>

namespace ppb {

// A prepared kernel of that library. Throws std::invalid_argument for a bad
// configuration, as the kernels' own constructors do (eigen and blas: NHWC).
std::unique_ptr<GemmOp> make_gemm(MathLibrary lib, const GemmConfig& cfg,
                                  std::optional<int> threads);
// lower_to_gemm: an onednn convolution becomes a GemmConv2d where
// gemm_conv2d_pays() (gemm_conv2d.hpp); the other libraries ignore it.
std::unique_ptr<Conv2dOp> make_conv2d(MathLibrary lib, const Conv2dConfig& cfg,
                                      std::optional<int> threads, bool lower_to_gemm = false);

}  // namespace ppb
