// The eigen math library: gemm and conv2d as Eigen tensor contractions on a
// ThreadPoolDevice, as TensorFlow's non-oneDNN CPU path computes them; conv2d
// through im2col, NCHW only. Kernels with the same thread count share one
// device (EigenDevice::shared), as TensorFlow's ops share its intra-op pool:
// a model's many kernels would otherwise each keep a pool of spinning threads.
#pragma once

#include "pyparbench/math/eigen_device.hpp"
#include "pyparbench/math/im2col_conv2d.hpp"
#include "pyparbench/math/matmul_gemm.hpp"

namespace ppb {

class EigenGemm final : public MatmulGemm {
 public:
  EigenGemm(const GemmConfig& cfg, std::optional<int> threads);

 private:
  void matmul(const Matmul& p) override { device_->matmul(p); }
  std::shared_ptr<EigenDevice> device_;
};

class EigenConv2d final : public Im2colConv2d {
 public:
  // Throws std::invalid_argument for NHWC.
  EigenConv2d(const Conv2dConfig& cfg, std::optional<int> threads);

 private:
  void parallel_for(int64_t n, double bytes_per_item,
                    const std::function<void(int64_t, int64_t)>& f) override {
    device_->parallel_for(n, bytes_per_item, f);
  }
  void matmul(const Matmul& p) override { device_->matmul(p); }
  std::shared_ptr<EigenDevice> device_;
};

}  // namespace ppb
