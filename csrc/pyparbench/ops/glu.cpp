#include "pyparbench/ops/glu.hpp"

#include "pyparbench/core/checks.hpp"

#include <algorithm>
#include <stdexcept>

namespace ppb {

Glu::Glu(const std::string& kind, Shape shape, std::optional<int> threads)
    : Kernel(threads), shape_(std::move(shape)) {
  if (kind == "swish")
    act_ = DirectEltwise::swish;
  else if (kind == "gelu")
    act_ = DirectEltwise::gelu;
  else if (kind == "gelu_tanh")
    act_ = DirectEltwise::gelu_tanh;
  else
    throw std::invalid_argument("glu kind must be swish, gelu or gelu_tanh, got '" + kind + "'");
  require_positive_dims("input shape", shape_);
}

void Glu::bind(ConstFloatView gate, ConstFloatView up, FloatView out) {
  require_shape("gate", gate.shape, shape_);
  require_shape("up", up.shape, shape_);
  require_shape("out", out.shape, shape_);
  require_no_partial_overlap("out", out, "gate", gate, true);
  require_no_partial_overlap("out", out, "up", up, true);
  gate_ = gate;
  up_ = up;
  y_ = out;
}

void Glu::run(ConstFloatView gate, ConstFloatView up, FloatView out) {
  run_with([&] { bind(gate, up, out); });
}

std::vector<double> Glu::timeit(ConstFloatView gate, ConstFloatView up, FloatView out,
                                int repeats, int warmup) {
  return timed_with([&] { bind(gate, up, out); }, repeats, warmup);
}

void Glu::execute() {
  ThreadsScope scope(threads_);
  const int64_t n = gate_.size();
  const float* g = gate_.data;
  const float* u = up_.data;
  float* y = y_.data;
  // The activation by the direct kernels' vector code (a scalar tanh or exp
  // per element took half of a gated-GELU encoder's time), a block at a time
  // into the thread's buffer (out may be either input), then the product.
  const auto act = direct_kernels().eltwise[static_cast<int>(act_)];
  constexpr int64_t kBlock = 1024;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel
  {
    float buf[kBlock];
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t lo = blk * kBlock, len = std::min(kBlock, n - lo);
      act(g + lo, buf, len);
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) y[lo + i] = buf[i] * u[lo + i];
    }
  }
}

}  // namespace ppb
