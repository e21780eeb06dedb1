// Inner loops of the dot-product ceilings (`pyparbench peak`'s bf16 and int8
// figures beside the fp32 FMA one), one per instruction, each in the file of
// its ISA: AVX512_BF16 / AVX512_VNNI (peak_dot_kernels_avx512.cpp) and AMX
// (peak_dot_kernels_amx.cpp) in x86 builds, Arm's BF16, I8MM and DotProd
// (peak_dot_kernels_neon.cpp) in aarch64 builds; peak.cpp calls one where
// the CPU has its flag (peak_dot_choice.hpp). Each loop runs on one thread.
//
// Each loop runs `iterations` rounds of independent instructions, from
// operands it knows only at run time, and returns the sum of every
// accumulator element, an exact value for small counts (tests check it):
//   vector kernels: kDotChains accumulators, chain c starting at c in every
//     lane; bf16 operands all 2^-10, int8 operands all 1;
//   AMX: four accumulator tiles (0-3) from zero, each round 2x2 tile
//     products of source tiles 4-5 by 6-7, operands as above.
#pragma once

#include <cstdint>
#include <string>

namespace ppb {

// Independent accumulators per thread in the vector kernels (two to four
// pipes x a latency of up to 8).
constexpr int kDotChains = 16;
// Accumulator tiles of the AMX kernels, and tile products per round.
constexpr int kAmxAccumulators = 4;

#if defined(__x86_64__) || defined(__i386__)
double bf16_dot_avx512(int64_t iterations);  // vdpbf16ps
double int8_dot_avx512(int64_t iterations);  // vpdpbusd
double bf16_dot_amx(int64_t iterations);     // tdpbf16ps
double int8_dot_amx(int64_t iterations);     // tdpbusd
// Asks Linux once for this process's permission to use AMX tile data
// (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); without it the first
// tile instruction raises SIGILL. "" when granted, else why not.
std::string amx_permission_denied();
#endif

#if defined(__aarch64__)
double bf16_mmla_neon(int64_t iterations);  // bfmmla
double bf16_dot_neon(int64_t iterations);   // bfdot
double int8_mmla_neon(int64_t iterations);  // smmla
double int8_dot_neon(int64_t iterations);   // sdot
#endif

}  // namespace ppb
