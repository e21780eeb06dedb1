// Gemm and Conv2d: the heavy ops.
#include "bindings/pybind.hpp"
#include "pyparbench/ops/conv2d.hpp"
#include "pyparbench/ops/gemm.hpp"

namespace ppb::bind {

namespace {

py::object gemm_run(Gemm& g, py::handle a, py::handle b, py::handle bias, py::object out) {
  auto av = in_view(a, "a"), bv = in_view(b, "b"), biasv = optional_in_view(bias, "bias");
  return run_released(g.out_shape(), out, [&](FloatView o) { g.run(av, bv, biasv, o); });
}

py::array_t<double> gemm_timeit(Gemm& g, py::handle a, py::handle b, py::handle bias,
                                py::object out, int repeats, int warmup) {
  auto av = in_view(a, "a"), bv = in_view(b, "b"), biasv = optional_in_view(bias, "bias");
  return time_released(g.out_shape(), out,
                       [&](FloatView o) { return g.timeit(av, bv, biasv, o, repeats, warmup); });
}

py::object conv_run(Conv2d& c, py::handle x, py::object out) {
  auto xv = in_view(x, "x");
  return run_released(c.output_shape(), out, [&](FloatView o) { c.run(xv, o); });
}

py::array_t<double> conv_timeit(Conv2d& c, py::handle x, py::object out, int repeats,
                                int warmup) {
  auto xv = in_view(x, "x");
  return time_released(c.output_shape(), out,
                       [&](FloatView o) { return c.timeit(xv, o, repeats, warmup); });
}

}  // namespace

void register_dense_ops(py::module_& m) {
  py::class_<Gemm, Kernel>(m, "Gemm", R"doc(
Prepared C = A·B (+ bias) (+ ReLU) in fp32: one oneDNN matmul primitive,
created once for these sizes and thread count. ``run()`` creates nothing.

A is (m, k) (or (k, m) with trans_a), B is (k, n) (or (n, k) with trans_b),
with a leading batch dimension when batch >= 1. Arrays must be float32 and
C-contiguous (TypeError otherwise; ``pyparbench.ops.gemm`` converts instead).
)doc")
      .def(py::init([](int64_t m, int64_t n, int64_t k, int64_t batch, bool trans_a,
                       bool trans_b, bool bias, bool relu, std::optional<int> threads) {
             return new Gemm(GemmConfig{batch, m, n, k, trans_a, trans_b, bias, relu}, threads);
           }),
           py::arg("m"), py::arg("n"), py::arg("k"), py::kw_only(), py::arg("batch") = 0,
           py::arg("trans_a") = false, py::arg("trans_b") = false, py::arg("bias") = false,
           py::arg("relu") = false, py::arg("threads") = py::none())
      .def_property_readonly("a_shape", [](const Gemm& g) { return shape_tuple(g.a_shape()); })
      .def_property_readonly("b_shape", [](const Gemm& g) { return shape_tuple(g.b_shape()); })
      .def_property_readonly("out_shape", [](const Gemm& g) { return shape_tuple(g.out_shape()); })
      .def_property_readonly("flops", &Gemm::flops)
      .def("run", &gemm_run, py::arg("a"), py::arg("b"), py::arg("bias") = py::none(),
           py::arg("out") = py::none(), "Compute into `out` (allocated when None) and return it.")
      .def("timeit", &gemm_timeit, py::arg("a"), py::arg("b"), py::arg("bias") = py::none(),
           py::arg("out") = py::none(), py::kw_only(), py::arg("repeats") = 100,
           py::arg("warmup") = 10, kTimeitDoc);

  py::class_<Conv2d, Kernel>(m, "Conv2d", R"doc(
Prepared 2-D convolution in fp32: one oneDNN convolution primitive. Weights
(OIHW, I = in_channels / groups) are reordered once by ``set_weights`` into
the layout oneDNN picked; ``run()`` creates nothing.

padding is (top, bottom, left, right); dilation 1 means a dense kernel.
With nhwc=True activations are (N, H, W, C) arrays, else (N, C, H, W).
)doc")
      .def(py::init([](std::array<int64_t, 4> input, int64_t out_channels,
                       std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                       std::array<int64_t, 4> padding, std::array<int64_t, 2> dilation,
                       int64_t groups, bool bias, bool relu, bool nhwc,
                       std::optional<int> threads) {
             Conv2dConfig c;
             if (nhwc) {
               c.n = input[0]; c.h = input[1]; c.w = input[2]; c.c = input[3];
             } else {
               c.n = input[0]; c.c = input[1]; c.h = input[2]; c.w = input[3];
             }
             c.out_channels = out_channels;
             c.kh = kernel[0]; c.kw = kernel[1];
             c.stride_h = stride[0]; c.stride_w = stride[1];
             c.pad_top = padding[0]; c.pad_bottom = padding[1];
             c.pad_left = padding[2]; c.pad_right = padding[3];
             c.dilation_h = dilation[0]; c.dilation_w = dilation[1];
             c.groups = groups; c.bias = bias; c.relu = relu; c.nhwc = nhwc;
             return new Conv2d(c, threads);
           }),
           py::arg("input_shape"), py::arg("out_channels"), py::arg("kernel"), py::kw_only(),
           py::arg("stride") = std::array<int64_t, 2>{1, 1},
           py::arg("padding") = std::array<int64_t, 4>{0, 0, 0, 0},
           py::arg("dilation") = std::array<int64_t, 2>{1, 1}, py::arg("groups") = 1,
           py::arg("bias") = false, py::arg("relu") = false, py::arg("nhwc") = false,
           py::arg("threads") = py::none())
      .def_property_readonly("input_shape", [](const Conv2d& c) { return shape_tuple(c.input_shape()); })
      .def_property_readonly("output_shape", [](const Conv2d& c) { return shape_tuple(c.output_shape()); })
      .def_property_readonly("weight_shape", [](const Conv2d& c) { return shape_tuple(c.weight_shape()); })
      .def_property_readonly("flops", &Conv2d::flops)
      .def_property_readonly("has_weights", &Conv2d::has_weights)
      .def("set_weights",
           [](Conv2d& c, py::handle weight, py::handle bias) {
             auto wv = in_view(weight, "weight");
             auto bv = optional_in_view(bias, "bias");
             py::gil_scoped_release nogil;
             c.set_weights(wv, bv);
           },
           py::arg("weight"), py::arg("bias") = py::none(),
           "Copy the weights (OIHW) and bias into the kernel, reordered for oneDNN.")
      .def("run", &conv_run, py::arg("x"), py::arg("out") = py::none(),
           "Compute into `out` (allocated when None) and return it.")
      .def("timeit", &conv_timeit, py::arg("x"), py::arg("out") = py::none(), py::kw_only(),
           py::arg("repeats") = 100, py::arg("warmup") = 10, kTimeitDoc);
}

}  // namespace ppb::bind
