#include "pyparbench/ops/glu.hpp"

#include "pyparbench/core/checks.hpp"

#include <cmath>
#include <stdexcept>

namespace ppb {

Glu::Glu(const std::string& kind, Shape shape, std::optional<int> threads)
    : Kernel(threads), shape_(std::move(shape)) {
  if (kind == "swish")
    act_ = Act::swish;
  else if (kind == "gelu")
    act_ = Act::gelu;
  else if (kind == "gelu_tanh")
    act_ = Act::gelu_tanh;
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
  const Act act = act_;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float x = g[i];
    float a;
    if (act == Act::swish) {
      a = x / (1.0f + std::exp(-x));
    } else if (act == Act::gelu) {
      a = 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    } else {
      a = 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    }
    y[i] = a * u[i];
  }
}

}  // namespace ppb
