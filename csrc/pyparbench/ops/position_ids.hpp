// Padding-aware position ids from token ids (RoBERTa's): per row of a
// (batch, seq) int64 id tensor, out[b, j] = offset + the number of ids other
// than pad_id in ids[b, 0..j] where ids[b, j] != pad_id, else offset. The
// positions are data (they follow the ids), an embedding lookup reads them.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/kernel.hpp"

#include <cstdint>
#include <vector>

namespace ppb {

class PositionIds : public Kernel {
 public:
  PositionIds(Shape ids, int64_t pad_id, int64_t offset, std::optional<int> threads);
  const Shape& shape() const { return shape_; }

  // `ids` and `out` hold shape() int64 elements each.
  void run(const int64_t* ids, int64_t* out);
  std::vector<double> timeit(const int64_t* ids, int64_t* out, int repeats, int warmup);

 protected:
  void execute() override;

 private:
  void bind(const int64_t* ids, int64_t* out);

  Shape shape_;
  int64_t pad_id_, offset_;
  const int64_t* ids_ = nullptr;
  int64_t* out_ = nullptr;
};

}  // namespace ppb
