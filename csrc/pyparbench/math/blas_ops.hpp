// The blas math library: gemm as cblas_sgemm from the system OpenBLAS (one
// call per batch entry), conv2d as im2col on the kernel's OpenMP threads
// followed by one cblas_sgemm per image and group, NCHW only. OpenBLAS's
// thread count is process-wide: see blas_matmul.hpp.
//
// Two thread runtimes meet in BlasConv2d: the system OpenBLAS (pthreads
// build) keeps its own workers, which busy-wait after each call, while the
// im2col team's idle OpenMP threads spin too (libgomp's default policy). On
// a machine with no spare cores they take cores from each other; measured
// on 2 cores, a 3x3 ResNet layer at 2 threads ran slower than at 1 unless
// OMP_WAIT_POLICY=passive. That is the Library layer's thread-pool effect,
// so it is kept, not hidden: the omp_wait setting shows it.
#pragma once

#include "pyparbench/math/im2col_conv2d.hpp"
#include "pyparbench/math/matmul_gemm.hpp"

namespace ppb {

class BlasGemm final : public MatmulGemm {
 public:
  // Throws std::invalid_argument for sizes beyond cblas's int.
  BlasGemm(const GemmConfig& cfg, std::optional<int> threads);

 private:
  void matmul(const Matmul& p) override;
};

class BlasConv2d final : public Im2colConv2d {
 public:
  // Throws std::invalid_argument for NHWC or sizes beyond cblas's int.
  BlasConv2d(const Conv2dConfig& cfg, std::optional<int> threads);

 private:
  void parallel_for(int64_t n, double bytes_per_item,
                    const std::function<void(int64_t, int64_t)>& f) override;
  void matmul(const Matmul& p) override;
};

}  // namespace ppb
