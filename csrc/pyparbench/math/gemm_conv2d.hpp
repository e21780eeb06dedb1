// A channels-last convolution lowered to a product: the batch's patches
// gathered into rows (channels-last im2col, im2col.hpp), then one oneDNN
// matmul with the weights packed once, bias, activation and residual sum as
// its post-ops. oneDNN 2.x's direct convolution for AVX2 (jit:avx2) runs
// small feature maps with many channels at 120-160 GFLOP/s on a Zen 3, where
// its matmul keeps 175-185: ResNet-50's 512-channel 7x7 3x3 1.18x faster,
// Inception-v3's 8x8 1x3 / 3x1 1.3-1.5x. On large feature maps the gathered
// rows cost more than the product gains, so the graph lowers only where
// gemm_conv2d_pays() says so.
#pragma once

#include "pyparbench/math/conv2d_op.hpp"
#include "pyparbench/math/onednn_ops.hpp"

#include <optional>
#include <string>

namespace ppb {

class GemmConv2d : public PrimitiveConv2d {
 public:
  // Throws std::invalid_argument for NCHW activations or groups > 1, and
  // for a gathered matrix beyond kMaxGemmConvBytes.
  GemmConv2d(const Conv2dConfig& cfg, std::optional<int> threads);

  // Copies the weights, permuted from OIHW to the product's (KH·KW·C) x O
  // and packed into the matmul's layout, and the bias.
  void set_weights(ConstFloatView weight, ConstFloatView bias) override;

 private:
  void bind(ConstFloatView x, FloatView out) override;
  void execute() override;

  int64_t rows_ = 0, width_ = 0;  // the gathered matrix: (N·OH·OW) x (KH·KW·C)
  float* patches_ = nullptr;      // the matmul's source buffer
  const float* x_ = nullptr;
};

// The largest gathered matrix a GemmConv2d holds (bytes).
constexpr int64_t kMaxGemmConvBytes = int64_t{64} << 20;

// Whether the graph runs this convolution as a GemmConv2d rather than
// `direct`, oneDNN's convolution primitive prepared for it: a
// channels-last, ungrouped, non-pointwise convolution with an output of at
// most 14x14 pixels, a gathered matrix of at most 16 MiB, and a direct
// kernel of oneDNN's older jit family for AVX2 or below ("jit:avx2",
// "jit:sse41"; brgconv and the AVX-512 kernels keep up with the matmul).
bool gemm_conv2d_pays(const Conv2dOp& direct);

}  // namespace ppb
