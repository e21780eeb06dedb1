#include "pyparbench/ops/pool_nhwc.hpp"

#include <algorithm>
#include <vector>

// The vector helpers below are inlined into the per-ISA clones; GCC's note
// that a 32-byte vector argument has no baseline-ISA ABI does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

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

inline Vec8 load8(const float* p) {
  Vec8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, const Vec8& v) { __builtin_memcpy(p, &v, sizeof v); }

template <bool IsMax, class T>
inline void fold(T& acc, const T& v) {
  if constexpr (IsMax)
    acc = acc < v ? v : acc;
  else
    acc += v;
}

template <bool IsMax, int64_t Vecs>
inline void pool_block(const float* const* taps, int64_t n_taps, int64_t k0, float scale,
                       float* out) {
  Vec8 acc[Vecs];
  for (int64_t v = 0; v < Vecs; ++v) acc[v] = load8(taps[0] + k0 + v * kVec);
  for (int64_t t = 1; t < n_taps; ++t) {
    const float* p = taps[t] + k0;
    for (int64_t v = 0; v < Vecs; ++v) fold<IsMax>(acc[v], load8(p + v * kVec));
  }
  for (int64_t v = 0; v < Vecs; ++v) {
    if constexpr (!IsMax) acc[v] *= scale;
    store8(out + k0 + v * kVec, acc[v]);
  }
}

template <bool IsMax>
inline void pool_channels(const float* const* taps, int64_t n_taps, int64_t c, float scale,
                          float* out) {
  int64_t k0 = 0;
  for (; k0 + kBlockVecs * kVec <= c; k0 += kBlockVecs * kVec)
    pool_block<IsMax, kBlockVecs>(taps, n_taps, k0, scale, out);
  for (; k0 + kVec <= c; k0 += kVec) pool_block<IsMax, 1>(taps, n_taps, k0, scale, out);
  for (; k0 < c; ++k0) {  // the last c % 8 channels
    float acc = taps[0][k0];
    for (int64_t t = 1; t < n_taps; ++t) fold<IsMax>(acc, taps[t][k0]);
    out[k0] = IsMax ? acc : acc * scale;
  }
}

// One output pixel's channels. Cloned per ISA (the package is built for the
// baseline x86-64), so the blocks run at the machine's vector width.
__attribute__((target_clones("avx512f", "avx2", "default"))) void pool_pixel(
    bool is_max, const float* const* taps, int64_t n_taps, int64_t c, float scale, float* out) {
  if (is_max)
    pool_channels<true>(taps, n_taps, c, scale, out);
  else
    pool_channels<false>(taps, n_taps, c, scale, out);
}

}  // namespace

void pool_nhwc(const Pool2dConfig& cfg, const PoolNhwcShape& s, const float* x, float* y) {
  const bool is_max = cfg.kind == "max";
  const int64_t rows = s.n * s.oh, kh = cfg.kh, kw = cfg.kw;
#pragma omp parallel
  {
    // At most kh * kw taps; a small per-thread list of their addresses.
    std::vector<const float*> taps(static_cast<size_t>(kh * kw));
#pragma omp for collapse(2) schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < s.ow; ++j) {
        const int64_t b = r / s.oh, i = r % s.oh;
        const int64_t h0 = i * cfg.stride_h - cfg.pad_top, w0 = j * cfg.stride_w - cfg.pad_left;
        const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + kh, s.h);
        const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + kw, s.w);
        int64_t n_taps = 0;
        const float* image = x + b * s.h * s.w * s.c;
        for (int64_t hh = h_lo; hh < h_hi; ++hh)
          for (int64_t ww = w_lo; ww < w_hi; ++ww) taps[n_taps++] = image + (hh * s.w + ww) * s.c;
        float divisor = static_cast<float>(n_taps);
        if (cfg.count_include_pad)
          divisor = static_cast<float>((std::min(h0 + kh, s.h + cfg.pad_bottom) - h0) *
                                       (std::min(w0 + kw, s.w + cfg.pad_right) - w0));
        // The constructor's checks (padding smaller than the kernel, a ceil
        // window starting inside the input) leave every window a tap.
        pool_pixel(is_max, taps.data(), n_taps, s.c, 1.f / divisor, y + (r * s.ow + j) * s.c);
      }
  }
}

}  // namespace ppb
