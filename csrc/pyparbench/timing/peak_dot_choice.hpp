// Which instruction measures each dot-product ceiling of `pyparbench peak`,
// from the CPU's flags (CpuFeatures::flags() names) and the ISA cap, as a
// function of them alone, so that every CPU's choice is testable on any one.
#pragma once

#include <string>
#include <vector>

namespace ppb {

// The instructions whose throughput is the ceiling of `precision` ("bf16",
// "int8") on a CPU of `arch` with `flags`, those to measure; the ceiling is
// the best of them:
//   x86-64, bf16: tdpbf16ps (AMX-BF16 tiles) where the CPU has amx_tile and
//                 amx_bf16 and `isa_cap` allows AMX, else vdpbf16ps
//                 (AVX512_BF16 on the AVX-512 tier) where the cap allows
//                 AVX512_CORE_BF16;
//   x86-64, int8: tdpbusd (amx_tile, amx_int8) likewise, else vpdpbusd
//                 (AVX512_VNNI on the AVX-512 tier) where the cap allows
//                 AVX512_CORE_VNNI;
//   aarch64, bf16: bfmmla and bfdot (bf16);
//   aarch64, int8: smmla (i8mm) and sdot (dotprod).
// `isa_cap` is oneDNN's ONEDNN_MAX_CPU_ISA value ("" none). Empty where the
// CPU has none of them. std::invalid_argument for another precision.
std::vector<std::string> dot_kernel_choice(const std::string& precision, const std::string& arch,
                                           const std::vector<std::string>& flags,
                                           const std::string& isa_cap);

// Whether the cap `isa_cap` alone turns off the CPU's dot products of
// `precision`: dot_kernel_choice() gives none under it and some without it
// (never on aarch64, which no cap limits). The one rule that says the cap,
// not the CPU, is why there are none.
bool dot_kernel_capped(const std::string& precision, const std::string& arch,
                       const std::vector<std::string>& flags, const std::string& isa_cap);

// Why dot_kernel_choice() is empty for these arguments, naming the missing
// flags, or the cap where it turned the CPU's instructions off.
std::string dot_kernel_missing(const std::string& precision, const std::string& arch,
                               const std::vector<std::string>& flags, const std::string& isa_cap);

// Whether oneDNN's ISA cap `isa_cap` lets an x86 instruction set run, as
// oneDNN orders its ISAs: "amx" (no cap, "ALL", "DEFAULT", or a name with
// AMX in it), "avx512_bf16" (those, AVX512_CORE_BF16, AVX512_CORE_FP16,
// AVX10_*), "avx512_vnni" (those and AVX512_CORE_VNNI). Below them
// (AVX512_CORE, AVX2...) oneDNN's kernels run without these instructions,
// so their ceilings are not the ones its kernels meet.
// std::invalid_argument for another instruction set.
bool isa_cap_allows(const std::string& isa_cap, const std::string& instruction_set);

// The ISA cap of this process: ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA
// (oneDNN reads them in this order), else "".
std::string isa_cap();

// The operations one instruction does, a multiply-add counting 2.
// std::invalid_argument for a name dot_kernel_choice() never gives.
double dot_instruction_ops(const std::string& instruction);

}  // namespace ppb
