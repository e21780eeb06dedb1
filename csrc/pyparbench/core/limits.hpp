// Upper bounds on sizes and thread counts. A request beyond them is refused
// with std::invalid_argument before any size is computed from it, so no
// element or byte count can overflow int64 and no call asks the OpenMP
// runtime or the OS for more threads than they can start (libgomp aborts the
// process, or crashes, when thread creation fails).
#pragma once

#include "pyparbench/core/tensor.hpp"

#include <cstdint>
#include <string>

namespace ppb {

// Threads of one kernel or pool, and inter-op workers or intra-op threads of
// one plan run.
constexpr int kMaxThreads = 4096;
// Threads of one plan run, all workers' teams together: enough for
// TensorFlow's defaults (inter_op = intra_op = logical CPUs) on 256 CPUs.
constexpr int64_t kMaxRunThreads = int64_t{1} << 16;
// Elements of one tensor (or of one scratch buffer): 1 PiB of floats.
constexpr int64_t kMaxElements = int64_t{1} << 48;
// One dimension of a tensor, and a convolution's or pooling's kernel size,
// stride, dilation or padding: oneDNN 2.6 dies of SIGFPE creating a matmul
// with a dimension of 2^32.
constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;

// Throws unless 1 <= n <= hi; `what` names the count.
void require_thread_count(const char* what, int64_t n, int64_t hi = kMaxThreads);
// The element count of `s` (every dimension >= 1); throws when a dimension
// exceeds kMaxDim or the count kMaxElements, without overflowing on the way.
int64_t bounded_elements(const std::string& what, Dims s);
// Throws unless v <= hi.
void require_at_most(const char* what, int64_t v, int64_t hi);

}  // namespace ppb
