#include "bindings/pybind.hpp"
#include "pyparbench/errors.hpp"
#include "pyparbench/dnnl_compat.hpp"

namespace ppb::bind {

void register_errors(py::module_& m) {
  // A oneDNN failure surfaces as pyparbench.DnnlError (a RuntimeError) whose
  // `status` and `status_name` say what oneDNN reported.
  static py::exception<dnnl::error> dnnl_error(m, "DnnlError", PyExc_RuntimeError);
  // A precision this oneDNN has no kernel for here: pyparbench.PrecisionUnavailable.
  py::register_exception<PrecisionUnavailable>(m, "PrecisionUnavailable", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const dnnl::error& e) {
      py::handle type = dnnl_error;
      py::object exc = type(std::string("oneDNN error (") + compat::status_name(e.status) +
                            "): " + e.what());
      exc.attr("status") = static_cast<int>(e.status);
      exc.attr("status_name") = compat::status_name(e.status);
      PyErr_SetObject(dnnl_error.ptr(), exc.ptr());
    }
  });
}

}  // namespace ppb::bind
