// Gemm and Conv2d: the heavy ops. Their interfaces (GemmOp, Conv2dOp: run,
// timeit, properties) are bound here once for every math library; this file
// adds the oneDNN implementations, register_math_ops.cpp the others.
#include "bindings/heavy_ops.hpp"
#include "pyparbench/ops/conv2d.hpp"
#include "pyparbench/ops/gemm.hpp"

namespace ppb::bind {

namespace {

py::object gemm_run(GemmOp& g, py::handle a, py::handle b, py::handle bias, py::object out) {
  auto av = in_view(a, "a"), bv = in_view(b, "b"), biasv = optional_in_view(bias, "bias");
  return run_released(g.out_shape(), out, [&](FloatView o) { g.run(av, bv, biasv, o); });
}

py::array_t<double> gemm_timeit(GemmOp& g, py::handle a, py::handle b, py::handle bias,
                                py::object out, int repeats, int warmup) {
  auto av = in_view(a, "a"), bv = in_view(b, "b"), biasv = optional_in_view(bias, "bias");
  return time_released(g.out_shape(), out,
                       [&](FloatView o) { return g.timeit(av, bv, biasv, o, repeats, warmup); });
}

py::object conv_run(Conv2dOp& c, py::handle x, py::object out) {
  auto xv = in_view(x, "x");
  return run_released(c.output_shape(), out, [&](FloatView o) { c.run(xv, o); });
}

py::array_t<double> conv_timeit(Conv2dOp& c, py::handle x, py::object out, int repeats,
                                int warmup) {
  auto xv = in_view(x, "x");
  return time_released(c.output_shape(), out,
                       [&](FloatView o) { return c.timeit(xv, o, repeats, warmup); });
}

}  // namespace

void register_dense_ops(py::module_& m) {
  py::class_<GemmOp>(m, "GemmOp", R"doc(
Interface of a prepared gemm, whichever math library computes it (``Gemm``:
oneDNN, ``EigenGemm``, ``BlasGemm``): the same shapes, checks, ``run()`` and
``timeit()`` for all.
)doc")
      .def_property_readonly("library",
                             [](const GemmOp& g) { return std::string(g.library()); },
                             "The math library: 'onednn', 'eigen' or 'blas'.")
      .def_property_readonly("a_shape", [](const GemmOp& g) { return shape_tuple(g.a_shape()); })
      .def_property_readonly("b_shape", [](const GemmOp& g) { return shape_tuple(g.b_shape()); })
      .def_property_readonly("out_shape", [](const GemmOp& g) { return shape_tuple(g.out_shape()); })
      .def_property_readonly("flops", &GemmOp::flops)
      .def("run", &gemm_run, py::arg("a"), py::arg("b"), py::arg("bias") = py::none(),
           py::arg("out") = py::none(), "Compute into `out` (allocated when None) and return it.")
      .def("timeit", &gemm_timeit, py::arg("a"), py::arg("b"), py::arg("bias") = py::none(),
           py::arg("out") = py::none(), py::kw_only(), py::arg("repeats") = 100,
           py::arg("warmup") = 10, kTimeitDoc);

  py::class_<Conv2dOp>(m, "Conv2dOp", R"doc(
Interface of a prepared 2-D convolution, whichever math library computes it
(``Conv2d``: oneDNN, ``EigenConv2d``, ``BlasConv2d``): the same shapes, checks,
``set_weights()``, ``run()`` and ``timeit()`` for all.
)doc")
      .def_property_readonly("library",
                             [](const Conv2dOp& c) { return std::string(c.library()); },
                             "The math library: 'onednn', 'eigen' or 'blas'.")
      .def_property_readonly("input_shape", [](const Conv2dOp& c) { return shape_tuple(c.input_shape()); })
      .def_property_readonly("output_shape", [](const Conv2dOp& c) { return shape_tuple(c.output_shape()); })
      .def_property_readonly("weight_shape", [](const Conv2dOp& c) { return shape_tuple(c.weight_shape()); })
      .def_property_readonly("flops", &Conv2dOp::flops)
      .def_property_readonly("has_weights", &Conv2dOp::has_weights)
      .def("set_weights",
           [](Conv2dOp& c, py::handle weight, py::handle bias) {
             auto wv = in_view(weight, "weight");
             auto bv = optional_in_view(bias, "bias");
             py::gil_scoped_release nogil;
             c.set_weights(wv, bv);
           },
           py::arg("weight"), py::arg("bias") = py::none(),
           "Copy the weights (OIHW) and bias into the kernel, in the library's layout.")
      .def("run", &conv_run, py::arg("x"), py::arg("out") = py::none(),
           "Compute into `out` (allocated when None) and return it.")
      .def("timeit", &conv_timeit, py::arg("x"), py::arg("out") = py::none(), py::kw_only(),
           py::arg("repeats") = 100, py::arg("warmup") = 10, kTimeitDoc);

  bind_gemm_class<Gemm>(m, "Gemm", R"doc(
Prepared C = A·B (+ bias) (+ ReLU) in fp32: one oneDNN matmul primitive,
created once for these sizes and thread count. ``run()`` creates nothing.

A is (m, k) (or (k, m) with trans_a), B is (k, n) (or (n, k) with trans_b),
with a leading batch dimension when batch >= 1. Arrays must be float32 and
C-contiguous (TypeError otherwise; ``pyparbench.ops.gemm`` converts instead).
)doc");

  bind_conv2d_class<Conv2d>(m, "Conv2d", R"doc(
Prepared 2-D convolution in fp32: one oneDNN convolution primitive. Weights
(OIHW, I = in_channels / groups) are reordered once by ``set_weights`` into
the layout oneDNN picked; ``run()`` creates nothing.

padding is (top, bottom, left, right); dilation 1 means a dense kernel.
With nhwc=True activations are (N, H, W, C) arrays, else (N, C, H, W).
)doc");
}

}  // namespace ppb::bind
