// Which ISA's direct kernels (the small glue-op loops of plans' lone nodes)
// plans bind: listed, chosen, reported.
#include "bindings/pybind.hpp"
#include "pyparbench/ops/direct_kernels.hpp"

namespace ppb::bind {

void register_direct_ops(py::module_& m) {
  m.def("direct_isas", &direct_isas,
        "ISAs of the direct kernels this CPU runs, widest first ('avx512', 'avx2', 'generic').");
  m.def("direct_isa", [] { return std::string(direct_kernels().isa); },
        "The ISA of the direct kernels plans prepared from now on bind.");
  m.def("set_direct_isa", &set_direct_isa, py::arg("isa"),
        "Bind the direct kernels of `isa` in plans prepared from now on ('auto': the widest "
        "this CPU runs); process-wide. ValueError for an ISA this CPU does not run.");
}

}  // namespace ppb::bind
