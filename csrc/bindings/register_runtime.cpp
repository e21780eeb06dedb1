// Default threads and build information (topology: register_threading.cpp).
#include "bindings/pybind.hpp"
#include "pyparbench/core/cpu_features.hpp"
#include "pyparbench/core/threads.hpp"
#include "pyparbench/info/runtime_info.hpp"
#include "pyparbench/ops/decode_attention_kernel.hpp"
#include "pyparbench/ops/direct_kernels.hpp"
#include "pyparbench/ops/embedding_bag_kernel.hpp"
#include "pyparbench/ops/lookup_kernel.hpp"
#include "pyparbench/ops/pool_nhwc.hpp"
#include "pyparbench/timing/peak.hpp"

namespace ppb::bind {

void register_runtime(py::module_& m) {
  m.def("get_default_threads", &default_threads,
        "Intra-op threads a kernel gets when created with threads=None.");
  m.def("set_default_threads", &set_default_threads, py::arg("threads"),
        "Set the intra-op threads for kernels created from now on with threads=None.");
  m.def("runtime_info", [] {
    const RuntimeInfo r = runtime_info();
    py::dict d;
    d["onednn_version"] = r.onednn_version;
    d["onednn_hash"] = r.onednn_hash;
    d["onednn_cpu_runtime"] = r.onednn_cpu_runtime;
    d["onednn_isa"] = r.onednn_isa;
    d["onednn_api_major"] = r.onednn_api_major;
    d["openmp_library"] = r.openmp_library;
    d["openmp_spec"] = r.openmp_spec;
    d["openmp_max_threads"] = r.openmp_max_threads;
    d["openmp_num_procs"] = r.openmp_num_procs;
    d["compiler"] = r.compiler;
    return d;
  });
  m.def(
      "cpu_features",
      [] {
        const CpuFeatures& f = cpu_features();
        py::dict d;
        d["arch"] = f.arch;
        d["flags"] = f.flags();
        d["precisions"] = f.native_precisions();
        d["sve_vector_bits"] = f.sve_vector_bits;
        d["tiers"] = x86_kernel_tiers();
        py::dict k;
        k["direct"] = std::string(direct_kernels().isa);
        k["embedding_bag"] = std::string(bag_kernels().isa());
        k["decode_attention"] = std::string(decode_rows_kernels().isa());
        k["pool_nhwc"] = std::string(pool_nhwc_isa());
        k["byte_lookup"] = std::string(lookup_kernels().isa());
        k["peak"] = peak_isas().front();
        d["kernels"] = k;
        py::dict dots;
        for (const char* precision : {"bf16", "int8"}) dots[precision] = dot_instructions(precision);
        d["dot_instructions"] = dots;
        return d;
      },
      "What the running CPU has (core/cpu_features.hpp): its architecture, the "
      "flags that are set, the precisions it multiplies natively, the SVE vector length in bits (0: none), the x86 kernel "
      "tiers it runs (widest first, then generic), the build each per-ISA "
      "kernel family runs, and the instructions of peak's bf16 and int8 dot-product "
      "ceilings (empty where none).");
}

}  // namespace ppb::bind
