#include "pyparbench/math/matmul_gemm.hpp"

#include <algorithm>

namespace ppb {

MatmulGemm::MatmulGemm(const GemmConfig& cfg, const char* name, MathLibrary library,
                       std::optional<int> threads)
    : KernelOp(cfg, name, threads), library_(library) {
  require_relu_only("gemm", library, config().activation);
  require_fp32(name, config().precision);
}

void MatmulGemm::bind(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out) {
  check_run(a, b, bias, out);
  a_ = a.data;
  b_ = b.data;
  bias_ = bias.data;
  out_ = out.data;
}

void MatmulGemm::run(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out) {
  run_with([&] { bind(a, b, bias, out); });
}

std::vector<double> MatmulGemm::timeit(ConstFloatView a, ConstFloatView b, ConstFloatView bias,
                                       FloatView out, int repeats, int warmup) {
  return timed_with([&] { bind(a, b, bias, out); }, repeats, warmup);
}

void MatmulGemm::execute() {
  const GemmConfig& cfg = config();
  Matmul p;
  p.m = cfg.m;
  p.n = cfg.n;
  p.k = cfg.k;
  p.trans_a = cfg.trans_a;
  p.trans_b = cfg.trans_b;
  p.bias = bias_;
  p.relu = cfg.relu;
  for (int64_t i = 0; i < std::max<int64_t>(cfg.batch, 1); ++i) {
    p.a = a_ + i * cfg.m * cfg.k;
    p.b = b_ + i * cfg.k * cfg.n;
    p.c = out_ + i * cfg.m * cfg.n;
    matmul(p);
  }
}

}  // namespace ppb
