#include "pyparbench/ops/decode_attention_kernel.hpp"

#include "pyparbench/core/cpu_features.hpp"

#include <atomic>
#include <stdexcept>
#include <string>

namespace ppb {

namespace {

DecodeRowsKernel kernel_of(const std::string& tier) {
#if PPB_ARCH_X86
  if (tier == "avx512") return &decode_rows_avx512;
  if (tier == "avx2") return &decode_rows_avx2;
#endif
  (void)tier;
  return &decode_rows_generic;
}

// The tier set_decode_attention_isa chose; null: the widest.
std::atomic<DecodeRowsKernel>& chosen() {
  static std::atomic<DecodeRowsKernel> k{nullptr};
  return k;
}

}  // namespace

DecodeRowsKernel select_decode_rows_kernel() {
  static const DecodeRowsKernel widest = kernel_of(x86_kernel_tiers().front());
  const DecodeRowsKernel k = chosen().load(std::memory_order_acquire);
  return k ? k : widest;
}

void set_decode_attention_isa(const std::string& isa) {
  if (isa.empty() || isa == "auto") {
    chosen().store(nullptr, std::memory_order_release);
    return;
  }
  if (isa != "avx512" && isa != "avx2" && isa != "generic")
    throw std::invalid_argument("unknown ISA '" + isa +
                                "'; expected avx512, avx2, generic or auto");
  std::string runs;
  for (const auto& tier : x86_kernel_tiers()) {
    if (tier == isa) {
      chosen().store(kernel_of(isa), std::memory_order_release);
      return;
    }
    runs += (runs.empty() ? "" : ", ") + tier;
  }
  throw std::invalid_argument("this CPU does not run the " + isa +
                              " decode attention kernel (it runs " + runs + ")");
}

const char* decode_attention_isa() {
  const DecodeRowsKernel k = select_decode_rows_kernel();
#if PPB_ARCH_X86
  if (k == &decode_rows_avx512) return "avx512";
  if (k == &decode_rows_avx2) return "avx2";
#endif
  return k == &decode_rows_generic ? "generic" : "?";
}

}  // namespace ppb
