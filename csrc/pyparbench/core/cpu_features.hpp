// What the running CPU has, asked once: the one place the per-ISA kernels
// (direct glue ops, embedding bag, peak, NHWC pooling) learn which of their
// builds this CPU runs. x86 asks CPUID (through GCC's __builtin_cpu_supports,
// which also checks that the OS saves the wide registers); aarch64 asks the
// kernel (getauxval(AT_HWCAP / AT_HWCAP2), prctl(PR_SVE_GET_VL) for the SVE
// vector length). A flag of another architecture is always false.
//
// The kernel tiers, one definition each, used by every dispatcher:
//   avx512: AVX-512 F, BW, VL and DQ, and the avx2 tier (every AVX-512 CPU
//           has AVX2 and FMA; the AVX-512 kernels are built with FMA);
//   avx2:   AVX2 and FMA;
//   neon:   aarch64's Advanced SIMD (every aarch64 Linux CPU has it; the
//           generic 16-byte kernels compile to it there);
//   generic: any CPU.
#pragma once

#include <string>
#include <vector>

// x86 kernels (the *_avx2.cpp / *_avx512.cpp files) exist only in x86 builds.
#if defined(__x86_64__) || defined(__i386__)
#define PPB_ARCH_X86 1
#else
#define PPB_ARCH_X86 0
#endif
#if defined(__aarch64__)
#define PPB_ARCH_AARCH64 1
#else
#define PPB_ARCH_AARCH64 0
#endif

namespace ppb {

struct CpuFeatures {
  std::string arch;  // "x86_64", "aarch64", else the build's architecture name
  // x86-64
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vbmi = false;  // vpermb / vpermi2b: byte permutes across a whole register
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  // Dot products: bf16 pairs into fp32 (vdpbf16ps), int8 quads into int32
  // (vpdpbusd; AVX-VNNI is its VEX form on 256-bit registers).
  bool avx512_bf16 = false, avx512_vnni = false, avx_vnni = false;
  // aarch64
  bool asimd = false, sve = false, sve2 = false, bf16 = false, i8mm = false;
  bool dotprod = false;  // SDOT / UDOT (FEAT_DotProd)
  int sve_vector_bits = 0;  // the calling thread's SVE vector length; 0 without SVE

  bool avx2_tier() const { return avx2 && fma; }
  bool avx512_tier() const { return avx512f && avx512bw && avx512vl && avx512dq && avx2_tier(); }
  bool neon_tier() const { return asimd; }
  // The names of the flags that are set, in the order of the fields.
  std::vector<std::string> flags() const;
  // The precisions the CPU multiplies natively: "fp32" always; "bf16" with
  // AVX512_BF16, AMX-BF16 or Arm BF16; "int8" with a dot product of int8
  // (AVX512_VNNI, AVX-VNNI, AMX-INT8, SDOT or I8MM).
  std::vector<std::string> native_precisions() const;
};

// The running CPU's features, asked on first use.
const CpuFeatures& cpu_features();

// The x86 kernel tiers this CPU runs, widest first, then "generic":
// what the direct and embedding-bag kernel dispatchers choose from.
std::vector<std::string> x86_kernel_tiers();

}  // namespace ppb
