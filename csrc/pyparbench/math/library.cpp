#include "pyparbench/math/library.hpp"

#include "pyparbench/math/blas_ops.hpp"
#include "pyparbench/math/eigen_ops.hpp"
#include "pyparbench/math/onednn_ops.hpp"

#include <stdexcept>

namespace ppb {

const char* library_name(MathLibrary lib) {
  switch (lib) {
    case MathLibrary::onednn: return "onednn";
    case MathLibrary::eigen: return "eigen";
    case MathLibrary::blas: return "blas";
  }
  throw std::invalid_argument("unknown MathLibrary value " +
                              std::to_string(static_cast<int>(lib)));
}

MathLibrary parse_library(const std::string& name) {
  for (MathLibrary lib : kMathLibraries)
    if (name == library_name(lib)) return lib;
  std::string valid;
  for (size_t i = 0; i < kMathLibraries.size(); ++i) {
    valid += i == 0 ? "" : i + 1 == kMathLibraries.size() ? " or " : ", ";
    valid += std::string("'") + library_name(kMathLibraries[i]) + "'";
  }
  throw std::invalid_argument("library must be " + valid + ", got '" + name + "'");
}

std::unique_ptr<GemmOp> make_gemm(MathLibrary lib, const GemmConfig& cfg,
                                  std::optional<int> threads) {
  switch (lib) {
    case MathLibrary::onednn: return std::make_unique<Gemm>(cfg, threads);
    case MathLibrary::eigen: return std::make_unique<EigenGemm>(cfg, threads);
    case MathLibrary::blas: return std::make_unique<BlasGemm>(cfg, threads);
  }
  throw std::invalid_argument(std::string("no gemm for library ") + library_name(lib));
}

std::unique_ptr<Conv2dOp> make_conv2d(MathLibrary lib, const Conv2dConfig& cfg,
                                      std::optional<int> threads) {
  switch (lib) {
    case MathLibrary::onednn: return std::make_unique<Conv2d>(cfg, threads);
    case MathLibrary::eigen: return std::make_unique<EigenConv2d>(cfg, threads);
    case MathLibrary::blas: return std::make_unique<BlasConv2d>(cfg, threads);
  }
  throw std::invalid_argument(std::string("no conv2d for library ") + library_name(lib));
}

}  // namespace ppb
