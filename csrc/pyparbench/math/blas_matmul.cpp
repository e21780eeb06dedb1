#include "pyparbench/math/blas_matmul.hpp"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

// OpenBLAS extensions; declared here too, since a plain cblas.h lacks them.
extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

namespace ppb {

namespace {

void bias_relu(const Matmul& p, int threads) {
  if (!p.bias && !p.relu) return;
  // Not worth waking a team for a tiny output.
  const bool parallel = threads > 1 && p.m > 1 && p.m * p.n >= (1 << 14);
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel)
  for (int64_t i = 0; i < p.m; ++i) {
    float* row = p.c + i * p.n;
    if (p.bias && p.bias_per_row) {
      const float b = p.bias[i];
      for (int64_t j = 0; j < p.n; ++j) row[j] += b;
    } else if (p.bias) {
      for (int64_t j = 0; j < p.n; ++j) row[j] += p.bias[j];
    }
    if (p.relu)
      for (int64_t j = 0; j < p.n; ++j) row[j] = std::max(row[j], 0.f);
  }
}

}  // namespace

void require_blas_int(const char* what, int64_t v) {
  if (v > INT_MAX)
    throw std::invalid_argument(std::string("the blas library takes sizes up to ") +
                                std::to_string(INT_MAX) + "; " + what + " is " +
                                std::to_string(v));
}

void blas_matmul(const Matmul& p, int threads) {
  if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
  const auto m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans,
              p.trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.f, p.a, p.trans_a ? m : k, p.b,
              p.trans_b ? k : n, 0.f, p.c, n);
  bias_relu(p, threads);
}

}  // namespace ppb
