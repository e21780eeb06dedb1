#include "pyparbench/math/library.hpp"

#include "pyparbench/math/blas_ops.hpp"
#include "pyparbench/math/eigen_ops.hpp"
#include "pyparbench/math/gemm_conv2d.hpp"
#include "pyparbench/math/onednn_ops.hpp"

#include <stdexcept>
#include <string>

namespace ppb {

std::unique_ptr<GemmOp> make_gemm(MathLibrary lib, const GemmConfig& cfg,
                                  std::optional<int> threads) {
  switch (lib) {
    case MathLibrary::onednn: return std::make_unique<Gemm>(cfg, threads);
    case MathLibrary::eigen: return std::make_unique<EigenGemm>(cfg, threads);
    case MathLibrary::blas: return std::make_unique<BlasGemm>(cfg, threads);
  }
  throw std::invalid_argument(std::string("no gemm for library ") + knob_name(lib));
}

std::unique_ptr<Conv2dOp> make_conv2d(MathLibrary lib, const Conv2dConfig& cfg,
                                      std::optional<int> threads, bool lower_to_gemm) {
  switch (lib) {
    case MathLibrary::onednn: {
      auto direct = std::make_unique<Conv2d>(cfg, threads);
      if (lower_to_gemm && gemm_conv2d_pays(*direct))
        return std::make_unique<GemmConv2d>(cfg, threads);
      return direct;
    }
    case MathLibrary::eigen: return std::make_unique<EigenConv2d>(cfg, threads);
    case MathLibrary::blas: return std::make_unique<BlasConv2d>(cfg, threads);
  }
  throw std::invalid_argument(std::string("no conv2d for library ") + knob_name(lib));
}

}  // namespace ppb
