// The math libraries other than oneDNN for the heavy ops (the study's Library
// layer): EigenGemm, BlasGemm, EigenConv2d, BlasConv2d, and the library
// names. Needs register_dense_ops first (the GemmOp / Conv2dOp bases).
#include "bindings/heavy_ops.hpp"
#include "pyparbench/math/blas_ops.hpp"
#include "pyparbench/math/eigen_ops.hpp"
#include "pyparbench/math/library.hpp"

namespace ppb::bind {

namespace {

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

void register_math_ops(py::module_& m) {
  py::tuple names(kMathLibraries.size());
  for (size_t i = 0; i < kMathLibraries.size(); ++i) names[i] = library_name(kMathLibraries[i]);
  m.attr("LIBRARIES") = names;
  m.def("parse_library",
        [](const std::string& name) { return std::string(library_name(parse_library(name))); },
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
