// One dense fp32 matrix product, the unit of work the Eigen and BLAS kernels
// reduce gemm (one per batch entry) and conv2d (one per image and group,
// after im2col) to.
#pragma once

#include <cstdint>

namespace ppb {

// C (m x n) = op(A) · op(B) (+ bias) (+ ReLU); every matrix is contiguous
// and row-major.
struct Matmul {
  int64_t m = 1, n = 1, k = 1;
  bool trans_a = false;  // A is stored as (k, m)
  bool trans_b = false;  // B is stored as (n, k)
  const float* a = nullptr;
  const float* b = nullptr;
  float* c = nullptr;
  const float* bias = nullptr;  // none when null
  bool bias_per_row = false;    // bias has m entries (one per row of C), else n (per column)
  bool relu = false;
};

}  // namespace ppb
