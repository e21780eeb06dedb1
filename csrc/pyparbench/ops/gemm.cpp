#include "pyparbench/ops/gemm.hpp"

#include "pyparbench/dnnl_compat.hpp"

namespace ppb {

namespace {

using dnnl::memory;

// A (rows x cols) operand stored either row-major or transposed.
memory::desc operand_md(int64_t batch, int64_t rows, int64_t cols, bool transposed) {
  memory::dims strides = transposed ? memory::dims{rows * cols, 1, rows}
                                    : memory::dims{rows * cols, cols, 1};
  memory::dims dims{batch, rows, cols};
  if (batch == 0) {
    dims.erase(dims.begin());
    strides.erase(strides.begin());
  }
  return memory::desc(dims, memory::data_type::f32, strides);
}

}  // namespace

Gemm::Gemm(const GemmConfig& cfg, std::optional<int> threads)
    : KernelOp(cfg, "Gemm", threads) {
  ThreadsScope scope(threads_);

  const auto src = operand_md(cfg.batch, cfg.m, cfg.k, cfg.trans_a);
  const auto wei = operand_md(cfg.batch, cfg.k, cfg.n, cfg.trans_b);
  const auto dst = operand_md(cfg.batch, cfg.m, cfg.n, false);
  const auto bias = cfg.bias ? plain_md(cfg.batch > 0 ? Shape{1, 1, cfg.n} : Shape{1, cfg.n})
                             : memory::desc();
  dnnl::primitive_attr attr = base_attr();
  if (cfg.relu) {
    dnnl::post_ops ops;
    compat::append_eltwise(ops, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  const auto pd = compat::matmul_pd(cpu_engine(), src, wei, bias, dst, attr);
  prim_ = dnnl::matmul(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, src);
  add_arg(DNNL_ARG_WEIGHTS, wei);
  add_arg(DNNL_ARG_DST, dst);
  if (cfg.bias) add_arg(DNNL_ARG_BIAS, bias);
}

void Gemm::bind(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out) {
  check_run(a, b, bias, out);
  bind_arg(DNNL_ARG_SRC, a.data);
  bind_arg(DNNL_ARG_WEIGHTS, b.data);
  bind_arg(DNNL_ARG_DST, out.data);
  if (bias.present()) bind_arg(DNNL_ARG_BIAS, bias.data);
}

void Gemm::run(ConstFloatView a, ConstFloatView b, ConstFloatView bias, FloatView out) {
  run_with([&] { bind(a, b, bias, out); });
}

std::vector<double> Gemm::timeit(ConstFloatView a, ConstFloatView b, ConstFloatView bias,
                                 FloatView out, int repeats, int warmup) {
  return timed_with([&] { bind(a, b, bias, out); }, repeats, warmup);
}

}  // namespace ppb
