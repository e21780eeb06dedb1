// The blas math library's engine: cblas_sgemm from the system OpenBLAS.
//
// Limitation: OpenBLAS's thread count is process-wide, not per call. Each
// product sets it (openblas_set_num_threads) just before cblas_sgemm, so
// BLAS kernels with different counts run one after another correctly; run
// concurrently from several threads, a product runs with whichever count
// was set last (results stay correct, timings do not). OpenBLAS's own
// threads are not the kernel's OpenMP team: Kernel::pin does not place
// them, and they spin a while after each call before they sleep.
#pragma once

#include "pyparbench/math/matmul.hpp"

namespace ppb {

// cblas_sgemm with `threads` OpenBLAS threads, then bias and ReLU in one
// pass over C on `threads` OpenMP threads.
void blas_matmul(const Matmul& p, int threads);

// Throws std::invalid_argument unless `v` fits cblas's 32-bit int; `what`
// names the size.
void require_blas_int(const char* what, int64_t v);

}  // namespace ppb
