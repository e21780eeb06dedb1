// What the native core was built against and what it runs on.
#pragma once

#include <string>

namespace ppb {

struct RuntimeInfo {
  std::string onednn_version;  // "2.6.3"
  std::string onednn_hash;
  std::string onednn_cpu_runtime;  // "OpenMP", "TBB", "sequential", ...
  std::string onednn_isa;          // ISA oneDNN dispatches to
  int onednn_api_major = 0;        // API generation the core was compiled for
  std::string openmp_library;      // shared object that provides omp_* symbols
  int openmp_spec = 0;             // _OPENMP date of the compiler's OpenMP
  int openmp_max_threads = 0;
  int openmp_num_procs = 0;
  std::string compiler;
};

RuntimeInfo runtime_info();

}  // namespace ppb
