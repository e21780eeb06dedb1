// The extension module: one submodule per area, each filled by its own
// register_<area>() in its own file.
#include "bindings/pybind.hpp"

PYBIND11_MODULE(_core, m) {
  m.doc() = "pyparbench native core (oneDNN + OpenMP kernels)";
  ppb::bind::register_errors(m);
  auto runtime = m.def_submodule("runtime", "Default threads and build information");
  ppb::bind::register_runtime(runtime);
  auto threading = m.def_submodule("threading", "Topology, placement, thread pools and audit");
  ppb::bind::register_threading(threading);
  auto ops = m.def_submodule("ops", "Prepared operator kernels");
  ppb::bind::register_kernel_base(ops);
  ppb::bind::register_heavy_ops(ops);
  ppb::bind::register_quantized_ops(ops);
  ppb::bind::register_lookup_ops(ops);
  ppb::bind::register_glue_ops(ops);
  ppb::bind::register_decoder_ops(ops);
  ppb::bind::register_embedding_ops(ops);
  ppb::bind::register_direct_ops(ops);
  auto graph = m.def_submodule("graph", "Compiled graphs and their executor");
  ppb::bind::register_graph(graph);
  auto peak = m.def_submodule("peak", "Measured ceilings: FMA, triad, gather");
  ppb::bind::register_peak(peak);
}
