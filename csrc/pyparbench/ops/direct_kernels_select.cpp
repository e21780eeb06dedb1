#include "pyparbench/ops/direct_kernels.hpp"

#include "pyparbench/core/cpu_features.hpp"

#include <atomic>
#include <stdexcept>

namespace ppb {

namespace {

// The kernels of one tier; null for a tier this build has none of (the x86
// tiers outside x86 builds).
const DirectKernels* kernels_of(const std::string& isa) {
#if PPB_ARCH_X86
  if (isa == "avx512") return &direct_kernels_avx512();
  if (isa == "avx2") return &direct_kernels_avx2();
#endif
  if (isa == "generic") return &direct_kernels_generic();
  return nullptr;
}

const DirectKernels& widest() {
  static const DirectKernels& k = *kernels_of(direct_isas().front());
  return k;
}

std::atomic<const DirectKernels*>& chosen() {
  static std::atomic<const DirectKernels*> k{nullptr};
  return k;
}

}  // namespace

DirectEltwise parse_direct_eltwise(const std::string& kind) {
  if (kind == "relu") return DirectEltwise::relu;
  if (kind == "relu6") return DirectEltwise::relu6;
  if (kind == "sigmoid") return DirectEltwise::sigmoid;
  if (kind == "tanh") return DirectEltwise::tanh;
  if (kind == "gelu") return DirectEltwise::gelu;
  if (kind == "gelu_tanh") return DirectEltwise::gelu_tanh;
  if (kind == "swish") return DirectEltwise::swish;
  if (kind == "hardswish") return DirectEltwise::hardswish;
  throw std::invalid_argument("unknown eltwise kind '" + kind +
                              "'; expected relu, relu6, sigmoid, tanh, gelu, gelu_tanh, swish or hardswish");
}

std::vector<std::string> direct_isas() { return x86_kernel_tiers(); }

const DirectKernels& direct_kernels() {
  const DirectKernels* k = chosen().load(std::memory_order_acquire);
  return k ? *k : widest();
}

void set_direct_isa(const std::string& isa) {
  if (isa.empty() || isa == "auto") {
    chosen().store(nullptr, std::memory_order_release);
    return;
  }
  const bool known = isa == "avx512" || isa == "avx2" || isa == "generic";
  if (!known)
    throw std::invalid_argument("unknown ISA '" + isa + "'; expected avx512, avx2, generic or auto");
  for (const auto& name : direct_isas())
    if (name == isa) {
      chosen().store(kernels_of(isa), std::memory_order_release);
      return;
    }
  throw std::invalid_argument("this CPU does not run the " + isa + " direct kernels (it runs " +
                              [] {
                                std::string s;
                                for (const auto& n : direct_isas()) s += (s.empty() ? "" : ", ") + n;
                                return s;
                              }() +
                              ")");
}

}  // namespace ppb
