#include "pyparbench/core/checks.hpp"

#include "pyparbench/core/limits.hpp"

#include <sstream>
#include <stdexcept>

namespace ppb {

std::string shape_str(Dims s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ",";
  os << ")";
  return os.str();
}

void require_at_least(const char* what, int64_t v, int64_t lo) {
  if (v < lo)
    throw std::invalid_argument(std::string(what) + " must be >= " + std::to_string(lo) + ", got " +
                                std::to_string(v));
}

void require_shape(const char* what, Dims got, Dims expected) {
  if (got != expected)
    throw std::invalid_argument(std::string(what) + " has shape " + shape_str(got) + ", expected " +
                                shape_str(expected));
}

void require_positive_dims(const std::string& what, Dims s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] < 1)
      throw std::invalid_argument(what + " " + shape_str(s) +
                                  " has a dimension < 1; every size must be >= 1");
  bounded_elements(what, s);  // so that every count computed from it fits int64
}

void require_bias_presence(const char* kernel, bool prepared, bool given) {
  if (prepared == given) return;
  throw std::invalid_argument(prepared ? std::string("bias is required: this ") + kernel +
                                             " was prepared with bias"
                                       : std::string("bias was given but this ") + kernel +
                                             " was prepared without bias");
}

}  // namespace ppb
