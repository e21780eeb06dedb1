// The byte lookup (ops/byte_lookup.hpp): its tier, and a run on arrays.
#include "bindings/pybind.hpp"
#include "pyparbench/ops/byte_lookup.hpp"

#include <optional>
#include <string>
#include <vector>

namespace ppb::bind {

namespace {

enum class Bytes { u8, s8, f32, other };

Bytes kind_of(const py::array& a) {
  const py::dtype d = a.dtype();
  if (d.kind() == 'u' && d.itemsize() == 1) return Bytes::u8;
  if (d.kind() == 'i' && d.itemsize() == 1) return Bytes::s8;
  if (d.kind() == 'f' && d.itemsize() == 4) return Bytes::f32;
  return Bytes::other;
}

std::string dtype_name(const py::array& a) { return py::str(a.dtype()); }

// A C-contiguous numpy array (TypeError naming `name` otherwise).
py::array contiguous(py::handle obj, const char* name, const char* expected) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(std::string(name) + " must be a numpy array of " + expected + ", got " +
                         std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  auto a = py::reinterpret_borrow<py::array>(obj);
  if (!(a.flags() & py::array::c_style))
    throw py::type_error(std::string(name) +
                         " must be C-contiguous; copy it with np.ascontiguousarray(x)");
  return a;
}

py::array byte_lookup(py::handle x_obj, py::handle table_obj, py::object out_obj,
                      std::optional<float> scale, int threads) {
  const py::array x = contiguous(x_obj, "x", "uint8 or int8");
  const Bytes xk = kind_of(x);
  if (xk != Bytes::u8 && xk != Bytes::s8)
    throw py::type_error("x must be uint8 or int8, got " + dtype_name(x));
  const py::array table = contiguous(table_obj, "table", "uint8, int8 or float32");
  const Bytes tk = kind_of(table);
  if (tk == Bytes::other)
    throw py::type_error("table must be uint8, int8 or float32, got " + dtype_name(table));
  if (table.ndim() != 1 || table.shape(0) != 256)
    throw py::value_error("table must hold 256 rows (shape (256,)), got shape " +
                          std::string(py::str(table.attr("shape"))));
  if (scale && tk != Bytes::f32)
    throw py::value_error("scale is for a float32 table, not " + dtype_name(table));
  if (scale && !(*scale > 0.f))
    throw py::value_error("scale must be > 0, got " + std::to_string(*scale));
  if (threads < 1) throw py::value_error("threads must be >= 1, got " + std::to_string(threads));
  if (out_obj.is_none()) {
    std::vector<py::ssize_t> dims(x.shape(), x.shape() + x.ndim());
    out_obj = py::array(table.dtype(), dims);
  }
  py::array out = contiguous(out_obj, "out", dtype_name(table).c_str());
  if (kind_of(out) != tk)
    throw py::type_error("out must be " + dtype_name(table) + " (the table's type), got " +
                         dtype_name(out));
  if (!out.writeable()) throw py::value_error("out is read-only");
  if (out.size() != x.size())
    throw py::value_error("out holds " + std::to_string(out.size()) + " elements, x " +
                          std::to_string(x.size()));
  const auto* x0 = static_cast<const char*>(x.data());
  const auto* o0 = static_cast<const char*>(out.data());
  if (x0 < o0 + out.nbytes() && o0 < x0 + x.nbytes())
    throw py::value_error("out overlaps x; pass a separate array");
  const LookupTable t =
      tk == Bytes::f32
          ? float_lookup_table(static_cast<const float*>(table.data()), xk == Bytes::s8,
                               scale.value_or(0.f))
          : byte_lookup_table(static_cast<const uint8_t*>(table.data()), xk == Bytes::s8);
  const auto* xd = static_cast<const uint8_t*>(x.data());
  void* od = out.mutable_data();
  const int64_t n = static_cast<int64_t>(x.size());
  {
    py::gil_scoped_release nogil;
    run_byte_lookup(t, xd, n, od, threads);
  }
  return out;
}

}  // namespace

void register_lookup_ops(py::module_& m) {
  m.def("lookup_isa", [] { return std::string(lookup_kernels().isa()); },
        "The build the byte lookups (byte_lookup, the int8 plans' gate lookups) run: "
        "'avx512vbmi', 'avx512', 'avx2' or 'generic'.");
  m.def(
      "set_lookup_isa", [](const std::string& isa) { lookup_kernels().set(isa); },
      py::arg("isa"),
      "Byte lookups run this build ('avx512vbmi': vpermi2b; 'avx512': AVX512BW's vpshufb, "
      "also where the CPU has VBMI; 'avx2'; 'generic'; 'auto': the widest this CPU runs); "
      "process-wide. ValueError naming the missing flags for a build this CPU does not run.");
  m.def("byte_lookup", &byte_lookup, py::arg("x"), py::arg("table"), py::arg("out") = py::none(),
        py::kw_only(), py::arg("scale") = py::none(), py::arg("threads") = 1,
        R"doc(out[i] = table[row of x[i]], the int8 plans' gate lookup on arrays.

x: uint8 or int8 (C-contiguous, any shape); its byte reads row x (uint8) or
x + 128 (int8) of table, 256 rows lowest first, uint8, int8 or float32. out
(allocated when None) has the table's type and x's size. scale: for a
float32 table, the step of the grid its rows are on: where every row is an
integer times it to the bit, the vector builds look up bytes and scale
them, else they gather the floats (as without scale). Returns out.)doc");
}

}  // namespace ppb::bind
