// EmbeddingBag: out[b] = reduce(table[indices[j]] (* weights[j])) over the
// indices of bag b. oneDNN has no such primitive, so this is an OpenMP kernel
// (embedding_bag_kernel.inc): parallel over bags, vectorised over the
// embedding dimension, rows prefetched lookups ahead (the op is bound by
// random row reads). The table is float32, or bf16 (run_bf16): bf16 rows
// are widened to fp32 as they are read and summed in fp32, the output is
// fp32 either way.
#pragma once

#include "pyparbench/core/aligned_array.hpp"
#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/kernel.hpp"

#include <string>

namespace ppb {

enum class BagMode { sum, mean };
BagMode parse_bag_mode(const std::string& mode);

class EmbeddingBag : public Kernel {
 public:
  EmbeddingBag(int64_t rows, int64_t dim, BagMode mode, std::optional<int> threads);

  int64_t rows() const { return rows_; }
  int64_t dim() const { return dim_; }
  BagMode mode() const { return mode_; }
  // The ISA of the kernel this CPU runs: "avx512", "avx2" or "generic".
  static const char* isa();

  // Keeps a copy of `table` on whole cache lines (and huge pages when
  // large), for runs given no table: a numpy table is 16-byte aligned, so
  // its rows of 64 floats straddle five cache lines instead of four.
  // std::invalid_argument for a wrong shape.
  void set_table(ConstFloatView table);
  bool has_table() const { return static_cast<bool>(own_table_); }

  // indices: 1-D with offsets (offsets[i] = start of bag i, PyTorch's
  // convention), or 2-D (bags, bag_size) with no offsets. Empty bags give 0.
  // A table not present: the copy set_table() keeps.
  void run(ConstFloatView table, IndexView indices, IndexView offsets,
           ConstFloatView per_sample_weights, FloatView out);
  std::vector<double> timeit(ConstFloatView table, IndexView indices, IndexView offsets,
                             ConstFloatView per_sample_weights, FloatView out, int repeats,
                             int warmup);
  // The same over a bf16 table (always given: set_table keeps float32 only).
  void run_bf16(ConstBf16View table, IndexView indices, IndexView offsets,
                ConstFloatView per_sample_weights, FloatView out);
  std::vector<double> timeit_bf16(ConstBf16View table, IndexView indices, IndexView offsets,
                                  ConstFloatView per_sample_weights, FloatView out, int repeats,
                                  int warmup);

  // The same over an 8-bit rowwise table (rows, dim + 8): each row's dim
  // uint8 values, then its fp32 scale and bias (PyTorch's
  // embedding_bag_byte_prepack layout); values read as value · scale + bias
  // and summed in fp32. Always given, as bf16's.
  void run_byte_rowwise(View<const uint8_t> table, IndexView indices, IndexView offsets,
                        ConstFloatView per_sample_weights, FloatView out);
  std::vector<double> timeit_byte_rowwise(View<const uint8_t> table, IndexView indices,
                                          IndexView offsets, ConstFloatView per_sample_weights,
                                          FloatView out, int repeats, int warmup);
  // The bytes an 8-bit rowwise row holds past its values (scale, bias).
  static constexpr int64_t kByteRowwiseExtra = 8;

  // Bytes a run reads and writes (rows gathered, indices, output); rows of
  // 2-byte elements with `bf16`.
  double bytes_moved(int64_t n_indices, int64_t bags, bool bf16 = false) const;

 protected:
  void execute() override;

 private:
  void bind(ConstFloatView table, IndexView indices, IndexView offsets,
            ConstFloatView per_sample_weights, FloatView out);
  template <typename T>
  void bind_table(View<const T> table, IndexView indices, IndexView offsets,
                  ConstFloatView per_sample_weights, FloatView out);
  template <typename Idx>
  void check_offsets() const;
  template <typename Idx>
  void report_bad_index() const;

  int64_t rows_, dim_;
  Shape table_shape_;
  BagMode mode_;
  AlignedArray<float> own_table_;
  // Bound by bind() for one run.
  const void* table_ = nullptr;
  bool table_bf16_ = false;
  bool table_byte_rowwise_ = false;
  ConstFloatView weights_;
  IndexView indices_, offsets_;
  FloatView out_;
  int64_t bags_ = 0, bag_size_ = 0, n_indices_ = 0;
};

}  // namespace ppb
