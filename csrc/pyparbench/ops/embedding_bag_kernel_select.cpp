#include "pyparbench/ops/embedding_bag_kernel.hpp"

#include "pyparbench/core/cpu_features.hpp"

#include <atomic>
#include <stdexcept>
#include <string>

namespace ppb {

namespace {

BagKernel kernel_of(const std::string& tier) {
#if PPB_ARCH_X86
  if (tier == "avx512") return &bag_kernel_avx512;
  if (tier == "avx2") return &bag_kernel_avx2;
#endif
  (void)tier;
  return &bag_kernel_generic;
}

// The tier set_bag_isa chose; null: the widest.
std::atomic<BagKernel>& chosen() {
  static std::atomic<BagKernel> k{nullptr};
  return k;
}

}  // namespace

BagKernel select_bag_kernel() {
  static const BagKernel widest = kernel_of(x86_kernel_tiers().front());
  const BagKernel k = chosen().load(std::memory_order_acquire);
  return k ? k : widest;
}

void set_bag_isa(const std::string& isa) {
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
                              " embedding-bag kernel (it runs " + runs + ")");
}

const char* bag_kernel_isa() {
  const BagKernel k = select_bag_kernel();
#if PPB_ARCH_X86
  if (k == &bag_kernel_avx512) return "avx512";
  if (k == &bag_kernel_avx2) return "avx2";
#endif
  return k == &bag_kernel_generic ? "generic" : "?";
}

}  // namespace ppb
