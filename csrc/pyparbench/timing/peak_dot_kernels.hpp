// Inner loops of the dot-product ceilings (`pyparbench peak`'s bf16 and int8
// figures beside the fp32 FMA one), built for AVX-512 with AVX512_BF16 and
// AVX512_VNNI in x86 builds only (peak_dot_kernels_avx512.cpp); peak.cpp
// calls them where the CPU has the flag. Each loop runs on one thread.
#pragma once

#include <cstdint>

namespace ppb {

// Independent accumulators per thread (two pipes x a latency of up to 8).
constexpr int kDotChains = 16;
// Operations one instruction does on a 512-bit register, a multiply-add
// counting 2: vdpbf16ps adds 2 bf16 products into each of 16 fp32 lanes,
// vpdpbusd 4 u8 x s8 products into each of 16 int32 lanes.
constexpr int kBf16DotOps = 16 * 2 * 2;
constexpr int kInt8DotOps = 16 * 4 * 2;

// `iterations` rounds of kDotChains independent instructions; the result
// depends on every one of them.
double bf16_dot_avx512(int64_t iterations);
double int8_dot_avx512(int64_t iterations);

}  // namespace ppb
