// The ceiling kernels for any CPU: 128-bit vectors (GCC's vector extension),
// 12 chains; a multiply then an add per step where the baseline ISA has no
// FMA (x86-64), one FMA where it has (aarch64: GCC contracts a * b + c).
#include "pyparbench/timing/peak_kernels.hpp"

#include <cstdint>
#include <cstring>

namespace ppb {
namespace {
typedef float Vec __attribute__((vector_size(16)));
constexpr int kLanes = 4;
#if defined(__FP_FAST_FMAF)
constexpr bool kFused = true;
#else
constexpr bool kFused = false;
#endif
constexpr int kChains = 12;
inline Vec vset(float x) { return Vec{x, x, x, x}; }
inline Vec vmadd(Vec a, Vec b, Vec c) { return a * b + c; }
inline float vsum(Vec v) { return v[0] + v[1] + v[2] + v[3]; }
}  // namespace
}  // namespace ppb

#define PPB_PEAK_KERNELS peak_kernels_generic
#define PPB_PEAK_ISA "generic"
#include "pyparbench/timing/peak_kernels.inc"
