// The math library of the heavy ops (the study's Library layer): oneDNN, Eigen
// or BLAS behind one interface per op, chosen by name.
#pragma once

#include "pyparbench/math/conv2d_op.hpp"
#include "pyparbench/math/gemm_op.hpp"

#include <array>
#include <memory>
#include <optional>
#include <string>

namespace ppb {

enum class MathLibrary { onednn, eigen, blas };

// Every library, in the enum's order.
constexpr std::array<MathLibrary, 3> kMathLibraries{MathLibrary::onednn, MathLibrary::eigen,
                                                    MathLibrary::blas};

// "onednn", "eigen" or "blas".
const char* library_name(MathLibrary lib);
// The inverse of library_name; throws std::invalid_argument naming `name`
// and the valid names.
MathLibrary parse_library(const std::string& name);

// A prepared kernel of that library. Throws std::invalid_argument for a bad
// configuration, as the kernels' own constructors do (eigen and blas: NHWC).
std::unique_ptr<GemmOp> make_gemm(MathLibrary lib, const GemmConfig& cfg,
                                  std::optional<int> threads);
std::unique_ptr<Conv2dOp> make_conv2d(MathLibrary lib, const Conv2dConfig& cfg,
                                      std::optional<int> threads);

}  // namespace ppb
