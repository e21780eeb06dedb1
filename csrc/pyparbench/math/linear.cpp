#include "pyparbench/math/linear.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/dnnl_compat.hpp"

#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace ppb {

namespace {

using dnnl::memory;

LinearConfig checked(const LinearConfig& cfg) {
  require_at_least("m", cfg.m, 1);
  require_at_least("n", cfg.n, 1);
  require_at_least("k", cfg.k, 1);
  return cfg;
}

constexpr memory::dim kAliasingRowBytes = 1024;
constexpr memory::dim kRowPadFloats = 16;  // one 64-byte cache line

// Whether `md` holds (k, n) fp32 weights plain, rows one after another (padded
// or not): the layout of the gemm:jit matmul, not a blocked one.
bool plain_weights(const memory::desc& md, int64_t k, int64_t n) {
  return md == memory::desc({k, n}, memory::data_type::f32, memory::format_tag::ab) ||
         md == memory::desc({k, n}, memory::data_type::f32, memory::dims{n + kRowPadFloats, 1});
}

}  // namespace

dnnl::matmul::primitive_desc constant_weights_matmul_pd(const memory::desc& src, int64_t k,
                                                        int64_t n, const memory::desc& bias,
                                                        const memory::desc& dst,
                                                        const dnnl::primitive_attr& attr,
                                                        memory::data_type weights_type) {
  auto pd = compat::matmul_pd(cpu_engine(), src,
                              memory::desc({k, n}, weights_type, memory::format_tag::any), bias,
                              dst, attr);
  // Where the primitive keeps plain (k, n) weights (the gemm:jit matmul, on
  // machines without AVX-512), rows a multiple of 1 KiB apart fall into the
  // same L1 sets: 128 x 3072 x 768 runs at half speed (3.7 against 6.9 ms at
  // 2 threads on a Zen 3), 128 x 512 x 512 1.5x slower. A row padded by one
  // cache line breaks the aliasing.
  if (weights_type == memory::data_type::f32 &&
      pd.weights_desc() == memory::desc({k, n}, weights_type, memory::format_tag::ab) &&
      (n * memory::dim(sizeof(float))) % kAliasingRowBytes == 0) {
    const memory::desc padded({k, n}, weights_type, memory::dims{n + kRowPadFloats, 1});
    pd = compat::matmul_pd(cpu_engine(), src, padded, bias, dst, attr);
  }
  return pd;
}

Linear::Linear(const LinearConfig& cfg, std::optional<int> threads)
    : PrimitiveKernel(threads),
      cfg_(checked(cfg)),
      x_shape_{cfg_.m, cfg_.k},
      out_shape_{cfg_.m, cfg_.n},
      weight_shape_{cfg_.n, cfg_.k},
      bias_shape_{cfg_.n} {
  ThreadsScope scope(threads_);
  const auto in_type = data_type_of(cfg_.precision);
  const memory::desc src = plain_md(x_shape_, in_type);
  const memory::desc dst = plain_md(out_shape_);
  // The matmul's weights are (k, n); the user's (n, k) rows are its columns.
  user_weights_md_ = memory::desc({cfg_.k, cfg_.n}, memory::data_type::f32, memory::format_tag::ba);
  user_bf16_weights_md_ =
      memory::desc({cfg_.k, cfg_.n}, memory::data_type::bf16, memory::format_tag::ba);
  const memory::desc bias = cfg_.bias ? plain_md({1, cfg_.n}) : memory::desc();
  const dnnl::primitive_attr attr = post_op_attr(cfg_.activation, false);
  auto pd = compat::bf16_pd(cfg_.precision == Precision::bf16, "Linear", "matmul", [&] {
    return constant_weights_matmul_pd(src, cfg_.k, cfg_.n, bias, dst, attr, in_type);
  });
  if (cfg_.weights_in_place && cfg_.precision == Precision::fp32 &&
      plain_weights(pd.weights_desc(), cfg_.k, cfg_.n)) {
    // Only where the pick was plain: given (n, k) weights, a primitive that
    // wants them blocked would reorder them on every run.
    auto given = compat::matmul_pd(cpu_engine(), src, user_weights_md_, bias, dst, attr);
    if (given.impl_info_str() == pd.impl_info_str()) {
      pd = given;
      in_place_ = true;
    }
  }
  implementation_ = pd.impl_info_str();
  prim_ = dnnl::matmul(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, src);
  add_arg(DNNL_ARG_DST, dst);
  if (in_place_)
    add_arg(DNNL_ARG_WEIGHTS, pd.weights_desc());
  else
    add_owned_arg(DNNL_ARG_WEIGHTS, pd.weights_desc());
  if (cfg_.bias) add_owned_arg(DNNL_ARG_BIAS, bias);
}

bool Linear::emulated() const {
  return cfg_.precision == Precision::bf16 && compat::bf16_emulated(implementation_);
}

void Linear::set_weights(ConstFloatView weight, ConstFloatView bias) {
  if (!in_place_) {
    load(user_weights_md_, weight.shape, weight.data, bias);
    return;
  }
  require_shape("weight", weight.shape, weight_shape_);
  require_bias_presence("Linear", cfg_.bias, bias.present());
  if (bias.present()) require_shape("bias", bias.shape, bias_shape_);
  locked([&] {
    bind_arg(DNNL_ARG_WEIGHTS, weight.data);
    if (bias.present())
      std::memcpy(args_.at(DNNL_ARG_BIAS).get_data_handle(), bias.data,
                  sizeof(float) * static_cast<size_t>(cfg_.n));
    has_weights_ = true;
  });
}

void Linear::set_weights_bf16(ConstBf16View weight, ConstFloatView bias) {
  if (in_place_)
    throw std::invalid_argument(
        "this Linear reads float32 weights where they are (weights_in_place): give it "
        "float32 weights, not bfloat16");
  load(user_bf16_weights_md_, weight.shape, weight.data, bias);
}

void Linear::load(const memory::desc& user, Dims weight_shape, const void* weight,
                  ConstFloatView bias) {
  require_shape("weight", weight_shape, weight_shape_);
  require_bias_presence("Linear", cfg_.bias, bias.present());
  if (bias.present()) require_shape("bias", bias.shape, bias_shape_);
  locked([&] {
    load_weights(user, weight, bias.present() ? bias.data : nullptr, cfg_.n);
    has_weights_ = true;
  });
}

template <class T>
void Linear::bind(View<const T> x, FloatView out) {
  constexpr Precision given = std::is_same_v<T, float> ? Precision::fp32 : Precision::bf16;
  if (cfg_.precision != given)
    throw std::invalid_argument(std::string("Linear was prepared with precision '") +
                                knob_name(cfg_.precision) + "', so x must be " +
                                (cfg_.precision == Precision::bf16
                                     ? "a bfloat16 array (ml_dtypes.bfloat16)"
                                     : "a float32 array") +
                                ", not " + knob_name(given));
  if (!has_weights_)
    throw std::invalid_argument("Linear has no weights yet: call set_weights(weight, bias) first");
  require_shape("x", x.shape, x_shape_);
  require_shape("out", out.shape, out_shape_);
  require_no_partial_overlap("out", out, "x", x, false);
  bind_arg(DNNL_ARG_SRC, x.data);
  bind_arg(DNNL_ARG_DST, out.data);
}

void Linear::run(ConstFloatView x, FloatView out) {
  run_with([&] { bind(x, out); });
}

std::vector<double> Linear::timeit(ConstFloatView x, FloatView out, int repeats, int warmup) {
  return timed_with([&] { bind(x, out); }, repeats, warmup);
}

void Linear::run_bf16(ConstBf16View x, FloatView out) {
  run_with([&] { bind(x, out); });
}

std::vector<double> Linear::timeit_bf16(ConstBf16View x, FloatView out, int repeats,
                                        int warmup) {
  return timed_with([&] { bind(x, out); }, repeats, warmup);
}

}  // namespace ppb
