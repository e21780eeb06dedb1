#include "pyparbench/math/streamed_linear_kernel.hpp"

#include "pyparbench/core/cpu_features.hpp"

#include <atomic>
#include <stdexcept>
#include <string>

namespace ppb {

namespace {

StreamedKernel kernel_of(const std::string& tier) {
#if PPB_ARCH_X86
  if (tier == "avx512") return &streamed_kernel_avx512;
  if (tier == "avx2") return &streamed_kernel_avx2;
#endif
  (void)tier;
  return &streamed_kernel_generic;
}

// The tier set_streamed_isa chose; null: the widest.
std::atomic<StreamedKernel>& chosen() {
  static std::atomic<StreamedKernel> k{nullptr};
  return k;
}

}  // namespace

StreamedKernel select_streamed_kernel() {
  static const StreamedKernel widest = kernel_of(x86_kernel_tiers().front());
  const StreamedKernel k = chosen().load(std::memory_order_acquire);
  return k ? k : widest;
}

void set_streamed_isa(const std::string& isa) {
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
                              " streamed linear kernel (it runs " + runs + ")");
}

const char* streamed_kernel_isa() {
  const StreamedKernel k = select_streamed_kernel();
#if PPB_ARCH_X86
  if (k == &streamed_kernel_avx512) return "avx512";
  if (k == &streamed_kernel_avx2) return "avx2";
#endif
  return k == &streamed_kernel_generic ? "generic" : "?";
}

}  // namespace ppb
