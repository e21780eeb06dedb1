// The ceiling kernels built for aarch64's Advanced SIMD (NEON, in every
// aarch64 CPU): 128-bit vectors and a fused multiply-add per step (FMLA),
// 24 of the 32 vector registers holding independent chains (4 FMA pipes x
// 4-cycle latency on Neoverse V1 / V2 needs 16; N1 / N2 have 2 pipes).
#include "pyparbench/timing/peak_kernels.hpp"

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace ppb {
namespace {
using Vec = float32x4_t;
constexpr int kLanes = 4;
constexpr bool kFused = true;
constexpr int kChains = 24;
inline Vec vset(float x) { return vdupq_n_f32(x); }
inline Vec vmadd(Vec a, Vec b, Vec c) { return vfmaq_f32(c, a, b); }
inline float vsum(Vec v) { return vaddvq_f32(v); }
}  // namespace
}  // namespace ppb

#define PPB_PEAK_KERNELS peak_kernels_neon
#define PPB_PEAK_ISA "neon"
#include "pyparbench/timing/peak_kernels.inc"
