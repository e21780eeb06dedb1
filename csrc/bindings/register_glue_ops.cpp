// The glue ops of real models: activations, softmax, pooling, add / mul,
// concat, transpose, batch and layer normalisation, DLRM's triangle gather.
#include "bindings/pybind.hpp"
#include "pyparbench/ops/binary.hpp"
#include "pyparbench/ops/concat.hpp"
#include "pyparbench/ops/eltwise.hpp"
#include "pyparbench/ops/normalization.hpp"
#include "pyparbench/ops/pooling.hpp"
#include "pyparbench/ops/softmax.hpp"
#include "pyparbench/ops/transpose.hpp"
#include "pyparbench/ops/tril_flatten.hpp"

namespace ppb::bind {

namespace {

Shape to_shape(const std::vector<int64_t>& v) { return Shape(v.begin(), v.end()); }

void register_unary_base(py::module_& m) {
  py::class_<UnaryKernel, Kernel>(m, "UnaryKernel", "Base of one-input glue kernels.")
      .def_property_readonly("input_shape",
                             [](const UnaryKernel& k) { return shape_tuple(k.input_shape()); })
      .def_property_readonly("output_shape",
                             [](const UnaryKernel& k) { return shape_tuple(k.output_shape()); })
      .def("run",
           [](UnaryKernel& k, py::handle x, py::object out) {
             auto xv = in_view(x, "x");
             return run_released(k.output_shape(), out, [&](FloatView o) { k.run(xv, o); });
           },
           py::arg("x"), py::arg("out") = py::none(),
           "Compute into `out` (allocated when None) and return it.")
      .def("timeit",
           [](UnaryKernel& k, py::handle x, py::object out, int repeats, int warmup) {
             auto xv = in_view(x, "x");
             return time_released(k.output_shape(), out, [&](FloatView o) {
               return k.timeit(xv, o, repeats, warmup);
             });
           },
           py::arg("x"), py::arg("out") = py::none(), py::kw_only(), py::arg("repeats") = 100,
           py::arg("warmup") = 10, kTimeitDoc);
}

}  // namespace

void register_glue_ops(py::module_& m) {
  register_unary_base(m);

  py::class_<Eltwise, UnaryKernel>(m, "Eltwise",
                                   "Element-wise activation: relu, relu6, sigmoid, tanh, gelu "
                                   "(erf form), gelu_tanh, swish (x sigmoid x) or hardswish "
                                   "(x relu6(x + 3) / 6). out may be x (in place).")
      .def(py::init([](const std::string& kind, const std::vector<int64_t>& shape,
                       std::optional<int> threads) {
             return new Eltwise(kind, to_shape(shape), threads);
           }),
           py::arg("kind"), py::arg("shape"), py::kw_only(), py::arg("threads") = py::none())
      .def_property_readonly("kind", &Eltwise::kind);

  py::class_<Softmax, UnaryKernel>(m, "Softmax", "Softmax along `axis`. out may be x.")
      .def(py::init([](const std::vector<int64_t>& shape, int axis, std::optional<int> threads) {
             return new Softmax(to_shape(shape), axis, threads);
           }),
           py::arg("shape"), py::kw_only(), py::arg("axis") = -1, py::arg("threads") = py::none())
      .def_property_readonly("axis", &Softmax::axis);

  py::class_<Pool2d, UnaryKernel>(m, "Pool2d", R"doc(
Max or average 2-D pooling over an NCHW input (input_shape is always NCHW;
with nhwc the data is stored channels-last). padding is (top, bottom, left,
right); ceil_mode and count_include_pad follow PyTorch. impl: "onednn",
"direct" (channels-last only) or "auto" (direct when nhwc, except an average counting the padding).
)doc")
      .def(py::init([](const std::string& kind, const std::vector<int64_t>& input_shape,
                       std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                       std::array<int64_t, 4> padding, bool ceil_mode, bool count_include_pad,
                       std::optional<int> threads, bool nhwc, const std::string& impl) {
             Pool2dConfig c{kind,       kernel[0],  kernel[1],  stride[0], stride[1],
                            padding[0], padding[1], padding[2], padding[3], ceil_mode,
                            count_include_pad, impl};
             return new Pool2d(c, to_shape(input_shape), threads,
                               nhwc ? ActLayout::nhwc : ActLayout::nchw);
           }),
           py::arg("kind"), py::arg("input_shape"), py::arg("kernel"), py::kw_only(),
           py::arg("stride") = std::array<int64_t, 2>{1, 1},
           py::arg("padding") = std::array<int64_t, 4>{0, 0, 0, 0},
           py::arg("ceil_mode") = false, py::arg("count_include_pad") = true,
           py::arg("threads") = py::none(), py::arg("nhwc") = false,
           py::arg("impl") = "auto")
      .def_property_readonly("impl", &Pool2d::impl);

  py::class_<GlobalAvgPool, UnaryKernel>(m, "GlobalAvgPool",
                                         "Mean over H and W: (N, C, H, W) -> (N, C).")
      .def(py::init([](const std::vector<int64_t>& input_shape, std::optional<int> threads) {
             return new GlobalAvgPool(to_shape(input_shape), threads);
           }),
           py::arg("input_shape"), py::kw_only(), py::arg("threads") = py::none());

  py::class_<Binary, Kernel>(m, "Binary",
                             "a + b or a * b with b broadcast where its size is 1, optional "
                             "fused ReLU. out may be a.")
      .def(py::init([](const std::string& kind, const std::vector<int64_t>& a,
                       const std::vector<int64_t>& b, bool relu, std::optional<int> threads) {
             return new Binary(kind, to_shape(a), to_shape(b), relu, threads);
           }),
           py::arg("kind"), py::arg("a_shape"), py::arg("b_shape"), py::kw_only(),
           py::arg("relu") = false, py::arg("threads") = py::none())
      .def_property_readonly("kind", &Binary::kind)
      .def_property_readonly("output_shape", [](const Binary& k) { return shape_tuple(k.a_shape()); })
      .def("run",
           [](Binary& k, py::handle a, py::handle b, py::object out) {
             auto av = in_view(a, "a"), bv = in_view(b, "b");
             return run_released(k.a_shape(), out, [&](FloatView o) { k.run(av, bv, o); });
           },
           py::arg("a"), py::arg("b"), py::arg("out") = py::none())
      .def("timeit",
           [](Binary& k, py::handle a, py::handle b, py::object out, int repeats, int warmup) {
             auto av = in_view(a, "a"), bv = in_view(b, "b");
             return time_released(k.a_shape(), out, [&](FloatView o) {
               return k.timeit(av, bv, o, repeats, warmup);
             });
           },
           py::arg("a"), py::arg("b"), py::arg("out") = py::none(), py::kw_only(),
           py::arg("repeats") = 100, py::arg("warmup") = 10, kTimeitDoc);

  py::class_<Transpose, UnaryKernel>(m, "Transpose",
                                     "Permute axes: output axis i is input axis perm[i].")
      .def(py::init([](const std::vector<int64_t>& input_shape, const std::vector<int64_t>& perm,
                       std::optional<int> threads) {
             return new Transpose(to_shape(input_shape), perm, threads);
           }),
           py::arg("input_shape"), py::arg("perm"), py::kw_only(), py::arg("threads") = py::none())
      .def_property_readonly("perm", &Transpose::perm);

  py::class_<TrilFlatten, Kernel>(m, "TrilFlatten",
                                  "(B, n, n) -> (B, n*(n-1)/2): the strictly lower triangle, "
                                  "row by row (DLRM's interaction gather).")
      .def(py::init([](const std::vector<int64_t>& input_shape, std::optional<int> threads) {
             return new TrilFlatten(to_shape(input_shape), threads);
           }),
           py::arg("input_shape"), py::kw_only(), py::arg("threads") = py::none())
      .def_property_readonly("output_shape",
                             [](const TrilFlatten& k) { return shape_tuple(k.output_shape()); })
      .def("run",
           [](TrilFlatten& k, py::handle x, py::object out) {
             auto xv = in_view(x, "x");
             return run_released(k.output_shape(), out, [&](FloatView o) { k.run(xv, o); });
           },
           py::arg("x"), py::arg("out") = py::none())
      .def("timeit",
           [](TrilFlatten& k, py::handle x, py::object out, int repeats, int warmup) {
             auto xv = in_view(x, "x");
             return time_released(k.output_shape(), out, [&](FloatView o) {
               return k.timeit(xv, o, repeats, warmup);
             });
           },
           py::arg("x"), py::arg("out") = py::none(), py::kw_only(), py::arg("repeats") = 100,
           py::arg("warmup") = 10, kTimeitDoc);

  py::class_<Concat, Kernel>(m, "Concat", "Concatenation of several inputs along `axis`.")
      .def(py::init([](const std::vector<std::vector<int64_t>>& shapes, int axis,
                       std::optional<int> threads) {
             std::vector<Shape> s;
             for (const auto& v : shapes) s.push_back(to_shape(v));
             return new Concat(std::move(s), axis, threads);
           }),
           py::arg("input_shapes"), py::kw_only(), py::arg("axis") = 1,
           py::arg("threads") = py::none())
      .def_property_readonly("output_shape", [](const Concat& k) { return shape_tuple(k.output_shape()); })
      .def("run",
           [](Concat& k, const py::sequence& xs, py::object out) {
             auto views = in_views(xs, "xs");
             return run_released(k.output_shape(), out, [&](FloatView o) { k.run(views, o); });
           },
           py::arg("xs"), py::arg("out") = py::none())
      .def("timeit",
           [](Concat& k, const py::sequence& xs, py::object out, int repeats, int warmup) {
             auto views = in_views(xs, "xs");
             return time_released(k.output_shape(), out, [&](FloatView o) {
               return k.timeit(views, o, repeats, warmup);
             });
           },
           py::arg("xs"), py::arg("out") = py::none(), py::kw_only(), py::arg("repeats") = 100,
           py::arg("warmup") = 10, kTimeitDoc);

  py::class_<BatchNorm, Kernel>(m, "BatchNorm",
                        "Inference batch normalisation with given statistics, channels on "
                        "axis 1. out may be x.")
      .def(py::init([](const std::vector<int64_t>& shape, float eps, std::optional<int> threads) {
             return new BatchNorm(to_shape(shape), eps, threads);
           }),
           py::arg("shape"), py::kw_only(), py::arg("eps") = 1e-5f,
           py::arg("threads") = py::none())
      .def_property_readonly("output_shape", [](const BatchNorm& k) { return shape_tuple(k.shape()); })
      .def("run",
           [](BatchNorm& k, py::handle x, py::handle mean, py::handle var, py::handle scale,
              py::handle shift, py::object out) {
             auto xv = in_view(x, "x"), mv = in_view(mean, "mean"), vv = in_view(var, "var"),
                  sv = in_view(scale, "scale"), hv = in_view(shift, "shift");
             return run_released(k.shape(), out,
                                 [&](FloatView o) { k.run(xv, mv, vv, sv, hv, o); });
           },
           py::arg("x"), py::arg("mean"), py::arg("var"), py::arg("scale"), py::arg("shift"),
           py::arg("out") = py::none())
      .def("timeit",
           [](BatchNorm& k, py::handle x, py::handle mean, py::handle var, py::handle scale,
              py::handle shift, py::object out, int repeats, int warmup) {
             auto xv = in_view(x, "x"), mv = in_view(mean, "mean"), vv = in_view(var, "var"),
                  sv = in_view(scale, "scale"), hv = in_view(shift, "shift");
             return time_released(k.shape(), out, [&](FloatView o) {
               return k.timeit(xv, mv, vv, sv, hv, o, repeats, warmup);
             });
           },
           py::arg("x"), py::arg("mean"), py::arg("var"), py::arg("scale"), py::arg("shift"),
           py::arg("out") = py::none(), py::kw_only(), py::arg("repeats") = 100,
           py::arg("warmup") = 10, kTimeitDoc);

  py::class_<LayerNorm, Kernel>(m, "LayerNorm",
                        "Layer normalisation over the last axis, then scale and shift. "
                        "out may be x.")
      .def(py::init([](const std::vector<int64_t>& shape, float eps, std::optional<int> threads) {
             return new LayerNorm(to_shape(shape), eps, threads);
           }),
           py::arg("shape"), py::kw_only(), py::arg("eps") = 1e-5f,
           py::arg("threads") = py::none())
      .def_property_readonly("output_shape", [](const LayerNorm& k) { return shape_tuple(k.shape()); })
      .def("run",
           [](LayerNorm& k, py::handle x, py::handle scale, py::handle shift, py::object out) {
             auto xv = in_view(x, "x"), sv = in_view(scale, "scale"), hv = in_view(shift, "shift");
             return run_released(k.shape(), out, [&](FloatView o) { k.run(xv, sv, hv, o); });
           },
           py::arg("x"), py::arg("scale"), py::arg("shift"), py::arg("out") = py::none())
      .def("timeit",
           [](LayerNorm& k, py::handle x, py::handle scale, py::handle shift, py::object out,
              int repeats, int warmup) {
             auto xv = in_view(x, "x"), sv = in_view(scale, "scale"), hv = in_view(shift, "shift");
             return time_released(k.shape(), out, [&](FloatView o) {
               return k.timeit(xv, sv, hv, o, repeats, warmup);
             });
           },
           py::arg("x"), py::arg("scale"), py::arg("shift"), py::arg("out") = py::none(),
           py::kw_only(), py::arg("repeats") = 100, py::arg("warmup") = 10, kTimeitDoc);
}

}  // namespace ppb::bind
