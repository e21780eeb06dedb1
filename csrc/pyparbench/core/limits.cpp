#include "pyparbench/core/limits.hpp"

#include "pyparbench/core/checks.hpp"

#include <stdexcept>

namespace ppb {

void require_thread_count(const char* what, int64_t n, int64_t hi) {
  require_at_least(what, n, 1);
  require_at_most(what, n, hi);
}

int64_t bounded_elements(const std::string& what, Dims s) {
  int64_t n = 1;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] > kMaxDim)
      throw std::invalid_argument(what + " " + shape_str(s) + " has a dimension over " +
                                  std::to_string(kMaxDim));
  for (size_t i = 0; i < s.size(); ++i)
    if (__builtin_mul_overflow(n, s[i], &n) || n > kMaxElements)
      throw std::invalid_argument(what + " " + shape_str(s) + " has more than 2**48 elements");
  return n;
}

void require_at_most(const char* what, int64_t v, int64_t hi) {
  if (v > hi)
    throw std::invalid_argument(std::string(what) + " must be <= " + std::to_string(hi) +
                                ", got " + std::to_string(v));
}

}  // namespace ppb
