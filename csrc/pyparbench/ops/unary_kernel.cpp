#include "pyparbench/ops/unary_kernel.hpp"

#include "pyparbench/core/checks.hpp"

namespace ppb {

UnaryKernel::UnaryKernel(std::optional<int> threads, Shape in, bool in_place_ok)
    : PrimitiveKernel(threads), in_shape_(std::move(in)), out_shape_(in_shape_),
      in_place_ok_(in_place_ok) {
  if (in_shape_.empty()) throw std::invalid_argument("input shape must have at least 1 dimension");
  require_positive_dims("input shape", in_shape_);
}

void UnaryKernel::bind_io(ConstFloatView x, FloatView out) {
  require_shape("x", x.shape, in_shape_);
  require_shape("out", out.shape, out_shape_);
  require_no_partial_overlap("out", out, "x", x, in_place_ok_);
  bind_arg(DNNL_ARG_SRC, x.data);
  bind_arg(DNNL_ARG_DST, out.data);
}

void UnaryKernel::run(ConstFloatView x, FloatView out) {
  run_with([&] { bind_io(x, out); });
}

std::vector<double> UnaryKernel::timeit(ConstFloatView x, FloatView out, int repeats,
                                        int warmup) {
  return timed_with([&] { bind_io(x, out); }, repeats, warmup);
}

}  // namespace ppb
