// The embedding-bag inner kernel, compiled once per ISA (generic, AVX2,
// AVX-512) and chosen at run time: the op is bound by random row reads, and
// wider vectors leave more room in the out-of-order window for outstanding
// misses, which measured ~1.5x faster than the baseline build on a DLRM shape.
#pragma once

#include "pyparbench/core/tiered_kernel.hpp"

#include <cstdint>

namespace ppb {

struct BagArgs {
  const void* table;  // float, or bf16 (the upper halves of floats) when bf16
  bool bf16;
  // 8-bit rowwise (byte_rowwise): each row dim uint8 values, then its fp32
  // scale and fp32 bias (FBGEMM's / PyTorch's embedding_bag_byte_prepack
  // layout, dim + 8 bytes); a value reads as value · scale + bias.
  bool byte_rowwise;
  int64_t rows, dim;
  const void* indices;  // int32 or int64, see is64
  const void* offsets;  // same dtype as indices; null: fixed bag size
  bool is64;
  int64_t bag_size, bags, n_indices;
  const float* weights;  // per-sample weights or null
  bool mean;
  float* out;
};

// Each returns false when some index was outside [0, rows) (those lookups
// are skipped; the caller then reports the first one).
using BagKernel = bool (*)(const BagArgs&);
bool bag_kernel_generic(const BagArgs& a);
// x86 builds only (the per-ISA files are compiled where their ISA exists).
bool bag_kernel_avx2(const BagArgs& a);
bool bag_kernel_avx512(const BagArgs& a);

// The build runs use: the widest this CPU runs, or the tier set() forced
// (core/tiered_kernel.hpp).
TieredKernel<BagKernel>& bag_kernels();

}  // namespace ppb
