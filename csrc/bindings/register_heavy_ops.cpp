// The heavy ops (the study's Library layer): the interfaces GemmOp and
// Conv2dOp, which carry run(), timeit() and the properties, bound once for
// every math library; one class per library's implementation (Gemm, Conv2d:
// oneDNN; EigenGemm, EigenConv2d; BlasGemm, BlasConv2d), each with the same
// constructor; Linear, the graph's fully connected layer with packed
// weights, and StreamedLinear, its few-row form streaming weights packed in
// panels; and the library names.
#include "bindings/pybind.hpp"
#include "pyparbench/core/knobs.hpp"
#include "pyparbench/math/blas_ops.hpp"
#include "pyparbench/math/eigen_ops.hpp"
#include "pyparbench/math/gemm_conv2d.hpp"
#include "pyparbench/math/linear.hpp"
#include "pyparbench/math/onednn_ops.hpp"
#include "pyparbench/math/streamed_linear.hpp"
#include "pyparbench/math/streamed_linear_kernel.hpp"
#include "pyparbench/ops/kernel.hpp"

#include <array>

namespace ppb::bind {

namespace {

// The `library` property of GemmOp and Conv2dOp.
template <class Op>
const char* library_of(const Op& op) {
  return knob_name(op.library());
}
constexpr const char* kLibraryDoc = "The math library: 'onednn', 'eigen' or 'blas'.";

constexpr const char* kPrecisionDoc =
    "'fp32', or 'bf16': bf16 inputs and weights, products accumulated in fp32, fp32 output.";
constexpr const char* kEmulatedDoc =
    "Whether bf16 runs without bf16 dot-product instructions: oneDNN picked a reference "
    "implementation, or one for an ISA without them (False for fp32).";

// The inputs a kernel takes are float32 for fp32 and bfloat16 for bf16: each
// run() and timeit() reads them as its precision says (TypeError otherwise).
py::object gemm_run(GemmOp& g, py::handle a, py::handle b, py::handle bias, py::object out) {
  auto biasv = optional_in_view(bias, "bias");
  if (g.precision() == Precision::bf16) {
    auto av = bf16_in_view(a, "a"), bv = bf16_in_view(b, "b");
    return run_released(g.out_shape(), out, [&](FloatView o) { g.run_bf16(av, bv, biasv, o); });
  }
  auto av = in_view(a, "a"), bv = in_view(b, "b");
  return run_released(g.out_shape(), out, [&](FloatView o) { g.run(av, bv, biasv, o); });
}

py::array_t<double> gemm_timeit(GemmOp& g, py::handle a, py::handle b, py::handle bias,
                                py::object out, int repeats, int warmup) {
  auto biasv = optional_in_view(bias, "bias");
  if (g.precision() == Precision::bf16) {
    auto av = bf16_in_view(a, "a"), bv = bf16_in_view(b, "b");
    return time_released(g.out_shape(), out, [&](FloatView o) {
      return g.timeit_bf16(av, bv, biasv, o, repeats, warmup);
    });
  }
  auto av = in_view(a, "a"), bv = in_view(b, "b");
  return time_released(g.out_shape(), out,
                       [&](FloatView o) { return g.timeit(av, bv, biasv, o, repeats, warmup); });
}

py::object conv_run(Conv2dOp& c, py::handle x, py::object out) {
  if (c.precision() == Precision::bf16) {
    auto xv = bf16_in_view(x, "x");
    return run_released(c.output_shape(), out, [&](FloatView o) { c.run_bf16(xv, o); });
  }
  auto xv = in_view(x, "x");
  return run_released(c.output_shape(), out, [&](FloatView o) { c.run(xv, o); });
}

py::array_t<double> conv_timeit(Conv2dOp& c, py::handle x, py::object out, int repeats,
                                int warmup) {
  if (c.precision() == Precision::bf16) {
    auto xv = bf16_in_view(x, "x");
    return time_released(c.output_shape(), out,
                         [&](FloatView o) { return c.timeit_bf16(xv, o, repeats, warmup); });
  }
  auto xv = in_view(x, "x");
  return time_released(c.output_shape(), out,
                       [&](FloatView o) { return c.timeit(xv, o, repeats, warmup); });
}

// Weights are float32 or bfloat16 whatever the kernel's precision (the
// reorder into the kernel's layout converts them).
void conv_set_weights(Conv2dOp& c, py::handle weight, py::handle bias) {
  auto bv = optional_in_view(bias, "bias");
  if (is_bf16_array(weight)) {
    auto wv = bf16_in_view(weight, "weight");
    py::gil_scoped_release nogil;
    c.set_weights_bf16(wv, bv);
    return;
  }
  auto wv = in_view(weight, "weight");
  py::gil_scoped_release nogil;
  c.set_weights(wv, bv);
}

void linear_set_weights(py::object self, py::handle weight, py::handle bias) {
  Linear& l = self.cast<Linear&>();
  auto bv = optional_in_view(bias, "bias");
  if (is_bf16_array(weight)) {
    auto wv = bf16_in_view(weight, "weight");
    py::gil_scoped_release nogil;
    l.set_weights_bf16(wv, bv);
    return;
  }
  auto wv = in_view(weight, "weight");
  {
    py::gil_scoped_release nogil;
    l.set_weights(wv, bv);
  }
  // Read where it is from now on: the kernel keeps the array alive.
  if (l.weights_in_place()) py::detail::keep_alive_impl(self, weight);
}

py::object linear_run(Linear& l, py::handle x, py::object out) {
  const Shape out_shape{l.config().m, l.config().n};
  if (l.config().precision == Precision::bf16) {
    auto xv = bf16_in_view(x, "x");
    return run_released(out_shape, out, [&](FloatView o) { l.run_bf16(xv, o); });
  }
  auto xv = in_view(x, "x");
  return run_released(out_shape, out, [&](FloatView o) { l.run(xv, o); });
}

py::array_t<double> linear_timeit(Linear& l, py::handle x, py::object out, int repeats,
                                  int warmup) {
  const Shape out_shape{l.config().m, l.config().n};
  if (l.config().precision == Precision::bf16) {
    auto xv = bf16_in_view(x, "x");
    return time_released(out_shape, out,
                         [&](FloatView o) { return l.timeit_bf16(xv, o, repeats, warmup); });
  }
  auto xv = in_view(x, "x");
  return time_released(out_shape, out,
                       [&](FloatView o) { return l.timeit(xv, o, repeats, warmup); });
}

void streamed_set_weights(StreamedLinear& l, py::handle weight, py::handle bias) {
  auto wv = in_view(weight, "weight");
  auto bv = optional_in_view(bias, "bias");
  py::gil_scoped_release nogil;
  l.set_weights(wv, bv);
}

void streamed_borrow_weights(StreamedLinear& l, py::handle weight, py::handle bias) {
  auto wv = in_view(weight, "weight");
  auto bv = optional_in_view(bias, "bias");
  l.borrow_weights(wv, bv);
}

py::object streamed_run(StreamedLinear& l, py::handle x, py::object out) {
  auto xv = in_view(x, "x");
  return run_released({l.m(), l.n()}, out, [&](FloatView o) { l.run(xv, o); });
}

py::array_t<double> streamed_timeit(StreamedLinear& l, py::handle x, py::object out,
                                    int repeats, int warmup) {
  auto xv = in_view(x, "x");
  return time_released({l.m(), l.n()}, out,
                       [&](FloatView o) { return l.timeit(xv, o, repeats, warmup); });
}

// K(const GemmConfig&, std::optional<int> threads), as `name`.
template <class K>
py::class_<K, Kernel, GemmOp> bind_gemm_class(py::module_& m, const char* name, const char* doc) {
  py::class_<K, Kernel, GemmOp> cls(m, name, doc);
  cls.def(py::init([](int64_t m, int64_t n, int64_t k, int64_t batch, bool trans_a, bool trans_b,
                      bool bias, bool relu, std::optional<int> threads,
                      const std::string& precision) {
            GemmConfig c{batch, m, n, k, trans_a, trans_b, bias, relu};
            c.precision = parse_precision(precision);
            return new K(c, threads);
          }),
          py::arg("m"), py::arg("n"), py::arg("k"), py::kw_only(), py::arg("batch") = 0,
          py::arg("trans_a") = false, py::arg("trans_b") = false, py::arg("bias") = false,
          py::arg("relu") = false, py::arg("threads") = py::none(),
          py::arg("precision") = "fp32");
  return cls;
}

// K(const Conv2dConfig&, std::optional<int> threads), as `name`; input_shape
// is NCHW, or NHWC with nhwc=True.
template <class K>
py::class_<K, Kernel, Conv2dOp> bind_conv2d_class(py::module_& m, const char* name,
                                                  const char* doc) {
  py::class_<K, Kernel, Conv2dOp> cls(m, name, doc);
  cls.def(py::init([](std::array<int64_t, 4> input, int64_t out_channels,
                      std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                      std::array<int64_t, 4> padding, std::array<int64_t, 2> dilation,
                      int64_t groups, bool bias, bool relu, bool nhwc,
                      std::optional<int> threads, const std::string& precision) {
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
            c.groups = groups; c.bias = bias; c.relu = relu; c.layout = nhwc ? ActLayout::nhwc : ActLayout::nchw;
            c.precision = parse_precision(precision);
            return new K(c, threads);
          }),
          py::arg("input_shape"), py::arg("out_channels"), py::arg("kernel"), py::kw_only(),
          py::arg("stride") = std::array<int64_t, 2>{1, 1},
          py::arg("padding") = std::array<int64_t, 4>{0, 0, 0, 0},
          py::arg("dilation") = std::array<int64_t, 2>{1, 1}, py::arg("groups") = 1,
          py::arg("bias") = false, py::arg("relu") = false, py::arg("nhwc") = false,
          py::arg("threads") = py::none(), py::arg("precision") = "fp32");
  return cls;
}

constexpr const char* kGemmArgs = R"doc(
A is (m, k) (or (k, m) with trans_a), B is (k, n) (or (n, k) with trans_b),
with a leading batch dimension when batch >= 1; bias (length n) and ReLU as
in ``Gemm``, which takes and rejects exactly the same arguments.
)doc";

constexpr const char* kConvArgs = R"doc(
Activations must be NCHW (nhwc=True raises ValueError); otherwise the same
arguments as ``Conv2d`` (stride, padding (top, bottom, left, right),
dilation, groups, bias, ReLU), accepted and rejected alike. ``set_weights``
copies the OIHW weights, which are already the (O, I·KH·KW) matrix.
)doc";

std::string doc(const char* head, const char* args) { return std::string(head) + args; }

}  // namespace

void register_heavy_ops(py::module_& m) {
  py::tuple names(kMathLibraries.size());
  for (size_t i = 0; i < kMathLibraries.size(); ++i) names[i] = knob_name(kMathLibraries[i]);
  m.attr("LIBRARIES") = names;
  m.def("parse_library",
        [](const std::string& name) { return std::string(knob_name(parse_library(name))); },
        py::arg("name"), R"doc(
Check a math-library name.

Parameters
----------
name : str
    'onednn', 'eigen' or 'blas'.

Returns
-------
str
    The name.

Raises
------
ValueError
    For any other name (the message lists the valid ones).
)doc");

  py::class_<GemmOp>(m, "GemmOp", R"doc(
Interface of a prepared gemm, whichever math library computes it (``Gemm``:
oneDNN, ``EigenGemm``, ``BlasGemm``): the same shapes, checks, ``run()`` and
``timeit()`` for all.
)doc")
      .def_property_readonly("library", &library_of<GemmOp>, kLibraryDoc)
      .def_property_readonly("a_shape", [](const GemmOp& g) { return shape_tuple(g.a_shape()); })
      .def_property_readonly("b_shape", [](const GemmOp& g) { return shape_tuple(g.b_shape()); })
      .def_property_readonly("output_shape",
                             [](const GemmOp& g) { return shape_tuple(g.out_shape()); })
      // The name it had before every kernel said output_shape.
      .def_property_readonly("out_shape", [](const GemmOp& g) { return shape_tuple(g.out_shape()); })
      .def_property_readonly("flops", &GemmOp::flops)
      .def_property_readonly("precision",
                             [](const GemmOp& g) { return knob_name(g.precision()); },
                             kPrecisionDoc)
      .def_property_readonly("implementation", &GemmOp::implementation,
                             "What computes it: oneDNN's implementation name (impl_info_str), "
                             "or the library's name.")
      .def_property_readonly("emulated", &GemmOp::emulated, kEmulatedDoc)
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
      .def_property_readonly("library", &library_of<Conv2dOp>, kLibraryDoc)
      .def_property_readonly("input_shape", [](const Conv2dOp& c) { return shape_tuple(c.input_shape()); })
      .def_property_readonly("output_shape", [](const Conv2dOp& c) { return shape_tuple(c.output_shape()); })
      .def_property_readonly("weight_shape", [](const Conv2dOp& c) { return shape_tuple(c.weight_shape()); })
      .def_property_readonly("flops", &Conv2dOp::flops)
      .def_property_readonly("implementation", &Conv2dOp::implementation,
                             "What computes it: oneDNN's implementation name, or im2col+ "
                             "and the product's.")
      .def_property_readonly("has_weights", &Conv2dOp::has_weights)
      .def_property_readonly("precision",
                             [](const Conv2dOp& c) { return knob_name(c.precision()); },
                             kPrecisionDoc)
      .def_property_readonly("emulated", &Conv2dOp::emulated, kEmulatedDoc)
      .def("set_weights", &conv_set_weights, py::arg("weight"), py::arg("bias") = py::none(),
           "Copy the weights (OIHW; float32, or bfloat16 for the onednn library) and the "
           "float32 bias into the kernel, in the library's layout and precision.")
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

precision='bf16': A and B must be ``ml_dtypes.bfloat16`` arrays; the products
accumulate in fp32 and C (and the bias) are float32. ``implementation`` and
``emulated`` say what oneDNN picked and whether it lacks bf16 instructions.
The eigen and blas classes take precision='fp32' only (ValueError otherwise).
)doc");

  bind_conv2d_class<Conv2d>(m, "Conv2d", R"doc(
Prepared 2-D convolution in fp32: one oneDNN convolution primitive. Weights
(OIHW, I = in_channels / groups) are reordered once by ``set_weights`` into
the layout oneDNN picked; ``run()`` creates nothing.

padding is (top, bottom, left, right); dilation 1 means a dense kernel.
With nhwc=True activations are (N, H, W, C) arrays, else (N, C, H, W).

precision='bf16': x must be an ``ml_dtypes.bfloat16`` array, the weights
(float32 or bfloat16) are stored in bf16, the products accumulate in fp32 and
the output (and the bias) are float32. Only this class computes bf16; the
others take precision='fp32' only (ValueError otherwise).
)doc");

  bind_conv2d_class<GemmConv2d>(m, "GemmConv2d", R"doc(
Prepared 2-D convolution in fp32 lowered to a product: the batch's patches
gathered into an (N·OH·OW) x (KH·KW·C) matrix, then one oneDNN matmul with
the weights packed once by ``set_weights``. Channels-last activations
(nhwc=True) and groups=1 only (ValueError otherwise). The graph executor
runs a convolution this way where it is faster than ``Conv2d`` (the
``im2col`` pass); the arguments are ``Conv2d``'s.
)doc");

  py::class_<Linear, Kernel>(m, "Linear", R"doc(
Prepared fully connected layer y = x·Wᵀ (+ bias) (+ activation) in fp32 with
constant weights: one oneDNN matmul primitive, as the graph executor runs a
``linear`` node on the onednn library. W is (n, k), PyTorch's layout;
``set_weights`` reorders it once into the layout oneDNN picked (``Gemm``
takes B on every run and oneDNN packs it each time). x is (m, k).
activation is one of relu, relu6, sigmoid, tanh, gelu, gelu_tanh, swish, hardswish, or None.
precision='bf16': x must be an ``ml_dtypes.bfloat16`` array, W (float32 or
bfloat16) is stored in bf16, the products accumulate in fp32, y and the bias
are float32.
)doc")
      .def(py::init([](int64_t m, int64_t n, int64_t k, bool bias,
                       std::optional<std::string> activation, std::optional<int> threads,
                       const std::string& precision, bool weights_in_place) {
             LinearConfig c{m, n, k, bias, activation.value_or("")};
             c.precision = parse_precision(precision);
             c.weights_in_place = weights_in_place;
             return new Linear(c, threads);
           }),
           py::arg("m"), py::arg("n"), py::arg("k"), py::kw_only(), py::arg("bias") = false,
           py::arg("activation") = py::none(), py::arg("threads") = py::none(),
           py::arg("precision") = "fp32", py::arg("weights_in_place") = false)
      .def_property_readonly("flops", &Linear::flops)
      .def_property_readonly("has_weights", &Linear::has_weights)
      .def_property_readonly("precision",
                             [](const Linear& l) { return knob_name(l.config().precision); },
                             kPrecisionDoc)
      .def_property_readonly("implementation", &Linear::implementation,
                             "oneDNN's implementation name (impl_info_str).")
      .def_property_readonly("emulated", &Linear::emulated, kEmulatedDoc)
      .def_property_readonly("weights_in_place", &Linear::weights_in_place,
                             "Whether set_weights keeps (a reference to) the float32 weight "
                             "and reads it where it is: asked for with weights_in_place=True "
                             "and granted where oneDNN's matmul keeps weights plain anyway "
                             "(gemm:jit), the same results bit for bit.")
      .def_property_readonly("output_shape", [](const Linear& l) {
        return py::make_tuple(l.config().m, l.config().n);
      })
      .def_property_readonly("out_shape", [](const Linear& l) {  // the former name
        return py::make_tuple(l.config().m, l.config().n);
      })
      .def("set_weights", &linear_set_weights, py::arg("weight"), py::arg("bias") = py::none(),
           "Copy the weight (n, k; float32 or bfloat16) and the float32 bias into the kernel, "
           "in oneDNN's layout and the kernel's precision; where weights_in_place, keep the "
           "float32 weight and read it where it is.")
      .def("run", &linear_run, py::arg("x"), py::arg("out") = py::none(),
           "Compute into `out` (allocated when None) and return it.")
      .def("timeit", &linear_timeit,
           py::arg("x"), py::arg("out") = py::none(), py::kw_only(), py::arg("repeats") = 100,
           py::arg("warmup") = 10, kTimeitDoc);

  py::class_<StreamedLinear, Kernel>(m, "StreamedLinear", R"doc(
Prepared fully connected layer y = x·Wᵀ (+ bias) in fp32 for a few rows of x
(a decoder's step), as the graph executor runs a ``linear`` node of at most
four rows on the onednn library: ``set_weights`` packs W (n, k), PyTorch's
layout, into panels of 8 rows that a run streams once from memory, the
panels split between the threads in contiguous runs. x is (m, k).
)doc")
      .def(py::init([](int64_t m, int64_t n, int64_t k, bool bias, std::optional<int> threads) {
             return new StreamedLinear(m, n, k, bias, threads);
           }),
           py::arg("m"), py::arg("n"), py::arg("k"), py::kw_only(), py::arg("bias") = false,
           py::arg("threads") = py::none())
      .def_property_readonly("has_weights", &StreamedLinear::has_weights)
      .def_property_readonly("packed_bytes", &StreamedLinear::packed_bytes,
                             "Bytes of the packed weights (rows padded to 8, columns to 16).")
      .def_property_readonly("output_shape",
                             [](const StreamedLinear& l) { return py::make_tuple(l.m(), l.n()); })
      .def("set_weights", &streamed_set_weights, py::arg("weight"), py::arg("bias") = py::none(),
           "Pack the float32 weight (n, k) and copy the float32 bias (n).")
      .def("borrow_weights", &streamed_borrow_weights, py::arg("weight"),
           py::arg("bias") = py::none(), py::keep_alive<1, 2>(),
           "Read the float32 weight (n, k) where it is, with no copy (the same results, bit "
           "for bit, as set_weights), and copy the float32 bias (n). The kernel keeps the "
           "array alive; writing it changes later results.")
      .def("run", &streamed_run, py::arg("x"), py::arg("out") = py::none(),
           "Compute into `out` (allocated when None) and return it.")
      .def("timeit", &streamed_timeit, py::arg("x"), py::arg("out") = py::none(), py::kw_only(),
           py::arg("repeats") = 100, py::arg("warmup") = 10, kTimeitDoc);
  m.attr("STREAMED_MAX_ROWS") = kStreamedMaxRows;
  m.def("streamed_isa", [] { return std::string(streamed_kernels().isa()); },
        "The ISA of the kernel StreamedLinear runs use: 'avx512', 'avx2' or 'generic'.");
  m.def(
      "set_streamed_isa", [](const std::string& isa) { streamed_kernels().set(isa); },
      py::arg("isa"),
      "Runs of StreamedLinear (and of the plans' few-row linear nodes) use this ISA's kernel "
      "('avx512', 'avx2', 'generic'; 'auto': the widest this CPU runs); process-wide. "
      "ValueError for an ISA this CPU does not run.");

  static const std::string eigen_gemm = doc(R"doc(
Prepared C = A·B (+ bias) (+ ReLU) in fp32 through Eigen: a tensor contraction
on an Eigen ThreadPoolDevice whose pool (``threads`` threads) the kernel owns,
with bias and ReLU fused as an output kernel, as TensorFlow's non-oneDNN
MatMul computes it. A batch is one contraction per entry.
)doc", kGemmArgs);
  bind_gemm_class<EigenGemm>(m, "EigenGemm", eigen_gemm.c_str());

  static const std::string blas_gemm = doc(R"doc(
Prepared C = A·B (+ bias) (+ ReLU) in fp32 through the system OpenBLAS:
cblas_sgemm (one call per batch entry), then bias and ReLU in one pass.
OpenBLAS's thread count is process-wide: it is set to ``threads`` before
each call, so BLAS kernels with different counts run at once from several
threads compute correctly but each with whichever count was set last.
)doc", kGemmArgs);
  bind_gemm_class<BlasGemm>(m, "BlasGemm", blas_gemm.c_str());

  static const std::string eigen_conv = doc(R"doc(
Prepared 2-D convolution in fp32 through Eigen: im2col on the kernel's Eigen
ThreadPoolDevice, then one tensor contraction per image and group (bias and
ReLU fused), as TensorFlow's non-oneDNN Conv2D computes it.
)doc", kConvArgs);
  bind_conv2d_class<EigenConv2d>(m, "EigenConv2d", eigen_conv.c_str());

  static const std::string blas_conv = doc(R"doc(
Prepared 2-D convolution in fp32 through the system OpenBLAS: im2col on the
kernel's OpenMP threads, then one cblas_sgemm per image and group (bias and
ReLU in one pass after each). 1x1 convolutions with stride 1 and no padding
skip im2col. OpenBLAS's thread count is process-wide (see ``BlasGemm``).
)doc", kConvArgs);
  bind_conv2d_class<BlasConv2d>(m, "BlasConv2d", blas_conv.c_str());
}

}  // namespace ppb::bind
