// The dot-product ceiling kernels: vdpbf16ps (AVX512_BF16) and vpdpbusd
// (AVX512_VNNI) on zmm registers, kDotChains independent chains each.
#include "pyparbench/timing/peak_dot_kernels.hpp"

#include <immintrin.h>

#include <cstdint>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni")

namespace ppb {

double bf16_dot_avx512(int64_t iterations) {
  // Every product is 2^-10 * 2^-10 = 2^-20, two per lane a step: 10^9 steps
  // add about 2000 to 1, with neither overflow nor denormals. The asm keeps
  // the compiler from knowing the operand.
  __m512i bits = _mm512_set1_epi16(0x3A80);  // bf16 2^-10
  __asm__ volatile("" : "+v"(bits));
  const __m512bh a = (__m512bh)bits;
  __m512 acc[kDotChains];
#pragma GCC unroll 16
  // A different start per chain: identical chains would be folded into one.
  for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_set1_ps(1.0f + 1e-3f * static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, a);
  }
  __m512 s = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kDotChains; ++c) s = _mm512_add_ps(s, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  double total = 0;
  for (float x : lanes) total += x;
  return total;
}

double int8_dot_avx512(int64_t iterations) {
  // Unsigned 1s against signed +1, -1, +1, -1: each lane's four products
  // sum to 0, so the int32 accumulators never overflow.
  __m512i u = _mm512_set1_epi8(1);
  __m512i s = _mm512_set1_epi32(0xFF01FF01);
  __asm__ volatile("" : "+v"(u), "+v"(s));
  __m512i acc[kDotChains];
#pragma GCC unroll 16
  for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_set1_epi32(c);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], u, s);
  }
  __m512i sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kDotChains; ++c) sum = _mm512_add_epi32(sum, acc[c]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, sum);
  double total = 0;
  for (int32_t x : lanes) total += x;
  return total;
}

}  // namespace ppb
