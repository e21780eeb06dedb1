// The ceiling kernels built for AVX2 + FMA: 12 of the 16 ymm registers hold
// independent FMA chains (2 FMA pipes x 5-cycle latency on Haswell needs 10).
#include "pyparbench/timing/peak_kernels.hpp"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#pragma GCC target("avx2,fma")

namespace ppb {
namespace {
using Vec = __m256;
constexpr int kLanes = 8;
constexpr bool kFused = true;
constexpr int kChains = 12;
inline Vec vset(float x) { return _mm256_set1_ps(x); }
inline Vec vmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float vsum(Vec v) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
}  // namespace
}  // namespace ppb

#define PPB_PEAK_KERNELS peak_kernels_avx2
#define PPB_PEAK_ISA "avx2"
#include "pyparbench/timing/peak_kernels.inc"
