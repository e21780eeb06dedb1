#include "pyparbench/ops/embedding_bag.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/ops/embedding_bag_kernel.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>

namespace ppb {

TieredKernel<BagKernel>& bag_kernels() {
  static TieredKernel<BagKernel> k("embedding-bag kernel", &bag_kernel_generic,
                                   PPB_X86_BUILD(bag_kernel_avx2),
                                   PPB_X86_BUILD(bag_kernel_avx512));
  return k;
}


BagMode parse_bag_mode(const std::string& mode) {
  if (mode == "sum") return BagMode::sum;
  if (mode == "mean") return BagMode::mean;
  throw std::invalid_argument("mode must be 'sum' or 'mean', got '" + mode + "'");
}

EmbeddingBag::EmbeddingBag(int64_t rows, int64_t dim, BagMode mode, std::optional<int> threads)
    : Kernel(threads), rows_(rows), dim_(dim), mode_(mode) {
  require_at_least("rows", rows, 1);
  require_at_least("dim", dim, 1);
  table_shape_ = {rows, dim};
  require_positive_dims("table", table_shape_);
}

const char* EmbeddingBag::isa() { return bag_kernels().isa(); }

double EmbeddingBag::bytes_moved(int64_t n_indices, int64_t bags, bool bf16) const {
  const double row_element = bf16 ? 2.0 : 4.0;
  return row_element * static_cast<double>(n_indices) * dim_ + 8.0 * n_indices +
         4.0 * bags * dim_;
}

template <typename Idx>
void EmbeddingBag::check_offsets() const {
  const Idx* off = static_cast<const Idx*>(offsets_.data);
  if (bags_ > 0 && off[0] != 0)
    throw std::invalid_argument("offsets[0] must be 0, got " + std::to_string(off[0]));
  for (int64_t b = 1; b < bags_; ++b) {
    if (off[b] < off[b - 1])
      throw std::invalid_argument("offsets must be non-decreasing: offsets[" +
                                  std::to_string(b) + "] = " + std::to_string(off[b]) +
                                  " < offsets[" + std::to_string(b - 1) + "] = " +
                                  std::to_string(off[b - 1]));
  }
  if (bags_ > 0 && off[bags_ - 1] > n_indices_)
    throw std::invalid_argument("offsets[" + std::to_string(bags_ - 1) + "] = " +
                                std::to_string(off[bags_ - 1]) + " is past the end of indices (" +
                                std::to_string(n_indices_) + " indices)");
}

template <typename Idx>
void EmbeddingBag::report_bad_index() const {
  const Idx* idx = static_cast<const Idx*>(indices_.data);
  for (int64_t j = 0; j < n_indices_; ++j) {
    if (idx[j] < 0 || idx[j] >= rows_)
      throw std::out_of_range("index " + std::to_string(idx[j]) + " at position " +
                              std::to_string(j) + " is out of range for a table of " +
                              std::to_string(rows_) + " rows");
  }
}

void EmbeddingBag::set_table(ConstFloatView table) {
  require_shape("table", table.shape, table_shape_);
  const int64_t n = rows_ * dim_;
  auto copy = aligned_array<float>(n);
  // Copied by this kernel's threads, so each page starts out near them.
  ThreadsScope scope(threads_);
  const int64_t chunk = int64_t{1} << 16;
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (int64_t i = 0; i < n; i += chunk)
    std::memcpy(copy.get() + i, table.data + i,
                static_cast<size_t>(std::min(chunk, n - i)) * sizeof(float));
  locked([&] { own_table_ = std::move(copy); });
}

void EmbeddingBag::bind(ConstFloatView table, IndexView indices, IndexView offsets,
                        ConstFloatView per_sample_weights, FloatView out) {
  if (!table.present()) {
    if (!own_table_)
      throw std::invalid_argument(
          "EmbeddingBag has no table: pass one, or keep a copy with set_table(table) first");
    table = ConstFloatView{own_table_.get(), table_shape_};
  }
  bind_table(table, indices, offsets, per_sample_weights, out);
}

template <typename T>
void EmbeddingBag::bind_table(View<const T> table, IndexView indices, IndexView offsets,
                              ConstFloatView per_sample_weights, FloatView out) {
  if constexpr (std::is_same_v<T, uint8_t>)
    require_shape("table (8-bit rowwise: dim values, then an fp32 scale and bias)", table.shape,
                  Shape{rows_, dim_ + kByteRowwiseExtra});
  else
    require_shape("table", table.shape, table_shape_);
  n_indices_ = indices.size();
  if (indices.shape.size() == 2) {
    if (offsets.present())
      throw std::invalid_argument("offsets must be None when indices is 2-D (bags, bag_size)");
    bags_ = indices.shape[0];
    bag_size_ = indices.shape[1];
  } else if (indices.shape.size() == 1) {
    if (!offsets.present())
      throw std::invalid_argument("offsets are required when indices is 1-D");
    if (offsets.shape.size() != 1)
      throw std::invalid_argument("offsets must be 1-D, got shape " + shape_str(offsets.shape));
    if (offsets.is64 != indices.is64)
      throw std::invalid_argument("offsets and indices must have the same dtype (int32 or int64)");
    bags_ = offsets.shape[0];
  } else {
    throw std::invalid_argument("indices must be 1-D or 2-D, got shape " +
                                shape_str(indices.shape));
  }
  require_shape("out", out.shape, Shape{bags_, dim_});
  if (per_sample_weights.present()) {
    if (mode_ != BagMode::sum)
      throw std::invalid_argument("per_sample_weights are only supported with mode='sum'");
    require_shape("per_sample_weights", per_sample_weights.shape, indices.shape);
  }
  require_no_partial_overlap("out", out, "table", table, false);
  table_ = table.data;
  table_bf16_ = std::is_same_v<T, uint16_t>;
  table_byte_rowwise_ = std::is_same_v<T, uint8_t>;
  indices_ = indices;
  offsets_ = offsets;
  weights_ = per_sample_weights;
  out_ = out;
  if (offsets.present()) {
    if (indices.is64)
      check_offsets<int64_t>();
    else
      check_offsets<int32_t>();
  }
}

void EmbeddingBag::execute() {
  const BagArgs a{table_,        table_bf16_, table_byte_rowwise_, rows_,  dim_, indices_.data,
                  offsets_.data, indices_.is64, bag_size_, bags_, n_indices_,
                  weights_.data, mode_ == BagMode::mean, out_.data};
  ThreadsScope scope(threads_);
  const bool ok = bag_kernels().get()(a);
  if (!ok) {
    if (indices_.is64)
      report_bad_index<int64_t>();
    else
      report_bad_index<int32_t>();
  }
}

void EmbeddingBag::run(ConstFloatView table, IndexView indices, IndexView offsets,
                       ConstFloatView per_sample_weights, FloatView out) {
  run_with([&] { bind(table, indices, offsets, per_sample_weights, out); });
}

std::vector<double> EmbeddingBag::timeit(ConstFloatView table, IndexView indices,
                                         IndexView offsets, ConstFloatView per_sample_weights,
                                         FloatView out, int repeats, int warmup) {
  return timed_with([&] { bind(table, indices, offsets, per_sample_weights, out); }, repeats,
                    warmup);
}

void EmbeddingBag::run_bf16(ConstBf16View table, IndexView indices, IndexView offsets,
                            ConstFloatView per_sample_weights, FloatView out) {
  run_with([&] { bind_table(table, indices, offsets, per_sample_weights, out); });
}

std::vector<double> EmbeddingBag::timeit_bf16(ConstBf16View table, IndexView indices,
                                              IndexView offsets, ConstFloatView per_sample_weights,
                                              FloatView out, int repeats, int warmup) {
  return timed_with([&] { bind_table(table, indices, offsets, per_sample_weights, out); },
                    repeats, warmup);
}

void EmbeddingBag::run_byte_rowwise(View<const uint8_t> table, IndexView indices,
                                    IndexView offsets, ConstFloatView per_sample_weights,
                                    FloatView out) {
  run_with([&] { bind_table(table, indices, offsets, per_sample_weights, out); });
}

std::vector<double> EmbeddingBag::timeit_byte_rowwise(View<const uint8_t> table,
                                                      IndexView indices, IndexView offsets,
                                                      ConstFloatView per_sample_weights,
                                                      FloatView out, int repeats, int warmup) {
  return timed_with([&] { bind_table(table, indices, offsets, per_sample_weights, out); },
                    repeats, warmup);
}

}  // namespace ppb
