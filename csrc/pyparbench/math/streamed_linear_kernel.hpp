// The inner loop of StreamedLinear (streamed_linear.hpp), compiled once per
// ISA (generic, AVX2, AVX-512) and chosen at run time. Every tier reads the
// weights as panels of kStreamedPanelRows output rows, each panel its k
// columns in chunks of kStreamedChunk, in one of two layouts:
//
//   packed: weight[p·R + i][c·C + j]  at  ((p·chunks + c)·R + i)·C + j
//
// (R rows, C columns a chunk, chunks = ceil(k / C); rows past n and columns
// past k are zeros), so a panel is one sequential run of memory that a
// thread streams once, whatever the vector width; or
//
//   plain:  weight[p·R + i][c·C + j]  at  (p·R + i)·k + c·C + j
//
// the caller's (n, k) matrix read where it is, a panel's R rows streamed side
// by side. Both give the same sums in the same order: the same bits.
#pragma once

#include "pyparbench/core/tiered_kernel.hpp"

#include <cstdint>

namespace ppb {

constexpr int64_t kStreamedPanelRows = 8;
constexpr int64_t kStreamedChunk = 16;

struct StreamedArgs {
  const float* weights;  // packed or plain, as above
  const float* bias;     // n values, or null
  const float* x;        // (m, k)
  float* y;              // (m, n)
  int64_t m, n, k;
  bool plain;  // the caller's (n, k) matrix, not packed panels
};

// y rows [p0·R, p1·R) ∩ [0, n) of every row of x, from panels [p0, p1).
using StreamedKernel = void (*)(const StreamedArgs& a, int64_t p0, int64_t p1);
void streamed_kernel_generic(const StreamedArgs& a, int64_t p0, int64_t p1);
// x86 builds only (the per-ISA files are compiled where their ISA exists).
void streamed_kernel_avx2(const StreamedArgs& a, int64_t p0, int64_t p1);
void streamed_kernel_avx512(const StreamedArgs& a, int64_t p0, int64_t p1);

// The build runs use: the widest this CPU runs, or the tier set() forced
// (core/tiered_kernel.hpp).
TieredKernel<StreamedKernel>& streamed_kernels();

}  // namespace ppb
