#pragma once
// One per-ISA kernel family's choice among its builds: the widest tier this
// CPU runs (x86_kernel_tiers()), or the one set() forced, as the tests and
// benchmarks force each tier on one machine. Each family (the embedding
// bag, the streamed linear, the decode attention, the byte lookup) declares
// one in its header, built from its builds' entry points:
//
//   TieredKernel<BagKernel> k("embedding-bag kernel", &bag_kernel_generic,
//                             PPB_X86_BUILD(bag_kernel_avx2),
//                             PPB_X86_BUILD(bag_kernel_avx512));
#include "pyparbench/core/cpu_features.hpp"

#include <atomic>
#include <stdexcept>
#include <string>

// A family's x86 build: its address where the platform compiles the x86
// per-ISA files (CMakeLists.txt), else null, as those files, and so the
// symbol, exist only there; the generic build then runs alone.
#if PPB_ARCH_X86
#define PPB_X86_BUILD(kernel) (&(kernel))
#else
#define PPB_X86_BUILD(kernel) nullptr
#endif

namespace ppb {

template <class Kernel>
class TieredKernel {
 public:
  // `what` names the family in errors ("embedding-bag kernel"); the x86
  // builds are null where the platform has none.
  TieredKernel(const char* what, Kernel generic, Kernel avx2, Kernel avx512)
      : what_(what), generic_(generic), avx2_(avx2), avx512_(avx512),
        widest_(of(x86_kernel_tiers().front())) {}

  Kernel get() const {
    const Kernel k = chosen_.load(std::memory_order_acquire);
    return k ? k : widest_;
  }

  // "avx512", "avx2" or "generic" (one this CPU runs); "" or "auto": the widest.
  void set(const std::string& isa) {
    if (isa.empty() || isa == "auto") {
      chosen_.store(nullptr, std::memory_order_release);
      return;
    }
    if (isa != "avx512" && isa != "avx2" && isa != "generic")
      throw std::invalid_argument("unknown ISA '" + isa +
                                  "'; expected avx512, avx2, generic or auto");
    std::string runs;
    for (const auto& tier : x86_kernel_tiers()) {
      if (tier == isa) {
        chosen_.store(of(isa), std::memory_order_release);
        return;
      }
      runs += (runs.empty() ? "" : ", ") + tier;
    }
    throw std::invalid_argument("this CPU does not run the " + isa + " " + what_ +
                                " (it runs " + runs + ")");
  }

  // The tier get() gives.
  const char* isa() const {
    const Kernel k = get();
    if (k != nullptr && k == avx512_) return "avx512";
    if (k != nullptr && k == avx2_) return "avx2";
    return k == generic_ ? "generic" : "?";
  }

 private:
  Kernel of(const std::string& tier) const {
    if (tier == "avx512" && avx512_) return avx512_;
    if (tier == "avx2" && avx2_) return avx2_;
    return generic_;
  }

  std::string what_;
  Kernel generic_, avx2_, avx512_, widest_;
  std::atomic<Kernel> chosen_{nullptr};
};

}  // namespace ppb
