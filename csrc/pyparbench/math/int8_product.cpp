#include "pyparbench/math/int8_product.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/dnnl_compat.hpp"
#include "pyparbench/math/int8_weight_reach.hpp"
#include "pyparbench/math/linear.hpp"

#include <stdexcept>

namespace ppb {

using dnnl::memory;

Int8Product::Int8Product(int64_t m, int64_t n, int64_t k, std::optional<int> threads)
    : PrimitiveKernel(threads), m_(m), n_(n), k_(k) {
  require_at_least("m", m, 1);
  require_at_least("n", n, 1);
  require_at_least("k", k, 1);
  ThreadsScope scope(threads_);
  const memory::desc src = plain_md({m, k}, memory::data_type::u8);
  const memory::desc dst = plain_md({m, n}, memory::data_type::s32);
  // The matmul's weights are (k, n); the user's (n, k) rows are its columns.
  user_weights_md_ = memory::desc({k, n}, memory::data_type::s8, memory::format_tag::ba);
  const auto pd = constant_weights_matmul_pd(src, k, n, memory::desc(), dst, base_attr(),
                                             memory::data_type::s8);
  prim_ = dnnl::matmul(pd);
  implementation_ = pd.impl_info_str();
  add_scratchpad(pd);
  add_arg(DNNL_ARG_SRC, src);
  add_arg(DNNL_ARG_DST, dst);
  add_owned_arg(DNNL_ARG_WEIGHTS, pd.weights_desc());
}

bool Int8Product::native() const { return compat::int8_native(implementation_); }

void Int8Product::set_weights(const int8_t* weight) {
  require_int8_weight_reach("Int8Product", implementation_, weight, n_ * k_);
  locked([&] {
    load_weights(user_weights_md_, weight, nullptr, 0);
    has_weights_ = true;
  });
}

void Int8Product::run(const uint8_t* x, int32_t* out) {
  run_with([&] {
    if (!has_weights_)
      throw std::invalid_argument("Int8Product has no weights yet: call set_weights() first");
    bind_arg(DNNL_ARG_SRC, x);
    bind_arg(DNNL_ARG_DST, out);
  });
}

}  // namespace ppb
