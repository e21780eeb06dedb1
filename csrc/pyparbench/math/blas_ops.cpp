#include "pyparbench/math/blas_ops.hpp"

#include "pyparbench/math/blas_matmul.hpp"

#include <omp.h>

#include <algorithm>

namespace ppb {

BlasGemm::BlasGemm(const GemmConfig& cfg, std::optional<int> threads)
    : MatmulGemm(cfg, "BlasGemm", MathLibrary::blas, threads) {
  require_blas_int("m", cfg.m);
  require_blas_int("n", cfg.n);
  require_blas_int("k", cfg.k);
}

void BlasGemm::matmul(const Matmul& p) { blas_matmul(p, threads_); }

BlasConv2d::BlasConv2d(const Conv2dConfig& cfg, std::optional<int> threads)
    : Im2colConv2d(cfg, "BlasConv2d", MathLibrary::blas, threads) {
  require_blas_int("out_h * out_w", out_h() * out_w());
  require_blas_int("in_channels / groups * kh * kw", cfg.c / cfg.groups * cfg.kh * cfg.kw);
}

void BlasConv2d::parallel_for(int64_t n, double /*bytes_per_item*/,
                              const std::function<void(int64_t, int64_t)>& f) {
  // One contiguous block of items per OpenMP thread.
  const int64_t team = std::clamp<int64_t>(n, 1, threads_);
#pragma omp parallel num_threads(static_cast<int>(team)) if (team > 1)
  {
    const int64_t t = omp_get_thread_num(), size = omp_get_num_threads();
    f(n * t / size, n * (t + 1) / size);
  }
}

void BlasConv2d::matmul(const Matmul& p) { blas_matmul(p, threads_); }

}  // namespace ppb
