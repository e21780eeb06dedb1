// A byte lookup's table, built once, and its runs (ops/lookup_kernel.hpp).
#pragma once

#include "pyparbench/ops/lookup_kernel.hpp"

#include <cstdint>

namespace ppb {

// Tables from 256 rows lowest input value first, as a grid's bytes count
// (graph/passes/int8_gates.py's `table`): for a uint8 input row r is byte r,
// for an int8 one value r - 128 (byte r ^ 0x80).
LookupTable byte_lookup_table(const uint8_t* rows, bool int8_input);
// Float rows; scale > 0: the step of the grid the rows are on, so the wide
// tiers look up bytes and scale them, where every row is an integer times
// it to the bit (else, and with scale <= 0, they gather the floats).
LookupTable float_lookup_table(const float* rows, bool int8_input, float scale);

// out[i] = row x[i] over [0, n) with up to `threads` threads (fewer for
// short runs), the build lookup_kernels() gives.
void run_byte_lookup(const LookupTable& t, const uint8_t* x, int64_t n, void* out, int threads);

}  // namespace ppb
