#include "pyparbench/ops/position_ids.hpp"

#include "pyparbench/core/checks.hpp"

#include <stdexcept>

namespace ppb {

PositionIds::PositionIds(Shape ids, int64_t pad_id, int64_t offset, std::optional<int> threads)
    : Kernel(threads), shape_(std::move(ids)), pad_id_(pad_id), offset_(offset) {
  if (shape_.size() != 2)
    throw std::invalid_argument("position_ids expects (batch, seq) ids, got shape " +
                                shape_str(shape_));
  require_positive_dims("ids shape", shape_);
}

void PositionIds::execute() {
  ThreadsScope scope(threads_);
  const int64_t batch = shape_[0], seq = shape_[1];
  const int64_t* ids = ids_;
  int64_t* out = out_;
  const int64_t pad = pad_id_, offset = offset_;
  // A running count along each row: rows are independent.
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t* row = ids + b * seq;
    int64_t* o = out + b * seq;
    int64_t count = 0;
    for (int64_t j = 0; j < seq; ++j) {
      const bool token = row[j] != pad;
      count += token;
      o[j] = token ? offset + count : offset;
    }
  }
}

void PositionIds::bind(const int64_t* ids, int64_t* out) {
  if (ids == nullptr || out == nullptr)
    throw std::invalid_argument("position_ids needs its ids and output buffers");
  ids_ = ids;
  out_ = out;
}

void PositionIds::run(const int64_t* ids, int64_t* out) {
  run_with([&] { bind(ids, out); });
}

std::vector<double> PositionIds::timeit(const int64_t* ids, int64_t* out, int repeats,
                                        int warmup) {
  return timed_with([&] { bind(ids, out); }, repeats, warmup);
}

}  // namespace ppb
