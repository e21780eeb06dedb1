// The rows of a decode step's attention (decode_attention_rows), compiled
// once per ISA (generic, AVX2, AVX-512) and chosen at run time: the scores'
// dot products, the exponentials and the weighted sum of the value rows run
// in the ISA's vectors, and the exponentials in a vector exp where the
// baseline build called std::exp once per key.
#pragma once

#include "pyparbench/ops/decode_attention.hpp"

#include <string>

namespace ppb {

using DecodeRowsKernel = void (*)(const DecodeStep&);
void decode_rows_generic(const DecodeStep& step);
// x86 builds only (the per-ISA files are compiled where their ISA exists).
void decode_rows_avx2(const DecodeStep& step);
void decode_rows_avx512(const DecodeStep& step);

// The kernel runs chose (set_decode_attention_isa), else the widest this
// CPU runs, and its name.
DecodeRowsKernel select_decode_rows_kernel();
const char* decode_attention_isa();
// Runs use this tier's kernel ("avx512", "avx2", "generic"; "auto" or "":
// the widest again). std::invalid_argument for an unknown name or a tier
// this CPU does not run, naming those it does.
void set_decode_attention_isa(const std::string& isa);

}  // namespace ppb
