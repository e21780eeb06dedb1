// The machine's measured ceilings (pyparbench.peak builds the roofline on them).
#include "bindings/pybind.hpp"
#include "pyparbench/timing/peak.hpp"
#include "pyparbench/timing/peak_dot_choice.hpp"

namespace ppb::bind {

namespace {

py::tuple timing_tuple(PeakTiming&& t) {
  const double work = t.work;
  return py::make_tuple(as_array(std::move(t.ns)), work);
}

}  // namespace

void register_peak(py::module_& m) {
  m.def("isas", &peak_isas, "ISAs of the ceiling kernels this CPU runs, widest first.");
  m.def(
      "fma_kernel",
      [](const std::string& isa) {
        const FmaKernelInfo k = fma_kernel_info(isa);
        py::dict d;
        d["isa"] = k.isa;
        d["lanes"] = k.lanes;
        d["fused"] = k.fused;
        d["chains"] = k.chains;
        return d;
      },
      py::arg("isa") = "",
      "The multiply-add kernel of `isa` (empty: the widest): its ISA, float lanes per "
      "vector, whether a step is one fused multiply-add, and its independent chains per "
      "thread. ValueError for an ISA this CPU does not run.");
  m.def(
      "time_fma",
      [](int threads, int64_t iterations, int repeats, int warmup, const std::string& isa,
         const std::vector<int>& cpus) {
        PeakTiming t;
        {
          py::gil_scoped_release nogil;
          t = time_fma(threads, iterations, repeats, warmup, isa, cpus);
        }
        return timing_tuple(std::move(t));
      },
      py::arg("threads"), py::arg("iterations"), py::kw_only(), py::arg("repeats") = 5,
      py::arg("warmup") = 1, py::arg("isa") = "", py::arg("cpus") = std::vector<int>{},
      R"doc(
Time fp32 multiply-add throughput: each of `threads` OpenMP threads runs
`iterations` rounds of independent vector multiply-add chains.

Returns (ns, flops): the duration of each timed run (numpy float64) and the
FLOPs of one run (a multiply-add is 2). `isa`: "avx512", "avx2", "generic" or
"" (the widest this CPU runs). `cpus`: thread i runs on cpus[i] (empty: not
pinned); the threads get their masks back afterwards.
)doc");
  m.def("dot_instructions", &dot_instructions, py::arg("precision"),
        "The instructions that measure the dot-product ceiling of `precision` ('bf16', "
        "'int8') on this CPU and build, the ceiling being the best of them: 'tdpbf16ps' / "
        "'tdpbusd' (AMX tiles), else 'vdpbf16ps' / 'vpdpbusd' (AVX512_BF16 / AVX512_VNNI) on "
        "x86-64; 'bfmmla' and 'bfdot' / 'smmla' and 'sdot' on aarch64. Empty where none. "
        "ValueError for another precision.");
  m.def("dot_choice", &dot_kernel_choice, py::arg("precision"), py::arg("arch"),
        py::arg("flags"), py::arg("isa_cap") = "",
        "dot_instructions() for any CPU: of architecture `arch` ('x86_64', 'aarch64') with "
        "`flags` (cpu_features()'s names), under oneDNN's ISA cap `isa_cap` (an "
        "ONEDNN_MAX_CPU_ISA value, '' none; AMX runs only under a cap that allows it).");
  m.def("dot_capped", &dot_kernel_capped, py::arg("precision"), py::arg("arch"),
        py::arg("flags"), py::arg("isa_cap"),
        "Whether the ISA cap `isa_cap` alone turns off the dot products of `precision` a "
        "CPU of `arch` with `flags` has: dot_choice() gives none under it and some without "
        "it. What dot_unavailable() and `pyparbench info` blame on the cap.");
  m.def("isa_cap", &isa_cap,
        "This process's oneDNN ISA cap: ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA (oneDNN "
        "reads them in this order), else ''.");
  m.def("dot_instruction_ops", &dot_instruction_ops, py::arg("instruction"),
        "Operations one dot-product instruction does, a multiply-add counting 2. ValueError "
        "for a name dot_choice() never gives.");
  m.def("dot_unavailable", &dot_unavailable, py::arg("precision"),
        "Why the dot-product ceiling of `precision` cannot be measured here, naming the "
        "missing flags; '' when it can. ValueError for another precision.");
  m.def(
      "dot_result",
      [](const std::string& instruction, int64_t iterations) {
        py::gil_scoped_release nogil;
        return dot_result(instruction, iterations);
      },
      py::arg("instruction"), py::arg("iterations"),
      "One run of `instruction`'s ceiling kernel on the calling thread: the sum of its "
      "accumulators, exact for small counts (vector kernels: 16 chains, chain c from c; AMX: "
      "4 tiles from 0; bf16 operands 2^-10, int8 operands 1). ValueError for an instruction "
      "this CPU and build do not run.");
  m.def(
      "time_dot",
      [](const std::string& precision, int threads, int64_t iterations, int repeats, int warmup,
         const std::vector<int>& cpus, const std::string& instruction) {
        PeakTiming t;
        {
          py::gil_scoped_release nogil;
          t = time_dot(precision, threads, iterations, repeats, warmup, cpus, instruction);
        }
        return timing_tuple(std::move(t));
      },
      py::arg("precision"), py::arg("threads"), py::arg("iterations"), py::kw_only(),
      py::arg("repeats") = 5, py::arg("warmup") = 1, py::arg("cpus") = std::vector<int>{},
      py::arg("instruction") = "",
      R"doc(
Time dot-product throughput in `precision` ('bf16' or 'int8'): each of
`threads` OpenMP threads runs `iterations` rounds of independent chains of
`instruction` (one of dot_instructions(precision); '' the first): 16 vector
registers, or 4 AMX accumulator tiles.

Returns (ns, ops): the duration of each timed run and the operations of one
run, a multiply-add counting 2 (bf16 FLOPs, int8 OPs), comparable with
time_fma's FLOPs. ValueError where dot_unavailable(precision) gives a reason
or the instruction is not one of dot_instructions(precision).
)doc");
  m.def(
      "time_triad",
      [](int threads, int64_t elements, int repeats, int warmup, const std::vector<int>& cpus) {
        PeakTiming t;
        {
          py::gil_scoped_release nogil;
          t = time_triad(threads, elements, repeats, warmup, cpus);
        }
        return timing_tuple(std::move(t));
      },
      py::arg("threads"), py::arg("elements"), py::kw_only(), py::arg("repeats") = 5,
      py::arg("warmup") = 1, py::arg("cpus") = std::vector<int>{},
      R"doc(
Time the STREAM triad a = b + s * c over three arrays of `elements` floats,
split evenly over `threads` threads (each touched its share first).

Returns (ns, bytes): per-run durations and bytes of one run, counted as
STREAM does (3 * elements * 4).
)doc");
  m.def(
      "time_gather",
      [](int threads, int64_t rows, int64_t dim, int64_t bags, int64_t bag, int repeats,
         int warmup, const std::vector<int>& cpus, uint64_t seed) {
        PeakTiming t;
        {
          py::gil_scoped_release nogil;
          t = time_gather(threads, rows, dim, bags, bag, repeats, warmup, cpus, seed);
        }
        return timing_tuple(std::move(t));
      },
      py::arg("threads"), py::arg("rows"), py::arg("dim"), py::arg("bags"), py::arg("bag"),
      py::kw_only(), py::arg("repeats") = 5, py::arg("warmup") = 1,
      py::arg("cpus") = std::vector<int>{}, py::arg("seed") = 0,
      R"doc(
Time random-row gathers, the work of embedding_bag: `bags` sums of `bag`
rows drawn at random from a rows x dim float table, bags split evenly over
`threads` threads.

Returns (ns, bytes): per-run durations and bytes of one run, counted as the
graph analysis counts embedding_bag (gathered rows, int64 indices, output).
)doc");
  m.def(
      "clock_mhz",
      [](int64_t cycles, int rounds) {
        py::gil_scoped_release nogil;
        return measure_clock_mhz(cycles, rounds);
      },
      py::arg("cycles") = 20'000'000, py::arg("rounds") = 5,
      "The calling thread's core clock in MHz, from a chain of dependent integer adds "
      "(one per cycle on x86-64); the median of the faster half of `rounds`. 0.0 on other "
      "architectures.");
}

}  // namespace ppb::bind
