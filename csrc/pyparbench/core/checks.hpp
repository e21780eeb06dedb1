// Argument checks shared by every kernel. They throw std::invalid_argument
// (ValueError in Python) with the offending value in the message.
#pragma once

#include "pyparbench/core/tensor.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ppb {

// "(2, 3)" style, as numpy prints shapes.
std::string shape_str(Dims s);

// Throws unless v >= lo; `what` names the argument.
void require_at_least(const char* what, int64_t v, int64_t lo);
// Throws unless the shape of a view equals the expected one.
// Allocation-free on success: called on every run.
void require_shape(const char* what, Dims got, Dims expected);
inline void require_shape(const std::string& what, Dims got, Dims expected) {
  require_shape(what.c_str(), got, expected);
}
// Throws unless every dimension is >= 1.
void require_positive_dims(const std::string& what, Dims s);
// Throws unless a bias is given exactly when `kernel` (a class name) was
// prepared with one.
void require_bias_presence(const char* kernel, bool prepared, bool given);

}  // namespace ppb

namespace ppb {

// Throws unless `out` and `in` are the same buffer (allowed when the op works
// in place) or do not overlap at all.
template <typename A, typename B>
void require_no_partial_overlap(const char* out_name, const View<A>& out,
                                const char* in_name, const View<B>& in, bool allow_same) {
  if (!out.present() || !in.present()) return;
  auto o0 = reinterpret_cast<const char*>(out.data);
  auto o1 = o0 + out.size() * sizeof(A);
  auto i0 = reinterpret_cast<const char*>(in.data);
  auto i1 = i0 + in.size() * sizeof(B);
  if (allow_same && o0 == i0 && o1 == i1) return;
  if (o0 < i1 && i0 < o1)
    throw std::invalid_argument(std::string(out_name) + " overlaps " + in_name +
                                (allow_same ? "; pass the same array or a separate one"
                                            : "; this op cannot work in place"));
}

}  // namespace ppb
