// 2-D pooling over 4-D activations in any layout (oneDNN pooling; pool_nhwc.hpp
// for channels-last max pooling).
#pragma once

#include "pyparbench/ops/activation_layout.hpp"
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
  // "onednn", "direct" (our channels-last loop, pool_nhwc.hpp; channels-last
  // or blocked data only) or "auto": direct on those except an average counting the
  // padding, oneDNN otherwise.
  std::string impl = "auto";
};

class Pool2d : public UnaryKernel {
 public:
  // layout: how input and output are stored (run() checks their
  // stored_shape: (N, H, W, C) for nhwc, ...).
  Pool2d(const Pool2dConfig& cfg, Shape input_nchw, std::optional<int> threads,
         ActLayout layout = ActLayout::nchw);
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
  ActLayout layout_ = ActLayout::nchw;
  bool direct_ = false;
  Shape in_nchw_;
};

// Mean over H and W: (N, C, H, W) -> (N, C).
class GlobalAvgPool : public UnaryKernel {
 public:
  // layout: how the input is stored (run() checks its stored_shape); the
  // output (N, C) is the same memory in every layout.
  GlobalAvgPool(Shape input_nchw, std::optional<int> threads,
                ActLayout layout = ActLayout::nchw);
};

}  // namespace ppb
