// 2-D pooling over NCHW activations (oneDNN pooling).
#pragma once

#include "pyparbench/ops/unary_kernel.hpp"

#include <string>

namespace ppb {

struct Pool2dConfig {
  std::string kind = "max";  // "max" or "avg"
  int64_t kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  bool ceil_mode = false;          // output size rounded up, as PyTorch's ceil_mode
  bool count_include_pad = true;   // avg: divide by the full window, padding included
  // "onednn", "direct" (our channels-last loop, pool_nhwc.hpp; nhwc only) or
  // "auto": direct on channels-last data except an average counting the
  // padding, oneDNN otherwise.
  std::string impl = "auto";
};

class Pool2d : public UnaryKernel {
 public:
  // nhwc: input and output are stored channels-last (their shapes, as
  // run() checks them, are then (N, H, W, C)).
  Pool2d(const Pool2dConfig& cfg, Shape input_nchw, std::optional<int> threads,
         bool nhwc = false);
  const Pool2dConfig& config() const { return cfg_; }
  // "onednn" or "direct": what impl "auto" resolved to.
  const char* impl() const { return direct_ ? "direct" : "onednn"; }

 protected:
  void execute() override;

 private:
  Pool2dConfig cfg_;
  // Average with ceil_mode and count_include_pad: oneDNN divides the extra
  // last window by the full kernel, PyTorch by the window clipped to the
  // padded input; these rescale the last output row / column to match.
  float last_row_scale_ = 1.f, last_col_scale_ = 1.f;
  bool nhwc_ = false;
  bool direct_ = false;
  Shape in_nchw_;
};

// Mean over H and W: (N, C, H, W) -> (N, C).
class GlobalAvgPool : public UnaryKernel {
 public:
  // nhwc: the input is stored channels-last ((N, H, W, C) as run() checks it).
  GlobalAvgPool(Shape input_nchw, std::optional<int> threads, bool nhwc = false);
};

}  // namespace ppb
