// The Arm dot-product ceiling kernels on 128-bit registers, kDotChains
// independent chains each: BFMMLA and BFDOT (FEAT_BF16), SMMLA (FEAT_I8MM)
// and SDOT (FEAT_DotProd). Each is built for its extension alone (GCC's
// target pragma; "arch=armv8.2-a+..." because a bare "+bf16" does not reach
// the intrinsics' own target), so no other code here needs the extension.
#include "pyparbench/timing/peak_dot_kernels.hpp"

#include <arm_neon.h>

#include <cstdint>

namespace ppb {

namespace {

// The lanes of every chain, summed in double so the sum stays exact.
template <class T, class Vec, class Store>
double lane_sum(const Vec (&acc)[kDotChains], Store&& store) {
  T lanes[kDotChains][4];
  for (int c = 0; c < kDotChains; ++c) store(lanes[c], acc[c]);
  double total = 0;
  for (const auto& chain : lanes)
    for (T x : chain) total += static_cast<double>(x);
  return total;
}

// Every bf16 element 2^-10 (products 2^-20: neither overflow nor denormals
// however long the run), every int8 element 1 (int32 lanes wrap around on
// a long run, which costs nothing); the asm keeps the compiler from knowing
// the operands. A different start per chain: identical chains would be
// folded into one.
uint16x8_t bf16_operand() {
  uint16x8_t bits = vdupq_n_u16(0x3A80);
  __asm__ volatile("" : "+w"(bits));
  return bits;
}

int8x16_t int8_operand() {
  int8x16_t ones = vdupq_n_s8(1);
  __asm__ volatile("" : "+w"(ones));
  return ones;
}

}  // namespace

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+bf16")

namespace {

template <class Step>
double bf16_chains(int64_t iterations, Step&& step) {
  const bfloat16x8_t a = vreinterpretq_bf16_u16(bf16_operand());
  float32x4_t acc[kDotChains];
#pragma GCC unroll 16
  for (int c = 0; c < kDotChains; ++c) acc[c] = vdupq_n_f32(static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kDotChains; ++c) acc[c] = step(acc[c], a);
  }
  return lane_sum<float>(acc, [](float* out, float32x4_t v) { vst1q_f32(out, v); });
}

}  // namespace

double bf16_mmla_neon(int64_t iterations) {
  return bf16_chains(iterations,
                     [](float32x4_t acc, bfloat16x8_t a) { return vbfmmlaq_f32(acc, a, a); });
}

double bf16_dot_neon(int64_t iterations) {
  return bf16_chains(iterations,
                     [](float32x4_t acc, bfloat16x8_t a) { return vbfdotq_f32(acc, a, a); });
}

#pragma GCC pop_options

namespace {

template <class Step>
double int8_chains(int64_t iterations, Step&& step) {
  const int8x16_t a = int8_operand();
  int32x4_t acc[kDotChains];
#pragma GCC unroll 16
  for (int c = 0; c < kDotChains; ++c) acc[c] = vdupq_n_s32(c);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kDotChains; ++c) acc[c] = step(acc[c], a);
  }
  return lane_sum<int32_t>(acc, [](int32_t* out, int32x4_t v) { vst1q_s32(out, v); });
}

}  // namespace

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+i8mm")
// Flattened: the chains' loop, built without the extension, is inlined here,
// and the instruction into it.
__attribute__((flatten)) double int8_mmla_neon(int64_t iterations) {
  return int8_chains(iterations,
                     [](int32x4_t acc, int8x16_t a) { return vmmlaq_s32(acc, a, a); });
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
__attribute__((flatten)) double int8_dot_neon(int64_t iterations) {
  return int8_chains(iterations,
                     [](int32x4_t acc, int8x16_t a) { return vdotq_s32(acc, a, a); });
}
#pragma GCC pop_options

}  // namespace ppb
