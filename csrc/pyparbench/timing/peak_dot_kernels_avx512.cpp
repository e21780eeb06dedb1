// The dot-product ceiling kernels: vdpbf16ps (AVX512_BF16) and vpdpbusd
// (AVX512_VNNI) on zmm registers, kDotChains independent chains each.
#include "pyparbench/timing/peak_dot_kernels.hpp"

#include <immintrin.h>

#include <cstdint>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni")

namespace ppb {

namespace {

// The lanes of every chain, summed in double so the sum stays exact.
template <class T, class Store>
double lane_sum(Store&& store) {
  alignas(64) T lanes[kDotChains][16];
  store(lanes);
  double total = 0;
  for (const auto& chain : lanes)
    for (T x : chain) total += static_cast<double>(x);
  return total;
}

}  // namespace

double bf16_dot_avx512(int64_t iterations) {
  // Every product is 2^-10 * 2^-10 = 2^-20, two per lane a step: with
  // neither overflow nor denormals, however long the run. The asm keeps the
  // compiler from knowing the operand.
  __m512i bits = _mm512_set1_epi16(0x3A80);  // bf16 2^-10
  __asm__ volatile("" : "+v"(bits));
  const __m512bh a = (__m512bh)bits;
  __m512 acc[kDotChains];
#pragma GCC unroll 16
  // A different start per chain: identical chains would be folded into one.
  for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, a);
  }
  return lane_sum<float>([&](float (*lanes)[16]) {
    for (int c = 0; c < kDotChains; ++c) _mm512_store_ps(lanes[c], acc[c]);
  });
}

double int8_dot_avx512(int64_t iterations) {
  // Unsigned 1s against signed 1s: each lane gains 4 a step (int32 lanes
  // wrap around on a long run, which costs nothing).
  __m512i u = _mm512_set1_epi8(1);
  __m512i s = _mm512_set1_epi8(1);
  __asm__ volatile("" : "+v"(u), "+v"(s));
  __m512i acc[kDotChains];
#pragma GCC unroll 16
  for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_set1_epi32(c);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], u, s);
  }
  return lane_sum<int32_t>([&](int32_t (*lanes)[16]) {
    for (int c = 0; c < kDotChains; ++c) _mm512_store_si512(lanes[c], acc[c]);
  });
}

}  // namespace ppb
