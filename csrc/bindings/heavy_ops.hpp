// Python classes of the heavy ops' implementations (one per math library):
// the same constructor for every library, on top of the interface classes
// GemmOp / Conv2dOp, which carry run(), timeit() and the properties.
#pragma once

#include "bindings/pybind.hpp"
#include "pyparbench/core/kernel.hpp"
#include "pyparbench/math/conv2d_op.hpp"
#include "pyparbench/math/gemm_op.hpp"

#include <array>

namespace ppb::bind {

// K(const GemmConfig&, std::optional<int> threads), as `name`.
template <class K>
py::class_<K, Kernel, GemmOp> bind_gemm_class(py::module_& m, const char* name, const char* doc) {
  py::class_<K, Kernel, GemmOp> cls(m, name, doc);
  cls.def(py::init([](int64_t m, int64_t n, int64_t k, int64_t batch, bool trans_a, bool trans_b,
                      bool bias, bool relu, std::optional<int> threads) {
            return new K(GemmConfig{batch, m, n, k, trans_a, trans_b, bias, relu}, threads);
          }),
          py::arg("m"), py::arg("n"), py::arg("k"), py::kw_only(), py::arg("batch") = 0,
          py::arg("trans_a") = false, py::arg("trans_b") = false, py::arg("bias") = false,
          py::arg("relu") = false, py::arg("threads") = py::none());
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
            return new K(c, threads);
          }),
          py::arg("input_shape"), py::arg("out_channels"), py::arg("kernel"), py::kw_only(),
          py::arg("stride") = std::array<int64_t, 2>{1, 1},
          py::arg("padding") = std::array<int64_t, 4>{0, 0, 0, 0},
          py::arg("dilation") = std::array<int64_t, 2>{1, 1}, py::arg("groups") = 1,
          py::arg("bias") = false, py::arg("relu") = false, py::arg("nhwc") = false,
          py::arg("threads") = py::none());
  return cls;
}

}  // namespace ppb::bind
