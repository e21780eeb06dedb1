#include "pyparbench/ops/embedding_bag.hpp"

#include "pyparbench/core/checks.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>

namespace ppb {

namespace {

constexpr int64_t kPrefetchDistance = 8;  // lookups ahead; covers DRAM latency

struct BagArgs {
  const float* table;
  int64_t rows, dim;
  const void* indices;
  const void* offsets;  // null: fixed bag size
  int64_t bag_size, bags, n_indices;
  const float* weights;
  bool mean;
  float* out;
};

template <typename Idx>
inline void bag_range(const BagArgs& a, int64_t b, int64_t& begin, int64_t& end) {
  if (a.offsets) {
    const Idx* off = static_cast<const Idx*>(a.offsets);
    begin = off[b];
    end = b + 1 < a.bags ? static_cast<int64_t>(off[b + 1]) : a.n_indices;
  } else {
    begin = b * a.bag_size;
    end = begin + a.bag_size;
  }
}

// D > 0: the dimension is known at compile time, so the accumulator lives in
// registers. D == 0: any dimension, accumulated in the output row.
template <typename Idx, int D>
bool bags_kernel(const BagArgs& a) {
  const Idx* idx = static_cast<const Idx*>(a.indices);
  const int64_t dim = D > 0 ? D : a.dim;
  bool bad = false;
#pragma omp parallel for schedule(static) reduction(|| : bad)
  for (int64_t b = 0; b < a.bags; ++b) {
    int64_t begin, end;
    bag_range<Idx>(a, b, begin, end);
    float acc_buf[D > 0 ? D : 1];
    float* acc = D > 0 ? acc_buf : a.out + b * dim;
    for (int64_t d = 0; d < dim; ++d) acc[d] = 0.f;
    for (int64_t j = begin; j < end; ++j) {
      if (j + kPrefetchDistance < a.n_indices) {
        const uint64_t p = static_cast<uint64_t>(idx[j + kPrefetchDistance]);
        if (p < static_cast<uint64_t>(a.rows)) {
          const char* row = reinterpret_cast<const char*>(a.table + p * dim);
          for (int64_t byte = 0; byte < dim * 4; byte += 64) __builtin_prefetch(row + byte);
        }
      }
      const uint64_t r = static_cast<uint64_t>(idx[j]);
      if (r >= static_cast<uint64_t>(a.rows)) {
        bad = true;
        continue;
      }
      const float* row = a.table + r * dim;
      const float w = a.weights ? a.weights[j] : 1.f;
#pragma omp simd
      for (int64_t d = 0; d < dim; ++d) acc[d] += w * row[d];
    }
    if (a.mean && end > begin) {
      const float inv = 1.f / static_cast<float>(end - begin);
#pragma omp simd
      for (int64_t d = 0; d < dim; ++d) acc[d] *= inv;
    }
    if (D > 0) std::memcpy(a.out + b * dim, acc, sizeof(float) * static_cast<size_t>(dim));
  }
  return !bad;
}

template <typename Idx>
bool dispatch_dim(const BagArgs& a) {
  switch (a.dim) {
    case 16: return bags_kernel<Idx, 16>(a);
    case 32: return bags_kernel<Idx, 32>(a);
    case 64: return bags_kernel<Idx, 64>(a);
    case 128: return bags_kernel<Idx, 128>(a);
    default: return bags_kernel<Idx, 0>(a);
  }
}

}  // namespace

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
}

double EmbeddingBag::bytes_moved(int64_t n_indices, int64_t bags) const {
  return 4.0 * static_cast<double>(n_indices) * dim_ + 8.0 * n_indices + 4.0 * bags * dim_;
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

void EmbeddingBag::bind(ConstFloatView table, IndexView indices, IndexView offsets,
                        ConstFloatView per_sample_weights, FloatView out) {
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
  table_ = table;
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
  const BagArgs a{table_.data, rows_, dim_, indices_.data,
                  offsets_.present() ? offsets_.data : nullptr,
                  bag_size_, bags_, n_indices_, weights_.data, mode_ == BagMode::mean,
                  out_.data};
  ThreadsScope scope(threads_);
  const bool ok = indices_.is64 ? dispatch_dim<int64_t>(a) : dispatch_dim<int32_t>(a);
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

}  // namespace ppb
