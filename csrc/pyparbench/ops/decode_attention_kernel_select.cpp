#include "pyparbench/ops/decode_attention_kernel.hpp"

#include "pyparbench/core/tiered_kernel.hpp"

#include <string>

namespace ppb {

namespace {

TieredKernel<DecodeRowsKernel>& decode_rows_kernels() {
#if PPB_ARCH_X86
  static TieredKernel<DecodeRowsKernel> k("decode attention kernel", &decode_rows_generic,
                                          &decode_rows_avx2, &decode_rows_avx512);
#else
  static TieredKernel<DecodeRowsKernel> k("decode attention kernel", &decode_rows_generic,
                                          nullptr, nullptr);
#endif
  return k;
}

}  // namespace

DecodeRowsKernel select_decode_rows_kernel() { return decode_rows_kernels().get(); }

void set_decode_attention_isa(const std::string& isa) { decode_rows_kernels().set(isa); }

const char* decode_attention_isa() { return decode_rows_kernels().isa(); }

}  // namespace ppb
