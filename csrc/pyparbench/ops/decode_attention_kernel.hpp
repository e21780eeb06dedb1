// The rows of a decode step's attention (decode_attention_rows), compiled
// once per ISA (generic, AVX2, AVX-512) and chosen at run time: the scores'
// dot products, the exponentials and the weighted sum of the value rows run
// in the ISA's vectors, and the exponentials in a vector exp where the
// baseline build called std::exp once per key.
#pragma once

#include "pyparbench/core/tiered_kernel.hpp"
#include "pyparbench/ops/decode_attention.hpp"

namespace ppb {

using DecodeRowsKernel = void (*)(const DecodeStep&);
void decode_rows_generic(const DecodeStep& step);
// x86 builds only (the per-ISA files are compiled where their ISA exists).
void decode_rows_avx2(const DecodeStep& step);
void decode_rows_avx512(const DecodeStep& step);

// The build runs use: the widest this CPU runs, or the tier set() forced
// (core/tiered_kernel.hpp).
TieredKernel<DecodeRowsKernel>& decode_rows_kernels();

}  // namespace ppb
