#include "pyparbench/math/eigen_ops.hpp"

#include <map>
#include <mutex>

namespace ppb {

// Here rather than in eigen_device.cpp: that file is built for this machine's
// ISA, and the standard-library code below must not be.
std::shared_ptr<EigenDevice> EigenDevice::shared(int threads) {
  static std::mutex mu;
  static std::map<int, std::weak_ptr<EigenDevice>> devices;
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<EigenDevice> d = devices[threads].lock();
  if (!d) {
    d = std::make_shared<EigenDevice>(threads);
    devices[threads] = d;
  }
  return d;
}

EigenGemm::EigenGemm(const GemmConfig& cfg, std::optional<int> threads)
    : MatmulGemm(cfg, "EigenGemm", MathLibrary::eigen, threads),
      device_(EigenDevice::shared(threads_)) {}

EigenConv2d::EigenConv2d(const Conv2dConfig& cfg, std::optional<int> threads)
    : Im2colConv2d(cfg, "EigenConv2d", MathLibrary::eigen, threads),
      device_(EigenDevice::shared(threads_)) {}

}  // namespace ppb
