// The Python base class of every prepared kernel: what all kernels share.
#include "bindings/pybind.hpp"
#include "pyparbench/ops/kernel.hpp"
#include "pyparbench/threading/audit.hpp"

namespace ppb::bind {

void register_kernel_base(py::module_& m) {
  py::class_<Kernel>(m, "Kernel", "Base of every prepared kernel.")
      .def_property_readonly("threads", &Kernel::threads,
                             "Intra-op threads, fixed when the kernel was created.")
      .def("pin", &Kernel::pin, py::arg("cpus"), py::call_guard<py::gil_scoped_release>(),
           R"doc(
Pin the kernel's OpenMP team for every later run and timed loop.

Parameters
----------
cpus : list of int
    OS CPU numbers; team thread i (the calling thread is thread 0) runs on
    ``cpus[i % len(cpus)]``. Typically one pool's list from
    ``pyparbench.threading.place``.

Raises
------
ValueError
    If ``cpus`` is empty, names a CPU twice or a CPU this process may not use.

Notes
-----
The calling thread gets its own affinity back after each run. The team's
other threads stay pinned until an unpinned kernel runs from the same thread.
)doc")
      .def("unpin", &Kernel::unpin, "Run unpinned from now on (the default).")
      .def_property_readonly("pinned_cpus", &Kernel::pinned_cpus,
                             "CPUs the team is pinned to; empty when not pinned.")
      .def("_attach_audit", &Kernel::attach_audit, py::arg("audit"), py::arg("team"),
           "Report every run's team into `audit` (see pyparbench.threading.audit).")
      .def("_detach_audit", &Kernel::detach_audit);
}

}  // namespace ppb::bind
