#include "pyparbench/math/eigen_device.hpp"

// GCC 12 flags its own AVX-512 intrinsics' deliberately undefined registers
// (_mm512_undefined_ps) inside Eigen's packet code: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>

#include <algorithm>

namespace ppb {

namespace {

using Index = Eigen::Index;
using ConstMatrix = Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor, Index>>;
using Matrix = Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor, Index>>;

// Adds the bias and applies ReLU to each finished block of the contraction's
// output while it is still in cache (TensorFlow's BiasAddOutputKernel).
struct BiasReluOutputKernel {
  const float* bias;
  bool bias_per_row;  // along C's rows (conv: one per output channel), else its columns
  bool relu;

  template <typename I, typename Scalar>
  EIGEN_ALWAYS_INLINE void operator()(
      const Eigen::internal::blas_data_mapper<Scalar, I, Eigen::ColMajor>& block,
      const Eigen::TensorContractionParams& params, I i, I j, I rows, I cols) const {
    if (!bias && !relu) return;
    // The block is column-major; for row-major tensors Eigen swaps the
    // operands, so the block's rows are then C's columns.
    const bool bias_along_block_rows = params.swapped_arguments != bias_per_row;
    for (I col = 0; col < cols; ++col) {
      Scalar* v = &block(0, col);
      if (bias && bias_along_block_rows) {
        const float* b = bias + i;
        for (I r = 0; r < rows; ++r) v[r] += b[r];
      } else if (bias) {
        const float b = bias[j + col];
        for (I r = 0; r < rows; ++r) v[r] += b;
      }
      if (relu)
        for (I r = 0; r < rows; ++r) v[r] = std::max(v[r], Scalar(0));
    }
  }
};

}  // namespace

struct EigenDevice::Impl {
  explicit Impl(int threads) : pool(threads), device(&pool, threads) {}
  Eigen::ThreadPool pool;
  Eigen::ThreadPoolDevice device;
};

EigenDevice::EigenDevice(int threads) : impl_(std::make_unique<Impl>(threads)) {}

EigenDevice::~EigenDevice() = default;

void EigenDevice::matmul(const Matmul& p) const {
  const ConstMatrix a(p.a, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k);
  const ConstMatrix b(p.b, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n);
  Matrix c(p.c, p.m, p.n);
  const Eigen::array<Eigen::IndexPair<Index>, 1> inner{
      Eigen::IndexPair<Index>(p.trans_a ? 0 : 1, p.trans_b ? 1 : 0)};
  const BiasReluOutputKernel epilogue{p.bias, p.bias_per_row, p.relu};
  c.device(impl_->device) = a.contract(b, inner, epilogue);
}

void EigenDevice::parallel_for(int64_t n, double bytes_per_item,
                               const std::function<void(int64_t, int64_t)>& f) const {
  impl_->device.parallelFor(n, Eigen::TensorOpCost(bytes_per_item, bytes_per_item, 0),
                            [&f](Index begin, Index end) { f(begin, end); });
}

}  // namespace ppb
