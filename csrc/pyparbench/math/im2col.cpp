#include "pyparbench/math/im2col.hpp"

#include <algorithm>

namespace ppb {

namespace {

// Floor and ceiling of a / b for b > 0 and any sign of a.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

}  // namespace

bool im2col_is_identity(const Conv2dConfig& cfg) {
  return cfg.kh == 1 && cfg.kw == 1 && cfg.stride_h == 1 && cfg.stride_w == 1 &&
         cfg.pad_top == 0 && cfg.pad_bottom == 0 && cfg.pad_left == 0 && cfg.pad_right == 0;
}

void im2col_rows(const Conv2dConfig& cfg, int64_t out_h, int64_t out_w, const float* image,
                 float* columns, int64_t row_begin, int64_t row_end) {
  const int64_t taps = cfg.kh * cfg.kw, sw = cfg.stride_w;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t c = r / taps, ki = r % taps / cfg.kw, kj = r % cfg.kw;
    const float* plane = image + c * cfg.h * cfg.w;
    float* dst = columns + r * out_h * out_w;
    // Input column of output column ox: ox * sw + x0; those in [0, w) form
    // the range [lo, hi), the rest read padding.
    const int64_t x0 = kj * cfg.dilation_w - cfg.pad_left;
    const int64_t lo = std::clamp<int64_t>(ceil_div(-x0, sw), 0, out_w);
    const int64_t hi = std::clamp<int64_t>(floor_div(cfg.w - 1 - x0, sw) + 1, lo, out_w);
    for (int64_t oy = 0; oy < out_h; ++oy, dst += out_w) {
      const int64_t iy = oy * cfg.stride_h - cfg.pad_top + ki * cfg.dilation_h;
      if (iy < 0 || iy >= cfg.h) {
        std::fill(dst, dst + out_w, 0.f);
        continue;
      }
      const float* src = plane + iy * cfg.w;
      std::fill(dst, dst + lo, 0.f);
      if (sw == 1)
        std::copy(src + lo + x0, src + hi + x0, dst + lo);
      else
        for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox * sw + x0];
      std::fill(dst + hi, dst + out_w, 0.f);
    }
  }
}

void im2col_nhwc_rows(const Conv2dConfig& cfg, int64_t out_h, int64_t out_w, const float* x,
                      float* rows, int64_t row_begin, int64_t row_end) {
  const int64_t c = cfg.c, width = cfg.kh * cfg.kw * c;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t n = r / (out_h * out_w), oy = r / out_w % out_h, ox = r % out_w;
    const float* image = x + n * cfg.h * cfg.w * c;
    float* dst = rows + r * width;
    for (int64_t ki = 0; ki < cfg.kh; ++ki) {
      const int64_t iy = oy * cfg.stride_h - cfg.pad_top + ki * cfg.dilation_h;
      for (int64_t kj = 0; kj < cfg.kw; ++kj, dst += c) {
        const int64_t ix = ox * cfg.stride_w - cfg.pad_left + kj * cfg.dilation_w;
        if (iy < 0 || iy >= cfg.h || ix < 0 || ix >= cfg.w)
          std::fill(dst, dst + c, 0.f);
        else
          std::copy_n(image + (iy * cfg.w + ix) * c, c, dst);
      }
    }
  }
}

}  // namespace ppb
