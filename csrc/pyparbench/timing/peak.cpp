#include "pyparbench/timing/peak.hpp"

#include "pyparbench/core/aligned_array.hpp"
#include "pyparbench/core/checks.hpp"
#include "pyparbench/core/cpu_features.hpp"
#include "pyparbench/core/limits.hpp"
#include "pyparbench/timing/peak_dot_choice.hpp"
#include "pyparbench/timing/peak_dot_kernels.hpp"
#include "pyparbench/timing/peak_kernels.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace ppb {

namespace {

using Clock = std::chrono::steady_clock;

PeakKernels kernels_for(const std::string& isa) {
  const std::vector<std::string> have = peak_isas();
  const std::string name = isa.empty() ? have.front() : isa;
  const bool runs = std::find(have.begin(), have.end(), name) != have.end();
#if PPB_ARCH_X86
  if (runs && name == "avx512") return peak_kernels_avx512();
  if (runs && name == "avx2") return peak_kernels_avx2();
#endif
#if PPB_ARCH_AARCH64
  if (runs && name == "neon") return peak_kernels_neon();
#endif
  if (name == "generic") return peak_kernels_generic();
  std::string valid;
  for (const auto& h : have) valid += (valid.empty() ? "" : ", ") + h;
  throw std::invalid_argument("isa '" + name + "' is not one this CPU runs; it runs: " + valid);
}

void check_team_args(int threads, int repeats, int warmup, const std::vector<int>& cpus) {
  require_thread_count("threads", threads);
  require_at_least("repeats", repeats, 1);
  require_at_least("warmup", warmup, 0);
  if (!cpus.empty() && static_cast<int>(cpus.size()) < threads)
    throw std::invalid_argument("cpus lists " + std::to_string(cpus.size()) +
                                " CPUs for " + std::to_string(threads) +
                                " threads; give one CPU per thread or none");
}

// Pins the calling thread to `cpu` (< 0: leaves it) and gives it its own
// mask back when it goes out of scope.
class PinScope {
 public:
  explicit PinScope(int cpu) {
    if (cpu < 0) return;
    if (sched_getaffinity(0, sizeof(saved_), &saved_) != 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned_ = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinScope() {
    if (pinned_) sched_setaffinity(0, sizeof(saved_), &saved_);
  }
  PinScope(const PinScope&) = delete;
  PinScope& operator=(const PinScope&) = delete;

 private:
  cpu_set_t saved_{};
  bool pinned_ = false;
};

// The measurement frame shared by every ceiling: one parallel region of
// `threads` threads (each pinned when asked), `setup(t)` once per thread,
// then warm-up and timed runs of `body(t)`, each run between two barriers
// and timed by thread 0. Exceptions are carried out of the region.
template <class Setup, class Body>
std::vector<double> team_loop(int threads, int repeats, int warmup, const std::vector<int>& cpus,
                              Setup&& setup, Body&& body) {
  std::vector<double> ns(static_cast<size_t>(repeats));
  std::atomic<int> team{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    if (t == 0) team = omp_get_num_threads();
    PinScope pin(cpus.empty() ? -1 : cpus[static_cast<size_t>(t)]);
    try {
      setup(t);
    } catch (...) {
#pragma omp critical(ppb_peak_error)
      if (!error) error = std::current_exception();
      failed = true;
    }
#pragma omp barrier
    if (!failed) {
      for (int r = -warmup; r < repeats; ++r) {
        Clock::time_point t0;
#pragma omp barrier
        if (t == 0) t0 = Clock::now();
        body(t);
#pragma omp barrier
        if (t == 0 && r >= 0)
          ns[static_cast<size_t>(r)] =
              std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
      }
    }
  }
  if (error) std::rethrow_exception(error);
  if (team != threads)
    throw std::runtime_error("asked for a team of " + std::to_string(threads) +
                             " OpenMP threads, got " + std::to_string(team.load()) +
                             " (OMP_THREAD_LIMIT or OMP_DYNAMIC?)");
  return ns;
}

// [begin, end) of thread t's share of n items.
inline void share(int64_t n, int threads, int t, int64_t& begin, int64_t& end) {
  begin = n * t / threads;
  end = n * (t + 1) / threads;
}

// splitmix64: cheap, well-mixed random row numbers.
inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<std::string> peak_isas() {
#if PPB_ARCH_AARCH64
  std::vector<std::string> out;
  if (cpu_features().neon_tier()) out.push_back("neon");
  out.push_back("generic");
  return out;
#else
  return x86_kernel_tiers();
#endif
}

FmaKernelInfo fma_kernel_info(const std::string& isa) {
  const PeakKernels k = kernels_for(isa);
  return FmaKernelInfo{k.isa, k.lanes, k.fused, k.chains};
}

PeakTiming time_fma(int threads, int64_t iterations, int repeats, int warmup,
                    const std::string& isa, const std::vector<int>& cpus) {
  check_team_args(threads, repeats, warmup, cpus);
  require_at_least("iterations", iterations, 1);
  const PeakKernels k = kernels_for(isa);
  std::vector<float> sink(static_cast<size_t>(threads));
  PeakTiming out;
  out.ns = team_loop(
      threads, repeats, warmup, cpus, [](int) {},
      [&](int t) { sink[static_cast<size_t>(t)] = k.fma(iterations); });
  // Every result is kept, so no chain can be dropped as dead code.
  volatile float keep = 0;
  for (float s : sink) keep = keep + s;
  out.work = 2.0 * k.lanes * k.chains * static_cast<double>(iterations) * threads;
  return out;
}

std::vector<std::string> dot_instructions(const std::string& precision) {
  const CpuFeatures& f = cpu_features();
  std::vector<std::string> flags = f.flags();
  std::vector<std::string> out = dot_kernel_choice(precision, f.arch, flags, isa_cap());
#if PPB_ARCH_X86
  if (!out.empty() && out.front().rfind("tdp", 0) == 0 && !amx_permission_denied().empty()) {
    // Linux refused the tiles: the CPU as if it had no AMX.
    flags.erase(std::remove_if(flags.begin(), flags.end(),
                               [](const std::string& x) { return x.rfind("amx_", 0) == 0; }),
                flags.end());
    out = dot_kernel_choice(precision, f.arch, flags, isa_cap());
  }
#endif
  return out;
}

std::string dot_unavailable(const std::string& precision) {
  if (!dot_instructions(precision).empty()) return "";
  const CpuFeatures& f = cpu_features();
  std::string why = dot_kernel_missing(precision, f.arch, f.flags(), isa_cap());
#if PPB_ARCH_X86
  if (why.empty()) why = amx_permission_denied();  // AMX's alone, refused
#endif
  return why;
}

namespace {

// The loop of a dot-product instruction this build has a kernel for.
using DotLoop = double (*)(int64_t);

DotLoop dot_loop(const std::string& instruction) {
  const std::pair<const char*, DotLoop> built[] = {
#if PPB_ARCH_X86
      {"vdpbf16ps", &bf16_dot_avx512}, {"vpdpbusd", &int8_dot_avx512},
      {"tdpbf16ps", &bf16_dot_amx},    {"tdpbusd", &int8_dot_amx},
#endif
#if PPB_ARCH_AARCH64
      {"bfmmla", &bf16_mmla_neon},     {"bfdot", &bf16_dot_neon},
      {"smmla", &int8_mmla_neon},      {"sdot", &int8_dot_neon},
#endif
      {"", nullptr}};
  for (const auto& [name, loop] : built)
    if (instruction == name && loop != nullptr) return loop;
  return nullptr;
}

// The instructions per round of one thread: kDotChains vector registers, or
// kAmxAccumulators tiles.
double dot_round_instructions(const std::string& instruction) {
  return instruction.rfind("tdp", 0) == 0 ? kAmxAccumulators : kDotChains;
}

// The loop of `instruction` where this CPU runs it for some precision,
// else std::invalid_argument naming the ones it runs.
DotLoop runnable_dot_loop(const std::string& instruction) {
  std::string runs;
  for (const char* precision : {"bf16", "int8"})
    for (const auto& name : dot_instructions(precision)) {
      if (name == instruction) return dot_loop(instruction);
      runs += (runs.empty() ? "" : ", ") + name;
    }
  throw std::invalid_argument("dot-product instruction '" + instruction +
                              "' does not run on this CPU and build; it runs: " +
                              (runs.empty() ? std::string("none") : runs));
}

}  // namespace

PeakTiming time_dot(const std::string& precision, int threads, int64_t iterations, int repeats,
                    int warmup, const std::vector<int>& cpus, const std::string& instruction) {
  check_team_args(threads, repeats, warmup, cpus);
  require_at_least("iterations", iterations, 1);
  const std::vector<std::string> have = dot_instructions(precision);
  if (have.empty())
    throw std::invalid_argument(precision + " dot products: " + dot_unavailable(precision));
  const std::string name = instruction.empty() ? have.front() : instruction;
  if (std::find(have.begin(), have.end(), name) == have.end()) {
    std::string valid;
    for (const auto& h : have) valid += (valid.empty() ? "" : ", ") + h;
    throw std::invalid_argument(precision + " dot products: instruction '" + name +
                                "' is not one measured here; these are: " + valid);
  }
  const DotLoop loop = dot_loop(name);
  PeakTiming out;
  std::vector<double> sink(static_cast<size_t>(threads));
  out.ns = team_loop(
      threads, repeats, warmup, cpus, [](int) {},
      [&](int t) { sink[static_cast<size_t>(t)] = loop(iterations); });
  // Every result is kept, so no chain can be dropped as dead code.
  volatile double keep = 0;
  for (double s : sink) keep = keep + s;
  out.work = dot_instruction_ops(name) * dot_round_instructions(name) *
             static_cast<double>(iterations) * threads;
  return out;
}

double dot_result(const std::string& instruction, int64_t iterations) {
  require_at_least("iterations", iterations, 1);
  return runnable_dot_loop(instruction)(iterations);
}

PeakTiming time_triad(int threads, int64_t elements, int repeats, int warmup,
                      const std::vector<int>& cpus) {
  check_team_args(threads, repeats, warmup, cpus);
  require_at_least("elements", elements, threads);
  const PeakKernels k = kernels_for("");
  auto a = aligned_array<float>(elements);
  auto b = aligned_array<float>(elements);
  auto c = aligned_array<float>(elements);
  PeakTiming out;
  out.ns = team_loop(
      threads, repeats, warmup, cpus,
      [&](int t) {
        // First touch by the thread that will stream the share (its NUMA node).
        int64_t lo, hi;
        share(elements, threads, t, lo, hi);
        for (int64_t i = lo; i < hi; ++i) {
          a[i] = 0.f;
          b[i] = 1.f;
          c[i] = 2.f;
        }
      },
      [&](int t) {
        int64_t lo, hi;
        share(elements, threads, t, lo, hi);
        k.triad(a.get(), b.get(), c.get(), 3.f, lo, hi);
      });
  if (a[elements - 1] != 7.f) throw std::runtime_error("triad computed a wrong value");
  out.work = 3.0 * 4.0 * static_cast<double>(elements);
  return out;
}

PeakTiming time_gather(int threads, int64_t rows, int64_t dim, int64_t bags, int64_t bag,
                       int repeats, int warmup, const std::vector<int>& cpus, uint64_t seed) {
  check_team_args(threads, repeats, warmup, cpus);
  require_at_least("rows", rows, 1);
  require_at_least("dim", dim, 1);
  require_at_least("bags", bags, threads);
  require_at_least("bag", bag, 1);
  const PeakKernels k = kernels_for("");
  // Rows padded to whole cache lines, as pyparbench.memory.aligned_copy gives.
  const int64_t n_idx = bags * bag;
  // On transparent huge pages, as numpy puts the tables users gather from.
  auto table = aligned_array<float>(rows * dim);
  auto idx = aligned_array<int64_t>(n_idx);
  auto res = aligned_array<float>(bags * dim);
  PeakTiming out;
  out.ns = team_loop(
      threads, repeats, warmup, cpus,
      [&](int t) {
        int64_t lo, hi;
        share(rows * dim, threads, t, lo, hi);
        for (int64_t i = lo; i < hi; ++i) table[i] = 1.f;
        share(n_idx, threads, t, lo, hi);
        for (int64_t i = lo; i < hi; ++i)
          idx[i] = static_cast<int64_t>(mix(seed + static_cast<uint64_t>(i)) %
                                        static_cast<uint64_t>(rows));
      },
      [&](int t) {
        int64_t lo, hi;
        share(bags, threads, t, lo, hi);
        k.gather(table.get(), dim, idx.get(), n_idx, bag, lo, hi, res.get());
      });
  if (res[0] != static_cast<float>(bag)) throw std::runtime_error("gather computed a wrong sum");
  out.work = static_cast<double>(n_idx) * (static_cast<double>(dim) * 4.0 + 8.0) +
             static_cast<double>(bags) * static_cast<double>(dim) * 4.0;
  return out;
}

double measure_clock_mhz(int64_t cycles, int rounds) {
  require_at_least("cycles", cycles, 64);
  require_at_least("rounds", rounds, 1);
#if defined(__x86_64__) || defined(__aarch64__)
  const int64_t blocks = cycles / 64;
  std::vector<double> readings;
  for (int r = 0; r < rounds; ++r) {
    uint64_t x = 0;
    uint64_t one = 1;
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < blocks; ++i)
      // 64 adds, each waiting for the previous one: 64 cycles whatever the
      // core's width; the loop's own counter runs beside the chain. The
      // addend is a register, not an immediate: cores that fold small
      // immediates into the rename stage retire such a chain at two or
      // more adds a cycle, which read as twice the clock.
#if defined(__x86_64__)
      asm volatile(".rept 64\n\taddq %1, %0\n\t.endr" : "+r"(x) : "r"(one));
#elif defined(__aarch64__)
      // The same chain in A64: each add waits for the previous one.
      asm volatile(".rept 64\n\tadd %0, %0, %1\n\t.endr" : "+r"(x) : "r"(one));
#endif
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    if (x != static_cast<uint64_t>(blocks) * 64)
      throw std::runtime_error("the clock chain miscounted");
    const double mhz = static_cast<double>(blocks * 64) / ns * 1e3;
    readings.push_back(mhz);
  }
  // The median of the upper half: a preempted round reads low and is
  // dropped with the lower half, and a lone reading too high (a clock
  // step of a virtual machine's timer) cannot set the result alone.
  std::sort(readings.begin(), readings.end(), std::greater<double>());
  return readings[(readings.size() + 1) / 2 / 2];
#else
  return 0.0;
#endif
}

}  // namespace ppb
