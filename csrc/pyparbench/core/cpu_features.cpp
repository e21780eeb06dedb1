#include "pyparbench/core/cpu_features.hpp"

#include <utility>

#if PPB_ARCH_X86
#include <cpuid.h>
#endif
#if PPB_ARCH_AARCH64
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

namespace ppb {

namespace {

#if PPB_ARCH_AARCH64
// The kernel's bit numbers (arch/arm64/include/uapi/asm/hwcap.h), spelled out
// so that older C library headers build too.
constexpr unsigned long kHwcapAsimd = 1ul << 1;
constexpr unsigned long kHwcapAsimdDp = 1ul << 20;
constexpr unsigned long kHwcapSve = 1ul << 22;
constexpr unsigned long kHwcap2Sve2 = 1ul << 1;
constexpr unsigned long kHwcap2I8mm = 1ul << 13;
constexpr unsigned long kHwcap2Bf16 = 1ul << 14;
#ifndef PR_SVE_GET_VL
#define PR_SVE_GET_VL 51
#endif
#ifndef PR_SVE_VL_LEN_MASK
#define PR_SVE_VL_LEN_MASK 0xffff
#endif
#endif

CpuFeatures ask() {
  CpuFeatures f;
#if PPB_ARCH_X86
  f.arch = "x86_64";
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
  // CPUID leaf 7, EDX: AMX-BF16 bit 22, AMX-TILE bit 24, AMX-INT8 bit 25
  // (what the CPU has; a process asks the kernel before using the tiles).
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.amx_bf16 = (d >> 22) & 1u;
    f.amx_tile = (d >> 24) & 1u;
    f.amx_int8 = (d >> 25) & 1u;
    // ECX bit 11: AVX512_VNNI; usable only where the OS saves AVX-512 state.
    f.avx512_vnni = f.avx512f && ((c >> 11) & 1u);
  }
  // Leaf 7 sub-leaf 1, EAX: AVX-VNNI bit 4, AVX512_BF16 bit 5.
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avx_vnni = f.avx2 && ((a >> 4) & 1u);
    f.avx512_bf16 = f.avx512f && ((a >> 5) & 1u);
  }
#elif PPB_ARCH_AARCH64
  f.arch = "aarch64";
  const unsigned long hw = getauxval(AT_HWCAP);
  const unsigned long hw2 = getauxval(AT_HWCAP2);
  f.asimd = hw & kHwcapAsimd;
  f.dotprod = hw & kHwcapAsimdDp;
  f.sve = hw & kHwcapSve;
  f.sve2 = hw2 & kHwcap2Sve2;
  f.i8mm = hw2 & kHwcap2I8mm;
  f.bf16 = hw2 & kHwcap2Bf16;
  if (f.sve) {
    const int vl = prctl(PR_SVE_GET_VL, 0, 0, 0, 0);
    if (vl > 0) f.sve_vector_bits = (vl & PR_SVE_VL_LEN_MASK) * 8;
  }
#elif defined(__powerpc64__)
  f.arch = "ppc64";
#elif defined(__riscv)
  f.arch = "riscv64";
#else
  f.arch = "unknown";
#endif
  return f;
}

}  // namespace

std::vector<std::string> CpuFeatures::flags() const {
  std::vector<std::string> out;
  const std::pair<const char*, bool> all[] = {
      {"avx2", avx2},         {"fma", fma},           {"avx512f", avx512f},
      {"avx512bw", avx512bw}, {"avx512vl", avx512vl}, {"avx512dq", avx512dq},
      {"avx512vbmi", avx512vbmi},
      {"amx_tile", amx_tile}, {"amx_bf16", amx_bf16}, {"amx_int8", amx_int8},
      {"avx512_bf16", avx512_bf16}, {"avx512_vnni", avx512_vnni}, {"avx_vnni", avx_vnni},
      {"asimd", asimd},       {"sve", sve},           {"sve2", sve2},
      {"bf16", bf16},         {"i8mm", i8mm},         {"dotprod", dotprod}};
  for (const auto& [name, on] : all)
    if (on) out.emplace_back(name);
  return out;
}

std::vector<std::string> CpuFeatures::native_precisions() const {
  std::vector<std::string> out{"fp32"};
  if (avx512_bf16 || amx_bf16 || bf16) out.emplace_back("bf16");
  if (avx512_vnni || avx_vnni || amx_int8 || dotprod || i8mm) out.emplace_back("int8");
  return out;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = ask();
  return f;
}

std::vector<std::string> x86_kernel_tiers() {
  std::vector<std::string> out;
#if PPB_ARCH_X86
  const CpuFeatures& f = cpu_features();
  if (f.avx512_tier()) out.push_back("avx512");
  if (f.avx2_tier()) out.push_back("avx2");
#endif
  out.push_back("generic");
  return out;
}

}  // namespace ppb
