// Measured ceilings of the machine, the roofs of the roofline
// (`pyparbench peak`): fp32 multiply-add throughput, STREAM-triad bandwidth
// and random-row gather bandwidth (the ceiling of embedding_bag), each run by
// an OpenMP team of a chosen size and timed here, so no Python is inside a
// measurement.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ppb {

// What one timed run of a ceiling kernel did.
struct PeakTiming {
  std::vector<double> ns;  // duration of each timed run
  double work = 0;         // FLOPs (fma) or bytes (triad, gather) of one run
};

// The shape of one ISA's multiply-add kernel.
struct FmaKernelInfo {
  std::string isa;
  int lanes = 0;
  bool fused = false;
  int chains = 0;
};

// ISAs this CPU runs, widest first ("avx512", "avx2", "generic").
std::vector<std::string> peak_isas();
// The widest of them; an empty name means this one too.
FmaKernelInfo fma_kernel_info(const std::string& isa);

// Every thread of a team of `threads` runs `iterations` rounds of the ISA's
// independent multiply-add chains; a run lasts until the last thread is
// done. `cpus` (empty: unpinned) pins thread i to cpus[i] for the
// measurement; the threads get their own masks back afterwards.
PeakTiming time_fma(int threads, int64_t iterations, int repeats, int warmup,
                    const std::string& isa, const std::vector<int>& cpus);

// The instructions that measure the dot-product ceiling of `precision`
// ("bf16", "int8") on this CPU and build, the ceiling being the best of
// them (dot_kernel_choice() of this CPU's flags and ISA cap; AMX left out
// where Linux refuses this process its tile data). Empty where there are none.
// std::invalid_argument for another precision.
std::vector<std::string> dot_instructions(const std::string& precision);

// Why the dot-product ceiling of `precision` cannot be measured on this CPU
// and build, naming the missing flags; "" when it can.
// std::invalid_argument for another precision.
std::string dot_unavailable(const std::string& precision);

// Every thread of a team of `threads` runs `iterations` rounds of the
// independent dot-product chains of `instruction` (one of
// dot_instructions(precision); "" the first). Work counts a multiply-add as
// 2 operations (bf16 FLOPs, int8 OPs), as the fp32 FLOPs do.
// std::invalid_argument where dot_unavailable() gives a reason or the
// instruction is not one of the precision's here.
PeakTiming time_dot(const std::string& precision, int threads, int64_t iterations, int repeats,
                    int warmup, const std::vector<int>& cpus,
                    const std::string& instruction = "");

// One run of `instruction`'s kernel on the calling thread: the sum of its
// accumulators (peak_dot_kernels.hpp says what it is for known operands).
// std::invalid_argument for an instruction this CPU and build do not run.
double dot_result(const std::string& instruction, int64_t iterations);

// a = b + s * c over three arrays of `elements` floats, each thread on its
// own contiguous share (which it also touched first). Bytes per run count
// STREAM's way: 3 * elements * 4 (two reads and a write).
PeakTiming time_triad(int threads, int64_t elements, int repeats, int warmup,
                      const std::vector<int>& cpus);

// `bags` sums of `bag` rows gathered at random from a rows x dim table (rows
// on whole cache lines), the work of embedding_bag. Bytes per run count as
// the graph analysis counts embedding_bag: gathered rows, int64 indices, and
// the output written.
PeakTiming time_gather(int threads, int64_t rows, int64_t dim, int64_t bags, int64_t bag,
                       int repeats, int warmup, const std::vector<int>& cpus, uint64_t seed);

// The clock of the calling thread's core, in MHz, from a chain of dependent
// integer adds (one per cycle on every x86-64 core); 0 where that does not
// hold (not x86-64). Of `rounds` rounds of `cycles` adds, the median of
// the faster half.
double measure_clock_mhz(int64_t cycles, int rounds);

}  // namespace ppb
