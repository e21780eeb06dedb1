#include "pyparbench/ops/normalization.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/dnnl_compat.hpp"

#include <sstream>
#include <stdexcept>

namespace ppb {

namespace {

void require_eps(float eps) {
  if (!(eps > 0.f)) {
    std::ostringstream os;
    os << "eps must be > 0, got " << eps;
    throw std::invalid_argument(os.str());
  }
}

void bind_params(const char* const* names, const ConstFloatView* views, int count,
                 Dims expected) {
  for (int i = 0; i < count; ++i) {
    if (!views[i].present()) throw std::invalid_argument(std::string(names[i]) + " is required");
    require_shape(names[i], views[i].shape, expected);
  }
}

}  // namespace

BatchNorm::BatchNorm(Shape shape, float eps, std::optional<int> threads, ActLayout layout)
    : PrimitiveKernel(threads), shape_(std::move(shape)), eps_(eps) {
  if (shape_.size() != 2 && shape_.size() != 4)
    throw std::invalid_argument("batch_norm expects an (N, C) or (N, C, H, W) input, got shape " +
                                shape_str(shape_));
  require_positive_dims("input shape", shape_);
  require_eps(eps);
  param_shape_ = {shape_[1]};
  if (layout != ActLayout::nchw && shape_.size() != 4)
    throw std::invalid_argument(std::string("batch_norm: ") + act_layout_name(layout) +
                                " data needs a 4-D input, got shape " + shape_str(shape_));
  ThreadsScope scope(threads_);
  const auto md = layout == ActLayout::nchw ? plain_md(shape_) : act_md(shape_, layout);
  shape_ = stored_shape(shape_, layout);
  const auto pd = compat::batch_norm_pd(cpu_engine(), md, eps, base_attr());
  prim_ = dnnl::batch_normalization_forward(pd);
  add_scratchpad(pd);
  const auto channels = plain_md(param_shape_);
  add_arg(DNNL_ARG_SRC, md);
  add_arg(DNNL_ARG_DST, md);
  add_arg(DNNL_ARG_MEAN, pd.mean_desc());
  add_arg(DNNL_ARG_VARIANCE, pd.variance_desc());
  add_arg(DNNL_ARG_SCALE, channels);
  add_arg(DNNL_ARG_SHIFT, channels);
}

void BatchNorm::bind(ConstFloatView x, ConstFloatView mean, ConstFloatView var,
                     ConstFloatView scale, ConstFloatView shift, FloatView out) {
  require_shape("x", x.shape, shape_);
  require_shape("out", out.shape, shape_);
  require_no_partial_overlap("out", out, "x", x, true);
  const char* names[] = {"mean", "var", "scale", "shift"};
  const ConstFloatView views[] = {mean, var, scale, shift};
  bind_params(names, views, 4, param_shape_);
  bind_arg(DNNL_ARG_SRC, x.data);
  bind_arg(DNNL_ARG_DST, out.data);
  bind_arg(DNNL_ARG_MEAN, mean.data);
  bind_arg(DNNL_ARG_VARIANCE, var.data);
  bind_arg(DNNL_ARG_SCALE, scale.data);
  bind_arg(DNNL_ARG_SHIFT, shift.data);
}

void BatchNorm::run(ConstFloatView x, ConstFloatView mean, ConstFloatView var,
                    ConstFloatView scale, ConstFloatView shift, FloatView out) {
  run_with([&] { bind(x, mean, var, scale, shift, out); });
}

std::vector<double> BatchNorm::timeit(ConstFloatView x, ConstFloatView mean, ConstFloatView var,
                                      ConstFloatView scale, ConstFloatView shift, FloatView out,
                                      int repeats, int warmup) {
  return timed_with([&] { bind(x, mean, var, scale, shift, out); }, repeats, warmup);
}

LayerNorm::LayerNorm(Shape shape, float eps, std::optional<int> threads)
    : PrimitiveKernel(threads), shape_(std::move(shape)), eps_(eps) {
  if (shape_.size() < 2 || shape_.size() > 5)
    throw std::invalid_argument("layer_norm expects a 2-D to 5-D input, got shape " +
                                shape_str(shape_));
  require_positive_dims("input shape", shape_);
  require_eps(eps);
  param_shape_ = {shape_.back()};
  ThreadsScope scope(threads_);
  const auto md = plain_md(shape_);
  const auto stats = plain_md(Shape(shape_.begin(), shape_.end() - 1));
  const auto pd = compat::layer_norm_pd(cpu_engine(), md, stats, eps, base_attr());
  prim_ = dnnl::layer_normalization_forward(pd);
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, md);
  add_arg(DNNL_ARG_DST, md);
  add_arg(DNNL_ARG_SCALE, plain_md({shape_.back()}));
  add_arg(DNNL_ARG_SHIFT, plain_md({shape_.back()}));
  // Inference computes the statistics on the fly; some implementations
  // still want somewhere to put them.
  if (pd.mean_desc().get_size() > 0) add_owned_arg(DNNL_ARG_MEAN, pd.mean_desc());
  if (pd.variance_desc().get_size() > 0) add_owned_arg(DNNL_ARG_VARIANCE, pd.variance_desc());
}

void LayerNorm::bind(ConstFloatView x, ConstFloatView scale, ConstFloatView shift,
                     FloatView out) {
  require_shape("x", x.shape, shape_);
  require_shape("out", out.shape, shape_);
  require_no_partial_overlap("out", out, "x", x, true);
  const char* names[] = {"scale", "shift"};
  const ConstFloatView views[] = {scale, shift};
  bind_params(names, views, 2, param_shape_);
  bind_arg(DNNL_ARG_SRC, x.data);
  bind_arg(DNNL_ARG_DST, out.data);
  bind_arg(DNNL_ARG_SCALE, scale.data);
  bind_arg(DNNL_ARG_SHIFT, shift.data);
}

void LayerNorm::run(ConstFloatView x, ConstFloatView scale, ConstFloatView shift,
                    FloatView out) {
  run_with([&] { bind(x, scale, shift, out); });
}

std::vector<double> LayerNorm::timeit(ConstFloatView x, ConstFloatView scale,
                                      ConstFloatView shift, FloatView out, int repeats,
                                      int warmup) {
  return timed_with([&] { bind(x, scale, shift, out); }, repeats, warmup);
}

}  // namespace ppb
