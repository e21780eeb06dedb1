#include "pyparbench/timing/peak_dot_choice.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>

namespace ppb {

namespace {

void check_precision(const std::string& precision) {
  if (precision != "bf16" && precision != "int8")
    throw std::invalid_argument("precision must be 'bf16' or 'int8', got '" + precision + "'");
}

bool has(const std::vector<std::string>& flags, const char* flag) {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

bool avx512_tier(const std::vector<std::string>& flags) {
  for (const char* f : {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx2", "fma"})
    if (!has(flags, f)) return false;
  return true;
}

bool has_amx(const std::string& precision, const std::vector<std::string>& flags) {
  return has(flags, "amx_tile") && has(flags, precision == "bf16" ? "amx_bf16" : "amx_int8");
}

}  // namespace

bool isa_cap_allows(const std::string& isa_cap, const std::string& instruction_set) {
  const int want = instruction_set == "amx"           ? 3
                   : instruction_set == "avx512_bf16" ? 2
                   : instruction_set == "avx512_vnni" ? 1
                                                      : 0;
  if (want == 0)
    throw std::invalid_argument("instruction set must be 'amx', 'avx512_bf16' or 'avx512_vnni', "
                                "got '" + instruction_set + "'");
  std::string cap = isa_cap;
  for (char& c : cap) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (cap.empty() || cap == "ALL" || cap == "DEFAULT" || cap.find("AMX") != std::string::npos)
    return true;
  // The level the cap reaches below AMX: AVX10's and AVX512_CORE_FP16's
  // include BF16 and VNNI, AVX512_CORE_BF16's too, AVX512_CORE_VNNI's VNNI.
  const int level = cap.rfind("AVX10", 0) == 0 || cap == "AVX512_CORE_FP16" ||
                            cap == "AVX512_CORE_BF16"
                        ? 2
                    : cap == "AVX512_CORE_VNNI" ? 1
                                                : 0;
  return level >= want;
}

std::string isa_cap() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return v;
  }
  return "";
}

std::vector<std::string> dot_kernel_choice(const std::string& precision, const std::string& arch,
                                           const std::vector<std::string>& flags,
                                           const std::string& isa_cap) {
  check_precision(precision);
  const bool bf16 = precision == "bf16";
  if (arch == "x86_64") {
    // AMX's tiles do 16x the work of an AVX-512 dot product per instruction:
    // where they run, they are the ceiling.
    if (has_amx(precision, flags) && isa_cap_allows(isa_cap, "amx"))
      return {bf16 ? "tdpbf16ps" : "tdpbusd"};
    const char* vector_set = bf16 ? "avx512_bf16" : "avx512_vnni";
    if (avx512_tier(flags) && has(flags, vector_set) && isa_cap_allows(isa_cap, vector_set))
      return {bf16 ? "vdpbf16ps" : "vpdpbusd"};
    return {};
  }
  if (arch == "aarch64") {
    std::vector<std::string> out;
    if (bf16 && has(flags, "bf16")) out = {"bfmmla", "bfdot"};
    if (!bf16 && has(flags, "i8mm")) out.emplace_back("smmla");
    if (!bf16 && has(flags, "dotprod")) out.emplace_back("sdot");
    return out;
  }
  return {};
}

bool dot_kernel_capped(const std::string& precision, const std::string& arch,
                       const std::vector<std::string>& flags, const std::string& isa_cap) {
  return dot_kernel_choice(precision, arch, flags, isa_cap).empty() &&
         !dot_kernel_choice(precision, arch, flags, "").empty();
}

std::string dot_kernel_missing(const std::string& precision, const std::string& arch,
                               const std::vector<std::string>& flags, const std::string& isa_cap) {
  if (!dot_kernel_choice(precision, arch, flags, isa_cap).empty()) return "";
  const bool bf16 = precision == "bf16";
  if (dot_kernel_capped(precision, arch, flags, isa_cap))
    return std::string("the ISA cap ONEDNN_MAX_CPU_ISA=") + isa_cap + " turns off this CPU's " +
           (bf16 ? "bf16" : "int8") + " dot products (" +
           (bf16 ? "AMX-BF16 and AVX512_BF16 need a cap of AVX512_CORE_BF16 or above"
                 : "AMX-INT8 and AVX512_VNNI need a cap of AVX512_CORE_VNNI or above") +
           ")";
  if (arch == "x86_64")
    return bf16 ? "this CPU has no AVX512_BF16 (flag avx512_bf16 with avx512f/bw/vl/dq: "
                  "vdpbf16ps) nor AMX-BF16 (flags amx_tile, amx_bf16: tdpbf16ps)"
                : "this CPU has no AVX512_VNNI (flag avx512_vnni with avx512f/bw/vl/dq: "
                  "vpdpbusd) nor AMX-INT8 (flags amx_tile, amx_int8: tdpbusd)";
  if (arch == "aarch64")
    return bf16 ? "this CPU has no BF16 (flag bf16, HWCAP2_BF16: bfmmla, bfdot)"
                : "this CPU has neither I8MM (flag i8mm, HWCAP2_I8MM: smmla) nor DotProd "
                  "(flag dotprod, HWCAP_ASIMDDP: sdot)";
  return "no " + precision + " dot-product kernel is built for " + arch;
}

double dot_instruction_ops(const std::string& instruction) {
  // Multiply-adds per instruction, from each one's definition.
  struct Ops {
    const char* name;
    double macs;
  };
  static constexpr Ops kAll[] = {
      {"vdpbf16ps", 16 * 2},       // 16 fp32 lanes, each += 2 bf16 products
      {"vpdpbusd", 16 * 4},        // 16 int32 lanes, each += 4 u8 x s8 products
      {"tdpbf16ps", 16 * 16 * 32}, // C[16x16] fp32 += A[16x32] B[32x16] bf16
      {"tdpbusd", 16 * 16 * 64},   // C[16x16] int32 += A[16x64] u8 B[64x16] s8
      {"bfdot", 4 * 2},            // 4 fp32 lanes, each += 2 bf16 products
      {"bfmmla", 2 * 2 * 4},       // C[2x2] fp32 += A[2x4] B[4x2] bf16
      {"sdot", 4 * 4},             // 4 int32 lanes, each += 4 s8 products
      {"smmla", 2 * 2 * 8},        // C[2x2] int32 += A[2x8] B[8x2] s8
  };
  for (const Ops& o : kAll)
    if (instruction == o.name) return 2 * o.macs;
  throw std::invalid_argument("'" + instruction + "' is not a dot-product instruction of peak's");
}

}  // namespace ppb
