// A fully connected layer for a few rows of x, y = x·Wᵀ (+ bias), fp32, whose
// weights are read from memory once per run at streaming bandwidth: a
// decoder's step (one token a sequence), where every weight byte is used
// once per row and the time is that of reading the weights. set_weights()
// packs W (n, k) into panels of rows (streamed_linear_kernel.hpp) on
// transparent huge pages; a run cuts the panels into contiguous runs that
// the threads take in turn, each streamed in address order, with no
// synchronisation but a shared counter and the team's end. (oneDNN's matmul at one
// row streamed 14 GB/s of a 32 GB/s triad on a 2-core Zen 5 VM.)
#pragma once

#include "pyparbench/core/aligned_array.hpp"
#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/kernel.hpp"

#include <optional>
#include <vector>

namespace ppb {

// Rows of x up to which the graph's fp32 linear nodes on the onednn library
// run as a StreamedLinear (a decode step's batch).
constexpr int64_t kStreamedMaxRows = 2;

class StreamedLinear : public Kernel {
 public:
  // Throws std::invalid_argument naming a size < 1.
  StreamedLinear(int64_t m, int64_t n, int64_t k, bool bias, std::optional<int> threads);

  int64_t m() const { return m_; }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  bool has_weights() const { return packed_ || plain_; }
  // Bytes of packed weights (rows padded to whole panels, columns to whole
  // chunks); 0 when the weights are read in place (borrow_weights).
  int64_t packed_bytes() const;
  // "streamed:" and the ISA of the kernel runs use ("avx512", "avx2", "generic").
  static std::string implementation();

  // Packs the weight (n, k), copies the bias (n) when prepared with one;
  // std::invalid_argument for a wrong shape or a missing / unexpected bias.
  void set_weights(ConstFloatView weight, ConstFloatView bias);
  // Reads the weight (n, k) where it is, with no copy (the same sums, bit
  // for bit, as packed), and copies the bias: the caller keeps the weight
  // alive and unchanged as long as this kernel (a plan's parameters, which
  // the prefill's matmul also reads, held once). Errors as set_weights.
  void borrow_weights(ConstFloatView weight, ConstFloatView bias);
  // out (m, n) = x (m, k) · Wᵀ (+ bias); std::invalid_argument before
  // set_weights(), for wrong shapes, or when out overlaps x.
  void run(ConstFloatView x, FloatView out);
  std::vector<double> timeit(ConstFloatView x, FloatView out, int repeats, int warmup);

 protected:
  void execute() override;

 private:
  void bind(ConstFloatView x, FloatView out);
  std::vector<float> checked_bias(ConstFloatView weight, ConstFloatView bias) const;
  int64_t panels() const;

  int64_t m_, n_, k_;
  bool bias_;
  Shape x_shape_, out_shape_, weight_shape_, bias_shape_;
  AlignedArray<float> packed_;
  const float* plain_ = nullptr;  // borrowed (n, k) weights, when not packed
  std::vector<float> bias_values_;
  ConstFloatView x_;
  FloatView y_;
};

}  // namespace ppb
