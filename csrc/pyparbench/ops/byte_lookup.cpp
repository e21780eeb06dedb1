#include "pyparbench/ops/byte_lookup.hpp"

#include "pyparbench/core/cpu_features.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

namespace ppb {

namespace {

// Below this many elements one thread does the lookup (as the int8 nodes'
// other element-wise loops): a team costs more than it saves.
constexpr int64_t kParallelFrom = 16384;
// A thread's run starts on a multiple of this many elements: whole cache
// lines of bytes out, so no two threads write one line.
constexpr int64_t kRunAlign = 64;

// The vpshufb tiers' runs (lookup_kernel.hpp): each run of 16 rows XOR the
// run before it in its half.
void fill_steps(LookupTable& t) {
  for (int r = 0; r < 256; ++r)
    t.steps[r] = (r & 0x70) ? static_cast<uint8_t>(t.bytes[r] ^ t.bytes[r - 16]) : t.bytes[r];
}

// The flags of `isa` this CPU lacks, "a, b".
std::string missing_flags(const std::string& isa) {
  const CpuFeatures& f = cpu_features();
  std::vector<std::pair<const char*, bool>> need = {{"avx2", f.avx2}, {"fma", f.fma}};
  if (isa.rfind("avx512", 0) == 0) {
    need.insert(need.end(), {{"avx512f", f.avx512f}, {"avx512bw", f.avx512bw},
                             {"avx512vl", f.avx512vl}, {"avx512dq", f.avx512dq}});
    if (isa == "avx512vbmi") need.emplace_back("avx512vbmi", f.avx512vbmi);
  }
  std::string out;
  for (const auto& [name, on] : need)
    if (!on) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

}  // namespace

LookupTable byte_lookup_table(const uint8_t* rows, bool int8_input) {
  LookupTable t;
  const int flip = int8_input ? 0x80 : 0;
  for (int r = 0; r < 256; ++r) t.bytes[r] = rows[r ^ flip];
  fill_steps(t);
  return t;
}

LookupTable float_lookup_table(const float* rows, bool int8_input, float scale) {
  LookupTable t;
  t.floats_out = true;
  const int flip = int8_input ? 0x80 : 0;
  for (int r = 0; r < 256; ++r) t.floats[r] = rows[r ^ flip];
  if (!(scale > 0.f) || !std::isfinite(scale)) return t;
  // Each row as d · scale, d an integer that a float holds exactly; the
  // product rounded as the kernels compute it must give the row to the bit.
  int64_t d[256];
  for (int r = 0; r < 256; ++r) {
    const float f = t.floats[r];
    if (!std::isfinite(f)) return t;
    const double q = std::nearbyint(static_cast<double>(f) / static_cast<double>(scale));
    if (!(std::fabs(q) < 16777216.0)) return t;
    d[r] = static_cast<int64_t>(q);
    const float back = static_cast<float>(d[r]) * scale;
    if (std::memcmp(&back, &f, sizeof f) != 0) return t;
  }
  const auto [lo, hi] = std::minmax_element(d, d + 256);
  if (*hi - *lo > 255) return t;  // more than a byte's steps apart
  for (int r = 0; r < 256; ++r) t.bytes[r] = static_cast<uint8_t>(d[r] - *lo);
  fill_steps(t);
  t.scaled = true;
  t.base = static_cast<int32_t>(-*lo);
  t.scale = scale;
  return t;
}

void run_byte_lookup(const LookupTable& t, const uint8_t* x, int64_t n, void* out, int threads) {
  const LookupKernel kernel = lookup_kernels().get();
  const int64_t element = t.floats_out ? 4 : 1;
  if (threads <= 1 || n <= kParallelFrom) {
    kernel(t, x, n, out);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t teams = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t units = (n + kRunAlign - 1) / kRunAlign;
    const int64_t begin = std::min(n, units * id / teams * kRunAlign);
    const int64_t end = std::min(n, units * (id + 1) / teams * kRunAlign);
    if (end > begin) kernel(t, x + begin, end - begin, static_cast<char*>(out) + begin * element);
  }
}

LookupKernels::LookupKernels()
    : tiers_("byte lookup kernel", &lookup_kernel_generic, PPB_X86_BUILD(lookup_kernel_avx2),
             PPB_X86_BUILD(lookup_kernel_avx512)) {}

bool LookupKernels::vbmi() const {
#if PPB_ARCH_X86
  return cpu_features().avx512vbmi && !no_vbmi_.load(std::memory_order_acquire) &&
         tiers_.get() == &lookup_kernel_avx512;
#else
  return false;
#endif
}

LookupKernel LookupKernels::get() const {
#if PPB_ARCH_X86
  if (vbmi()) return &lookup_kernel_avx512vbmi;
#endif
  return tiers_.get();
}

void LookupKernels::set(const std::string& isa) {
  if (!isa.empty() && isa != "auto" && isa != "avx512vbmi" && isa != "avx512" && isa != "avx2" &&
      isa != "generic")
    throw std::invalid_argument("unknown ISA '" + isa +
                                "'; expected avx512vbmi, avx512, avx2, generic or auto");
  const std::string lacks = isa == "generic" || isa == "auto" || isa.empty()
                                ? std::string()
                                : missing_flags(isa);
  if (!lacks.empty())
    throw std::invalid_argument("this CPU does not run the " + isa + " byte lookup kernel (" +
                                (PPB_ARCH_X86 ? "it lacks " + lacks : "not an x86 build") + ")");
  tiers_.set(isa == "avx512vbmi" ? "avx512" : isa);
  no_vbmi_.store(isa == "avx512", std::memory_order_release);
}

const char* LookupKernels::isa() const { return vbmi() ? "avx512vbmi" : tiers_.isa(); }

LookupKernels& lookup_kernels() {
  static LookupKernels k;
  return k;
}

}  // namespace ppb
