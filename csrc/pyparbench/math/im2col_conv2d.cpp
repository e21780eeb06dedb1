#include "pyparbench/math/im2col_conv2d.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/math/gemm_op.hpp"
#include "pyparbench/math/im2col.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ppb {

Im2colConv2d::Im2colConv2d(const Conv2dConfig& cfg, const char* name, MathLibrary library,
                           std::optional<int> threads)
    : KernelOp(cfg, name, threads), library_(library), identity_(im2col_is_identity(cfg)) {
  require_nchw(library);
  require_relu_only("conv2d", library, config().activation);
  require_fp32(name, config().precision);
  if (config().sum)
    throw std::invalid_argument(std::string("conv2d: the ") + knob_name(library) +
                                " library has no fused residual sum; use the onednn library");
  if (!identity_) {
    require_positive_dims("im2col columns", Shape{cfg.c, cfg.kh, cfg.kw, out_h(), out_w()});
    columns_.resize(static_cast<size_t>(cfg.c * cfg.kh * cfg.kw * out_h() * out_w()));
  }
  weights_.resize(static_cast<size_t>(Dims(weight_shape()).elements()));
  if (cfg.bias) bias_.resize(static_cast<size_t>(cfg.out_channels));
}

void Im2colConv2d::set_weights(ConstFloatView weight, ConstFloatView bias) {
  check_weights(weight, bias);
  locked([&] {
    std::copy(weight.data, weight.data + weights_.size(), weights_.begin());
    if (bias.present()) std::copy(bias.data, bias.data + bias_.size(), bias_.begin());
    mark_weights_set();
  });
}

void Im2colConv2d::bind(ConstFloatView x, FloatView out) {
  check_run(x, out);
  x_ = x.data;
  out_ = out.data;
}

void Im2colConv2d::run(ConstFloatView x, FloatView out) {
  run_with([&] { bind(x, out); });
}

std::vector<double> Im2colConv2d::timeit(ConstFloatView x, FloatView out, int repeats,
                                         int warmup) {
  return timed_with([&] { bind(x, out); }, repeats, warmup);
}

void Im2colConv2d::execute() {
  const Conv2dConfig& cfg = config();
  const int64_t groups = cfg.groups, og = cfg.out_channels / groups;
  const int64_t spatial = out_h() * out_w();
  const int64_t rows_per_group = cfg.c / groups * cfg.kh * cfg.kw;
  Matmul p;
  p.m = og;
  p.n = spatial;
  p.k = rows_per_group;
  p.bias_per_row = true;
  p.relu = cfg.relu;
  for (int64_t n = 0; n < cfg.n; ++n) {
    const float* image = x_ + n * cfg.c * cfg.h * cfg.w;
    const float* columns = image;
    if (!identity_) {
      parallel_for(rows_per_group * groups, 4.0 * static_cast<double>(spatial),
                   [&](int64_t begin, int64_t end) {
                     im2col_rows(cfg, out_h(), out_w(), image, columns_.data(), begin, end);
                   });
      columns = columns_.data();
    }
    for (int64_t g = 0; g < groups; ++g) {
      p.a = weights_.data() + g * og * rows_per_group;
      p.b = columns + g * rows_per_group * spatial;
      p.c = out_ + (n * cfg.out_channels + g * og) * spatial;
      p.bias = cfg.bias ? bias_.data() + g * og : nullptr;
      matmul(p);
    }
  }
}

}  // namespace ppb
