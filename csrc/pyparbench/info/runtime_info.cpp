#include "pyparbench/info/runtime_info.hpp"

#include "pyparbench/dnnl_compat.hpp"

#include <dlfcn.h>
#include <omp.h>

namespace ppb {

namespace {

std::string cpu_runtime_name(unsigned rt) {
  switch (rt) {
    case DNNL_RUNTIME_NONE: return "none";
    case DNNL_RUNTIME_SEQ: return "sequential";
    case DNNL_RUNTIME_OMP: return "OpenMP";
    case DNNL_RUNTIME_TBB: return "TBB";
    case DNNL_RUNTIME_THREADPOOL: return "threadpool";
    default: return "runtime_" + std::to_string(rt);
  }
}

// The library that actually provides OpenMP to this process (libgomp,
// libiomp5, libomp), found from the address of one of its functions.
std::string openmp_library() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&omp_get_max_threads), &info) && info.dli_fname)
    return info.dli_fname;
  return "unknown";
}

}  // namespace

RuntimeInfo runtime_info() {
  RuntimeInfo r;
  const dnnl_version_t* v = dnnl_version();
  r.onednn_version =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  r.onednn_hash = v->hash ? v->hash : "";
  r.onednn_cpu_runtime = cpu_runtime_name(v->cpu_runtime);
  r.onednn_isa = compat::isa_name(dnnl::get_effective_cpu_isa());
  r.onednn_api_major = DNNL_VERSION_MAJOR;
  r.openmp_library = openmp_library();
  r.openmp_spec = _OPENMP;
  r.openmp_max_threads = omp_get_max_threads();
  r.openmp_num_procs = omp_get_num_procs();
  r.compiler = __VERSION__;
  return r;
}

}  // namespace ppb
