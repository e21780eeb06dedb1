#pragma once
// Without int8 dot products (no VNNI or AMX) oneDNN's x86 int8 kernels pair
// vpmaddubsw and vpmaddwd: vpmaddubsw sums two u8 · s8 products in int16 and
// saturates once a weight passes 7 bits (2 · 255 · 127 > 32767), so the
// result is silently wrong. A kernel on such an implementation refuses those
// weights, naming the fix; 7-bit weights (|w| <= 64, the sum <= 32640), a
// reference implementation and the int8 dot-product ones are exact.

#include "pyparbench/errors.hpp"
#include "pyparbench/dnnl_compat.hpp"

#include <cstdint>
#include <string>

namespace ppb {

inline bool int8_saturates(const std::string& impl) {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  const bool reference = impl.rfind("ref", 0) == 0 || impl.find(":ref") != std::string::npos;
  return !reference && !compat::int8_native(impl);
#else
  (void)impl;
  return false;
#endif
}

inline void require_int8_weight_reach(const char* kernel, const std::string& impl,
                                      const int8_t* w, int64_t count) {
  if (!int8_saturates(impl)) return;
  for (int64_t i = 0; i < count; ++i) {
    if (w[i] < -64 || w[i] > 64)
      throw PrecisionUnavailable(
          std::string(kernel) + ": weight " + std::to_string(int(w[i])) + " at " +
          std::to_string(i) + " is beyond 7 bits, and oneDNN's int8 kernel here (" + impl +
          ", no VNNI or AMX) sums pairs of u8 · s8 products in int16, which saturates on "
          "it: quantize the weights to 7 bits (ONNX Runtime's reduce_range=True), or run int8 "
          "on a CPU with int8 dot products (VNNI, AMX)");
  }
}

// oneDNN's convolution on such an implementation also gets int8 (s8)
// activations wrong, about twice the reference (tests/test_int8_ops.py's
// channels-last cases on jit_uni_int8:avx2, oneDNN 2.6): refused by name.
inline void require_int8_signed_source(const char* kernel, const std::string& impl) {
  if (!int8_saturates(impl)) return;
  throw PrecisionUnavailable(
      std::string(kernel) + ": int8 (s8) activations on oneDNN's int8 convolution here (" + impl +
      ", no VNNI or AMX) come out wrong: quantize the activations to uint8 (ONNX Runtime's "
      "activation_type=QUInt8, its default), or run int8 on a CPU with int8 dot products "
      "(VNNI, AMX)");
}

}  // namespace ppb
