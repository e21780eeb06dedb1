// The eigen math library's engine: an Eigen::ThreadPool and the
// Eigen::ThreadPoolDevice on it, as TensorFlow's CPU kernels compute (its
// intra-op pool), with products as Eigen tensor contractions. Eigen's
// headers stay in eigen_device.cpp, the one file built for this machine's
// ISA (see CMakeLists.txt, PPB_EIGEN_ARCH).
//
// The pool's threads are Eigen's, not an OpenMP team: Kernel::pin and the
// threading audit, which act on the kernel's OpenMP team, do not reach them.
#pragma once

#include "pyparbench/math/matmul.hpp"

#include <cstdint>
#include <functional>
#include <memory>

namespace ppb {

class EigenDevice {
 public:
  // Starts a pool of `threads` threads, owned until destruction. With one
  // thread Eigen computes on the calling thread.
  explicit EigenDevice(int threads);
  ~EigenDevice();
  EigenDevice(const EigenDevice&) = delete;
  EigenDevice& operator=(const EigenDevice&) = delete;

  // The process's device of `threads` threads, made on first use and kept
  // while any kernel holds it (thread-safe).
  static std::shared_ptr<EigenDevice> shared(int threads);

  // One tensor contraction on the device; bias and ReLU are fused into it as
  // an output kernel, as in TensorFlow's fused MatMul / Conv2D.
  void matmul(const Matmul& p) const;
  // Runs f(begin, end) over [0, n) in blocks on the device's threads (the
  // calling thread included), sized by Eigen's cost model from the bytes
  // each item reads (and as many written).
  void parallel_for(int64_t n, double bytes_per_item,
                    const std::function<void(int64_t, int64_t)>& f) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ppb
