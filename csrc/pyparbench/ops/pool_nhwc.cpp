#include "pyparbench/ops/pool_nhwc.hpp"

#include "pyparbench/core/cpu_features.hpp"

#include <algorithm>
#include <string>
#include <vector>

// The vector helpers below are inlined into the per-ISA clones; GCC's note
// that a 32-byte vector argument has no baseline-ISA ABI does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

// Every helper below pool_row is always inlined into its per-ISA clones: one
// left out of line would be compiled for the baseline ISA, its vectors
// split into SSE halves.
#define PPB_INLINE inline __attribute__((always_inline))

namespace ppb {

namespace {

// Eight floats, loaded and stored unaligned (a channel block starts
// anywhere). Written as GCC vector code so that the compiler keeps a block's
// running max or sum in registers across the taps: left to auto-vectorise,
// it vectorised across the taps instead.
typedef float Vec8 __attribute__((vector_size(32), aligned(4)));
constexpr int64_t kVec = 8;
// Channels per block: 4 vectors (4 AVX2 registers).
constexpr int64_t kBlockVecs = 4;

PPB_INLINE Vec8 load8(const float* p) {
  Vec8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
PPB_INLINE void store8(float* p, const Vec8& v) { __builtin_memcpy(p, &v, sizeof v); }

template <bool IsMax, class T>
PPB_INLINE void fold(T& acc, const T& v) {
  // A NaN tap wins (v != v); a NaN already in acc stays (acc < v is false).
  if constexpr (IsMax)
    acc = ((acc < v) | (v != v)) ? v : acc;
  else
    acc += v;
}

// y[k] = fold over the rows r of x[r * stride + k], k in [0, n), times
// `scale` for a sum: vectors of eight where they fit, then one float at a
// time.
template <bool IsMax>
PPB_INLINE void fold_rows(const float* x, int64_t rows, int64_t stride, int64_t n, float scale,
                      float* y) {
  int64_t k = 0;
  for (; k + kBlockVecs * kVec <= n; k += kBlockVecs * kVec) {
    Vec8 acc[kBlockVecs];
    for (int64_t v = 0; v < kBlockVecs; ++v) acc[v] = load8(x + k + v * kVec);
    for (int64_t r = 1; r < rows; ++r)
      for (int64_t v = 0; v < kBlockVecs; ++v)
        fold<IsMax>(acc[v], load8(x + r * stride + k + v * kVec));
    for (int64_t v = 0; v < kBlockVecs; ++v) {
      if constexpr (!IsMax) acc[v] *= scale;
      store8(y + k + v * kVec, acc[v]);
    }
  }
  for (; k + kVec <= n; k += kVec) {
    Vec8 acc = load8(x + k);
    for (int64_t r = 1; r < rows; ++r) fold<IsMax>(acc, load8(x + r * stride + k));
    if constexpr (!IsMax) acc *= scale;
    store8(y + k, acc);
  }
  for (; k < n; ++k) {
    float acc = x[k];
    for (int64_t r = 1; r < rows; ++r) fold<IsMax>(acc, x[r * stride + k]);
    y[k] = IsMax ? acc : acc * scale;
  }
}

// One output row of one image, separably: the window's input rows folded
// into one row of W pixels (`cols`, a contiguous stream of W * C floats),
// then each output pixel folds its window's columns of that. Cloned per ISA
// (the package is built for the baseline x86-64), so the folds run at the
// machine's vector width; a row per call keeps the dispatch off the pixels
// (blocked data pools eight channels a pixel, too little work to carry a
// call each).
template <bool IsMax>
PPB_INLINE void pool_row_of(const Pool2dConfig& cfg, const PoolNhwcShape& s, const float* image,
                        int64_t i, float* cols, float* out) {
  const int64_t row = s.w * s.c;
  const int64_t h0 = i * cfg.stride_h - cfg.pad_top;
  const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + cfg.kh, s.h);
  const int64_t rows_in = std::min(h0 + cfg.kh, s.h + cfg.pad_bottom) - h0;
  // The constructor's checks (padding smaller than the kernel, a ceil
  // window starting inside the input) leave every window a tap.
  fold_rows<IsMax>(image + h_lo * row, h_hi - h_lo, row, row, 1.f, cols);
  for (int64_t j = 0; j < s.ow; ++j) {
    const int64_t w0 = j * cfg.stride_w - cfg.pad_left;
    const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + cfg.kw, s.w);
    const int64_t divisor = cfg.count_include_pad
                                ? rows_in * (std::min(w0 + cfg.kw, s.w + cfg.pad_right) - w0)
                                : (h_hi - h_lo) * (w_hi - w_lo);
    fold_rows<IsMax>(cols + w_lo * s.c, w_hi - w_lo, s.c, s.c,
                     1.f / static_cast<float>(divisor), out + j * s.c);
  }
}

// One build of the row per kernel tier, chosen once from the CPU's features
// (core/cpu_features.hpp): x86 builds have an AVX-512F and an AVX2 build
// beside the baseline one; elsewhere the baseline build is the only one
// (aarch64: NEON).
#define PPB_POOL_ROW(name)                                                                \
  void name(const Pool2dConfig& cfg, const PoolNhwcShape& s, const float* image, int64_t i, \
            float* cols, float* out) {                                                    \
    if (cfg.kind == "max")                                                                \
      pool_row_of<true>(cfg, s, image, i, cols, out);                                     \
    else                                                                                  \
      pool_row_of<false>(cfg, s, image, i, cols, out);                                    \
  }

PPB_POOL_ROW(pool_row_generic)
#if PPB_ARCH_X86
__attribute__((target("avx512f"))) PPB_POOL_ROW(pool_row_avx512)
__attribute__((target("avx2"))) PPB_POOL_ROW(pool_row_avx2)
#endif

using PoolRow = void (*)(const Pool2dConfig&, const PoolNhwcShape&, const float*, int64_t,
                         float*, float*);

// The widest tier with a row build: "avx512", "avx2" or "generic".
const std::string& pool_row_tier() {
  static const std::string tier = x86_kernel_tiers().front();
  return tier;
}

PoolRow pool_row_for_this_cpu() {
  static const PoolRow row = [] {
#if PPB_ARCH_X86
    if (pool_row_tier() == "avx512") return &pool_row_avx512;
    if (pool_row_tier() == "avx2") return &pool_row_avx2;
#endif
    return &pool_row_generic;
  }();
  return row;
}

}  // namespace

const char* pool_nhwc_isa() { return pool_row_tier().c_str(); }

void pool_nhwc_serial(const Pool2dConfig& cfg, const PoolNhwcShape& s, const float* x, float* y,
                      float* cols) {
  const PoolRow pool_row = pool_row_for_this_cpu();
  for (int64_t r = 0; r < s.n * s.oh; ++r)
    pool_row(cfg, s, x + r / s.oh * s.h * s.w * s.c, r % s.oh, cols, y + r * s.ow * s.c);
}

void pool_nhwc(const Pool2dConfig& cfg, const PoolNhwcShape& s, const float* x, float* y) {
  const int64_t rows = s.n * s.oh;
  const PoolRow pool_row = pool_row_for_this_cpu();
#pragma omp parallel
  {
    std::vector<float> cols(static_cast<size_t>(s.w * s.c));  // one folded row per thread
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r / s.oh, i = r % s.oh;
      pool_row(cfg, s, x + b * s.h * s.w * s.c, i, cols.data(), y + r * s.ow * s.c);
    }
  }
}

}  // namespace ppb
