// Every binding file includes pybind11 through this header. It also turns
// numpy arrays into the core's views: no copies, and a TypeError that says
// how to fix the call when an array is not float32 / C-contiguous.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "pyparbench/core/tensor.hpp"

#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace ppb::bind {

// Each register_<area> adds one area of the API to the module.
void register_errors(py::module_& m);
void register_runtime(py::module_& m);
void register_threading(py::module_& m);
void register_kernel_base(py::module_& m);
void register_heavy_ops(py::module_& m);
void register_quantized_ops(py::module_& m);
void register_lookup_ops(py::module_& m);
void register_glue_ops(py::module_& m);
void register_decoder_ops(py::module_& m);
void register_embedding_ops(py::module_& m);
void register_direct_ops(py::module_& m);
void register_graph(py::module_& m);
void register_peak(py::module_& m);

ConstFloatView in_view(py::handle obj, const char* name);
// None -> an absent view.
ConstFloatView optional_in_view(py::handle obj, const char* name);
// ml_dtypes.bfloat16, C-contiguous (TypeError saying how to convert).
ConstBf16View bf16_in_view(py::handle obj, const char* name);
// Whether `obj` is a numpy array of ml_dtypes.bfloat16 (no exception either way).
bool is_bf16_array(py::handle obj);
// Writable float32 C-contiguous array.
FloatView out_view(py::handle obj, const char* name);
// int32 or int64, C-contiguous; None -> absent.
IndexView index_view(py::handle obj, const char* name);
std::vector<ConstFloatView> in_views(const py::sequence& seq, const char* name);

// Whether `obj` is already in the form the prepared kernels take, so that a
// function may skip converting it (no exception either way): a C-contiguous
// numpy float32 array of `ndim` dimensions (any when ndim < 0), and a
// C-contiguous int32 / int64 array (32 or 64; 0: neither).
bool is_kernel_float_array(py::handle obj, int ndim = -1);
int kernel_index_bits(py::handle obj);

// Per-run durations (ns) as a numpy array.
py::array_t<double> as_array(std::vector<double>&& v);

py::tuple shape_tuple(const Shape& s);

py::array new_output(const Shape& s);

// The calling convention of every run(): `out` is allocated when None, the
// arrays are converted before, and fn(out_view) runs with the GIL released.
template <class Fn>
py::object run_released(const Shape& out_shape, py::object out, Fn&& fn) {
  if (out.is_none()) out = new_output(out_shape);
  FloatView ov = out_view(out, "out");
  {
    py::gil_scoped_release nogil;
    fn(ov);
  }
  return out;
}

// The same for timeit(): fn(out_view) returns per-run nanoseconds.
template <class Fn>
py::array_t<double> time_released(const Shape& out_shape, py::object out, Fn&& fn) {
  if (out.is_none()) out = new_output(out_shape);
  FloatView ov = out_view(out, "out");
  std::vector<double> ns;
  {
    py::gil_scoped_release nogil;
    ns = fn(ov);
  }
  return as_array(std::move(ns));
}

// The docstring fragment shared by every timeit().
constexpr const char* kTimeitDoc =
    "Bind the arrays, then run the kernel `warmup` times untimed and `repeats` times "
    "timed in a C++ loop (no Python between runs, GIL released). Returns the duration "
    "of each timed run in nanoseconds (numpy float64 array).";

}  // namespace ppb::bind
