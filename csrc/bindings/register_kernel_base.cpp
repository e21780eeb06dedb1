// The Python base class of every prepared kernel: what all kernels share.
#include "bindings/pybind.hpp"
#include "pyparbench/core/kernel.hpp"

namespace ppb::bind {

void register_kernel_base(py::module_& m) {
  py::class_<Kernel>(m, "Kernel", "Base of every prepared kernel.")
      .def_property_readonly("threads", &Kernel::threads,
                             "Intra-op threads, fixed when the kernel was created.");
}

}  // namespace ppb::bind
