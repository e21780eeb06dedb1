// The ceiling kernels built for AVX-512: 16 of the 32 zmm registers hold
// independent FMA chains (2 FMA pipes x 4-cycle latency needs at least 8).
#include "pyparbench/timing/peak_kernels.hpp"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")

namespace ppb {
namespace {
using Vec = __m512;
constexpr int kLanes = 16;
constexpr bool kFused = true;
constexpr int kChains = 16;
inline Vec vset(float x) { return _mm512_set1_ps(x); }
inline Vec vmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline float vsum(Vec v) {
  alignas(64) float f[16];
  _mm512_store_ps(f, v);
  float s = 0;
  for (float x : f) s += x;
  return s;
}
}  // namespace
}  // namespace ppb

#define PPB_PEAK_KERNELS peak_kernels_avx512
#define PPB_PEAK_ISA "avx512"
#include "pyparbench/timing/peak_kernels.inc"
