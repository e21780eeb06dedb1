// The byte lookup out[i] = row x[i] of a 256-row table (an int8 graph's SiLU
// gates, graph/passes/int8_gates.py), compiled once per ISA (generic, AVX2,
// AVX-512, and AVX-512 with VBMI) and chosen at run time. The rows are bytes,
// or float32 values: these, where every one is an integer times a scale
// (a grid's values), are a byte lookup widened and scaled, else a gather.
//
// The vpshufb tiers look up 16 rows at a time: each half of the table (rows
// 0-127, 128-255) is eight runs of 16 rows, kept as `steps`, each run XOR the
// one before. With i = (x & 0x7f) - 16·h, vpshufb(run h, i) gives run h's row
// x & 15 while h <= (x >> 4) & 7 and zero after (bit 7 of i set), so the XOR
// of the eight is row x & 0x7f of the half; bit 7 of x then picks the half.
// 16 vpshufb a vector; VBMI's vpermi2b reads 128 rows at once: two a vector.
#pragma once

#include "pyparbench/core/tiered_kernel.hpp"

#include <atomic>
#include <cstdint>
#include <string>

namespace ppb {

// A table as the kernels read it: row r is read by input byte r (an int8
// input's rows are already reordered, so no kernel flips its bytes).
struct LookupTable {
  // Bytes out: each row's byte. Floats out, scaled: u with float(u - base)
  // · scale the row's value.
  alignas(64) uint8_t bytes[256];
  // `bytes` in the vpshufb tiers' form (above): steps[128·half + 16·h + j]
  // = bytes[128·half + 16·h + j] ^ bytes[128·half + 16·(h - 1) + j] (h > 0).
  alignas(64) uint8_t steps[256];
  alignas(64) float floats[256];  // floats out: each row's value
  bool floats_out = false;
  // Floats out: floats[r] is float(bytes[r] - base) · scale to the bit.
  bool scaled = false;
  int32_t base = 0;
  float scale = 1.f;
};

// out[i] = row x[i], i in [0, n): bytes (uint8_t*) or floats (float*).
using LookupKernel = void (*)(const LookupTable& t, const uint8_t* x, int64_t n, void* out);
void lookup_kernel_generic(const LookupTable& t, const uint8_t* x, int64_t n, void* out);
// x86 builds only (the per-ISA files are compiled where their ISA exists).
void lookup_kernel_avx2(const LookupTable& t, const uint8_t* x, int64_t n, void* out);
void lookup_kernel_avx512(const LookupTable& t, const uint8_t* x, int64_t n, void* out);
void lookup_kernel_avx512vbmi(const LookupTable& t, const uint8_t* x, int64_t n, void* out);

// The build runs use: the tiers of core/tiered_kernel.hpp, the avx512 one in
// two builds: with VBMI ("avx512vbmi", the widest where the CPU has it) and
// without ("avx512", vpshufb), so that a CPU with VBMI tests both.
class LookupKernels {
 public:
  LookupKernels();
  LookupKernel get() const;
  // "avx512vbmi", "avx512", "avx2" or "generic" (one this CPU runs); "" or
  // "auto": the widest. std::invalid_argument otherwise, naming the flag
  // that is missing.
  void set(const std::string& isa);
  const char* isa() const;

 private:
  bool vbmi() const;  // whether get() gives the VBMI build for the avx512 tier
  TieredKernel<LookupKernel> tiers_;
  std::atomic<bool> no_vbmi_{false};  // "avx512" forced
};

LookupKernels& lookup_kernels();

}  // namespace ppb
