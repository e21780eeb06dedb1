// Permutes the axes of a dense array (a oneDNN reorder from a strided view
// to a dense output), e.g. the head split of multi-head attention.
#pragma once

#include "pyparbench/ops/unary_kernel.hpp"

namespace ppb {

class Transpose : public UnaryKernel {
 public:
  // Output axis i is input axis perm[i] (numpy's transpose convention).
  Transpose(Shape input, std::vector<int64_t> perm, std::optional<int> threads);
  const std::vector<int64_t>& perm() const { return perm_; }

 private:
  std::vector<int64_t> perm_;
};

}  // namespace ppb
