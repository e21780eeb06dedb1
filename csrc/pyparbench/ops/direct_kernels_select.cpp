#include "pyparbench/ops/direct_kernels.hpp"

#include <atomic>
#include <stdexcept>

namespace ppb {

namespace {

bool runs_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("fma");
}

bool runs_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

const DirectKernels& widest() {
  static const DirectKernels& k = runs_avx512() ? direct_kernels_avx512()
                                  : runs_avx2() ? direct_kernels_avx2()
                                                : direct_kernels_generic();
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
  throw std::invalid_argument("unknown eltwise kind '" + kind +
                              "'; expected relu, relu6, sigmoid, tanh, gelu or gelu_tanh");
}

std::vector<std::string> direct_isas() {
  std::vector<std::string> out;
  if (runs_avx512()) out.push_back("avx512");
  if (runs_avx2()) out.push_back("avx2");
  out.push_back("generic");
  return out;
}

const DirectKernels& direct_kernels() {
  const DirectKernels* k = chosen().load(std::memory_order_acquire);
  return k ? *k : widest();
}

void set_direct_isa(const std::string& isa) {
  if (isa.empty() || isa == "auto") {
    chosen().store(nullptr, std::memory_order_release);
    return;
  }
  const DirectKernels* k = isa == "avx512"  ? &direct_kernels_avx512()
                           : isa == "avx2"  ? &direct_kernels_avx2()
                           : isa == "generic" ? &direct_kernels_generic()
                                              : nullptr;
  if (!k)
    throw std::invalid_argument("unknown ISA '" + isa + "'; expected avx512, avx2, generic or auto");
  for (const auto& name : direct_isas())
    if (name == isa) {
      chosen().store(k, std::memory_order_release);
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
