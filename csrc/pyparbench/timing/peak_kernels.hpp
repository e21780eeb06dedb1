// Inner loops of the machine-ceiling measurements (`pyparbench peak`),
// compiled once per ISA (generic; AVX2 and AVX-512 in x86 builds, NEON in
// aarch64 builds) and picked at run time, as
// the embedding-bag kernel is. Each loop runs on one thread; peak.cpp spreads
// them over an OpenMP team and times the team.
#pragma once

#include <cstdint>

namespace ppb {

struct PeakKernels {
  const char* isa;  // "avx512", "avx2", "neon" or "generic"
  int lanes;        // float lanes of one vector register
  bool fused;       // one fused multiply-add per step (generic: a multiply, then an add)
  int chains;       // independent accumulators per thread (enough to cover the latency)
  // `iterations` rounds of `chains` independent vector multiply-adds
  // (2 * lanes FLOPs each); the result depends on every one of them.
  float (*fma)(int64_t iterations);
  // STREAM triad: a[i] = b[i] + s * c[i] for i in [begin, end).
  void (*triad)(float* a, const float* b, const float* c, float s, int64_t begin, int64_t end);
  // out[k] = sum of table rows idx[k * bag .. (k + 1) * bag) for bags k in
  // [first, last); `n_idx` is the length of idx (bounds the prefetches).
  void (*gather)(const float* table, int64_t dim, const int64_t* idx, int64_t n_idx,
                 int64_t bag, int64_t first, int64_t last, float* out);
};

PeakKernels peak_kernels_generic();
// x86 builds only.
PeakKernels peak_kernels_avx2();
PeakKernels peak_kernels_avx512();
// aarch64 builds only.
PeakKernels peak_kernels_neon();

}  // namespace ppb
