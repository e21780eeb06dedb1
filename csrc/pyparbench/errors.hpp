#pragma once
// Failures that are facts about this machine, not bugs: Python sees them as
// their own exception types (csrc/bindings/register_errors.cpp), which the
// command line reports in one line.

#include <stdexcept>

namespace ppb {

// A precision for which this oneDNN build, on the ISA it dispatches to, has
// no kernel (bf16 below avx512_core under oneDNN 2.x, an aarch64 build
// without the Arm Compute Library): pyparbench.PrecisionUnavailable, a
// RuntimeError.
struct PrecisionUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace ppb
