#include "pyparbench/math/gemm_op.hpp"

#include "pyparbench/core/checks.hpp"

#include <stdexcept>
#include <string>

namespace ppb {

namespace {

Shape with_batch(int64_t batch, Shape s) {
  if (batch > 0) s.insert(s.begin(), batch);
  return s;
}

}  // namespace

std::string fused_activation(bool relu, const std::string& activation) {
  if (relu && !activation.empty() && activation != "relu")
    throw std::invalid_argument("relu=True and activation '" + activation +
                                "' both ask for a fused activation; give one");
  return relu ? std::string("relu") : activation;
}

void require_relu_only(const char* op, MathLibrary library, const std::string& activation) {
  if (!activation.empty() && activation != "relu")
    throw std::invalid_argument(std::string(op) + ": the " + knob_name(library) +
                                " library fuses only relu, got activation '" + activation +
                                "'; use the onednn library");
}

void require_fp32(const char* op, Precision precision) {
  if (precision != Precision::fp32)
    throw std::invalid_argument(std::string(op) + " computes fp32 only, got precision '" +
                                knob_name(precision) + "'; bf16 runs on the onednn library");
}

// A kernel without a bf16 path: a kernel prepared for fp32 says so (the
// arrays must be float32), and a bf16 one cannot exist (its constructor
// refused), so either way the call is refused.
void GemmOp::run_bf16(ConstBf16View, ConstBf16View, ConstFloatView, FloatView) {
  require_precision(Precision::bf16);
  require_fp32(name_, Precision::bf16);
}

std::vector<double> GemmOp::timeit_bf16(ConstBf16View, ConstBf16View, ConstFloatView, FloatView,
                                        int, int) {
  require_precision(Precision::bf16);
  require_fp32(name_, Precision::bf16);
  return {};
}

void GemmOp::require_precision(Precision p) const {
  if (cfg_.precision != p)
    throw std::invalid_argument(std::string(name_) + " was prepared with precision '" +
                                knob_name(cfg_.precision) + "', so a and b must be " +
                                (cfg_.precision == Precision::bf16
                                     ? "bfloat16 arrays (ml_dtypes.bfloat16)"
                                     : "float32 arrays") +
                                ", not " + (p == Precision::bf16 ? "bfloat16" : "float32"));
}

GemmOp::GemmOp(const GemmConfig& cfg, const char* name) : cfg_(cfg), name_(name) {
  cfg_.activation = fused_activation(cfg.relu, cfg.activation);
  cfg_.relu = cfg_.activation == "relu";
  require_at_least("batch", cfg.batch, 0);
  require_at_least("m", cfg.m, 1);
  require_at_least("n", cfg.n, 1);
  require_at_least("k", cfg.k, 1);
  a_shape_ = with_batch(cfg.batch, cfg.trans_a ? Shape{cfg.k, cfg.m} : Shape{cfg.m, cfg.k});
  b_shape_ = with_batch(cfg.batch, cfg.trans_b ? Shape{cfg.n, cfg.k} : Shape{cfg.k, cfg.n});
  bias_shape_ = {cfg.n};
  out_shape_ = with_batch(cfg.batch, {cfg.m, cfg.n});
  require_positive_dims("a", a_shape_);
  require_positive_dims("b", b_shape_);
  require_positive_dims("out", out_shape_);
}

double GemmOp::flops() const {
  return 2.0 * static_cast<double>(cfg_.batch > 0 ? cfg_.batch : 1) * cfg_.m * cfg_.n * cfg_.k;
}

void GemmOp::check_run(ConstFloatView a, ConstFloatView b, ConstFloatView bias,
                       FloatView out) const {
  require_precision(Precision::fp32);
  check_views(a, b, bias, out);
}

void GemmOp::check_run(ConstBf16View a, ConstBf16View b, ConstFloatView bias,
                       FloatView out) const {
  require_precision(Precision::bf16);
  check_views(a, b, bias, out);
}

template <class T>
void GemmOp::check_views(View<const T> a, View<const T> b, ConstFloatView bias,
                         FloatView out) const {
  require_shape("a", a.shape, a_shape_);
  require_shape("b", b.shape, b_shape_);
  require_shape("out", out.shape, out_shape_);
  require_bias_presence(name_, cfg_.bias, bias.present());
  if (bias.present()) require_shape("bias", bias.shape, bias_shape_);
  require_no_partial_overlap("out", out, "a", a, false);
  require_no_partial_overlap("out", out, "b", b, false);
  require_no_partial_overlap("out", out, "bias", bias, false);
}

}  // namespace ppb
