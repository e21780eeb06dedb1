// The int8 kernels (math/quantized.hpp): QuantizedLinear, QuantizedConv2d.
#include "bindings/pybind.hpp"
#include "pyparbench/math/quantized.hpp"

namespace ppb::bind {

namespace {

constexpr int kInt8 = 1;   // NPY_BYTE
constexpr int kUInt8 = 2;  // NPY_UBYTE
constexpr int kFloat32 = 11;

int type_num_of(QuantType t) {
  return t == QuantType::u8 ? kUInt8 : t == QuantType::s8 ? kInt8 : kFloat32;
}

// A C-contiguous numpy array of type `t`: its data and shape; TypeError
// saying what is expected otherwise; ValueError for a read-only output.
std::pair<void*, Dims> typed_array(py::handle obj, const char* name, QuantType t, bool output) {
  const std::string expected = quant_type_name(t);
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(std::string(name) + " must be a numpy array of " + expected + ", got " +
                         std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  auto* a = py::detail::array_proxy(obj.ptr());
  if (py::detail::array_descriptor_proxy(a->descr)->type_num != type_num_of(t))
    throw py::type_error(std::string(name) + " must be " + expected + " (as the kernel was "
                         "prepared), got " + std::string(py::str(obj.attr("dtype"))));
  if ((a->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) == 0)
    throw py::type_error(std::string(name) +
                         " must be C-contiguous; copy it with np.ascontiguousarray(x)");
  if (output && (a->flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_) == 0)
    throw py::value_error(std::string(name) + " is read-only");
  return {a->data, Dims(reinterpret_cast<const int64_t*>(a->dimensions), a->nd)};
}

py::object output_for(const QuantizedKernel& k, py::object out) {
  if (!out.is_none()) return out;
  const Shape& s = k.output_shape();
  const std::vector<py::ssize_t> dims(s.begin(), s.end());
  switch (k.quantization().out_type) {
    case QuantType::u8: return py::array_t<uint8_t>(dims);
    case QuantType::s8: return py::array_t<int8_t>(dims);
    case QuantType::f32: break;
  }
  return py::array_t<float>(dims);
}

void set_weights(QuantizedKernel& k, py::handle weight, py::handle bias) {
  auto [wd, ws] = typed_array(weight, "weight", QuantType::s8, false);
  const View<const int8_t> wv{static_cast<const int8_t*>(wd), ws};
  const ConstFloatView bv = optional_in_view(bias, "bias");
  py::gil_scoped_release nogil;
  k.set_weights(wv, bv);
}

py::object run(QuantizedKernel& k, py::handle x, py::object out) {
  auto [xd, xs] = typed_array(x, "x", k.quantization().x_type, false);
  out = output_for(k, out);
  auto [od, os] = typed_array(out, "out", k.quantization().out_type, true);
  {
    py::gil_scoped_release nogil;
    k.run({static_cast<const uint8_t*>(xd), xs}, {static_cast<uint8_t*>(od), os});
  }
  return out;
}

py::array_t<double> timeit(QuantizedKernel& k, py::handle x, py::object out, int repeats,
                           int warmup) {
  auto [xd, xs] = typed_array(x, "x", k.quantization().x_type, false);
  out = output_for(k, out);
  auto [od, os] = typed_array(out, "out", k.quantization().out_type, true);
  std::vector<double> ns;
  {
    py::gil_scoped_release nogil;
    ns = k.timeit({static_cast<const uint8_t*>(xd), xs}, {static_cast<uint8_t*>(od), os},
                  repeats, warmup);
  }
  return as_array(std::move(ns));
}

QuantizedConfig quantized_config(const std::vector<float>& weight_scales,
                                 const std::string& x_dtype, float x_scale, int32_t x_zero_point,
                                 const std::string& out_dtype, float out_scale,
                                 int32_t out_zero_point, bool bias, bool relu) {
  QuantizedConfig q;
  q.x_type = parse_quant_type(x_dtype, "x_dtype");
  q.x_scale = x_scale;
  q.x_zero_point = x_zero_point;
  q.weight_scales = weight_scales;
  q.out_type = parse_quant_type(out_dtype, "out_dtype");
  q.out_scale = out_scale;
  q.out_zero_point = out_zero_point;
  q.bias = bias;
  q.relu = relu;
  return q;
}

constexpr const char* kQuantDoc = R"doc(

weight_scales: one per output channel (the weights are symmetric: no zero
point). x_dtype 'uint8' or 'int8', with x_scale and x_zero_point. out_dtype
'float32' (dequantised: acc * x_scale * weight_scales[oc] + bias) or
'uint8' / 'int8' (requantised: that value / out_scale + out_zero_point,
rounded to nearest even and saturated). relu acts on the rescaled value,
before the output zero point. The bias is float32, added after
dequantisation.)doc";

}  // namespace

void register_quantized_ops(py::module_& m) {
  py::class_<QuantizedKernel, Kernel>(m, "QuantizedKernel",
                                      "What the int8 kernels share (not created directly).")
      .def_property_readonly("implementation", &QuantizedKernel::implementation,
                             "oneDNN's implementation name (impl_info_str).")
      .def_property_readonly("native", &QuantizedKernel::native,
                             "Whether it runs int8 dot-product instructions (VNNI, AMX) rather "
                             "than the pairs of multiply-adds that stand in for them.")
      .def_property_readonly("has_weights", &QuantizedKernel::has_weights)
      .def_property_readonly("input_shape",
                             [](const QuantizedKernel& k) { return shape_tuple(k.input_shape()); })
      .def_property_readonly("output_shape",
                             [](const QuantizedKernel& k) { return shape_tuple(k.output_shape()); })
      .def_property_readonly("weight_shape",
                             [](const QuantizedKernel& k) { return shape_tuple(k.weight_shape()); })
      .def_property_readonly("x_dtype", [](const QuantizedKernel& k) {
        return quant_type_name(k.quantization().x_type);
      })
      .def_property_readonly("out_dtype", [](const QuantizedKernel& k) {
        return quant_type_name(k.quantization().out_type);
      })
      .def("set_weights", &set_weights, py::arg("weight"), py::arg("bias") = py::none(),
           "Copy the int8 weight and the float32 bias into the kernel, in oneDNN's layout.")
      .def("run", &run, py::arg("x"), py::arg("out") = py::none(),
           "Compute into `out` (allocated when None) and return it.")
      .def("timeit", &timeit, py::arg("x"), py::arg("out") = py::none(), py::kw_only(),
           py::arg("repeats") = 100, py::arg("warmup") = 10, kTimeitDoc);

  py::class_<QuantizedLinear, QuantizedKernel>(
      m, "QuantizedLinear",
      (std::string("Prepared int8 fully connected layer y = x·Wᵀ (+ bias) (+ ReLU): one oneDNN "
                    "matmul, W (n, k) int8 packed once by set_weights, x (m, k), s32 "
                    "accumulation.") + kQuantDoc).c_str())
      .def(py::init([](int64_t m, int64_t n, int64_t k, const std::vector<float>& weight_scales,
                       const std::string& x_dtype, float x_scale, int32_t x_zero_point,
                       const std::string& out_dtype, float out_scale, int32_t out_zero_point,
                       bool bias, bool relu, std::optional<int> threads) {
             return new QuantizedLinear(
                 m, n, k,
                 quantized_config(weight_scales, x_dtype, x_scale, x_zero_point, out_dtype,
                                  out_scale, out_zero_point, bias, relu),
                 threads);
           }),
           py::arg("m"), py::arg("n"), py::arg("k"), py::kw_only(), py::arg("weight_scales"),
           py::arg("x_dtype") = "uint8", py::arg("x_scale") = 1.f, py::arg("x_zero_point") = 0,
           py::arg("out_dtype") = "float32", py::arg("out_scale") = 1.f,
           py::arg("out_zero_point") = 0, py::arg("bias") = false, py::arg("relu") = false,
           py::arg("threads") = py::none())
      .def_property_readonly("flops", &QuantizedLinear::flops);

  py::class_<QuantizedConv2d, QuantizedKernel>(
      m, "QuantizedConv2d",
      (std::string("Prepared int8 2-D convolution (+ bias) (+ ReLU): one oneDNN convolution, "
                    "x NCHW (NHWC with nhwc=True) of `input_shape` (logical NCHW), weights "
                    "OIHW int8 reordered once by set_weights, s32 accumulation.") +
       kQuantDoc).c_str())
      .def(py::init([](const std::vector<int64_t>& input_shape, int64_t out_channels,
                       std::pair<int64_t, int64_t> kernel_size, std::pair<int64_t, int64_t> stride,
                       std::vector<int64_t> padding, std::pair<int64_t, int64_t> dilation,
                       int64_t groups, const std::vector<float>& weight_scales,
                       const std::string& x_dtype, float x_scale, int32_t x_zero_point,
                       const std::string& out_dtype, float out_scale, int32_t out_zero_point,
                       bool bias, bool relu, bool nhwc, std::optional<int> threads) {
             if (input_shape.size() != 4)
               throw py::value_error("input_shape must be (n, c, h, w)");
             if (padding.size() != 4)
               throw py::value_error("padding must be (top, bottom, left, right)");
             Conv2dConfig g;
             g.n = input_shape[0];
             g.c = input_shape[1];
             g.h = input_shape[2];
             g.w = input_shape[3];
             g.out_channels = out_channels;
             g.kh = kernel_size.first;
             g.kw = kernel_size.second;
             g.stride_h = stride.first;
             g.stride_w = stride.second;
             g.pad_top = padding[0];
             g.pad_bottom = padding[1];
             g.pad_left = padding[2];
             g.pad_right = padding[3];
             g.dilation_h = dilation.first;
             g.dilation_w = dilation.second;
             g.groups = groups;
             g.layout = nhwc ? ActLayout::nhwc : ActLayout::nchw;
             return new QuantizedConv2d(
                 g,
                 quantized_config(weight_scales, x_dtype, x_scale, x_zero_point, out_dtype,
                                  out_scale, out_zero_point, bias, relu),
                 threads);
           }),
           py::arg("input_shape"), py::arg("out_channels"), py::arg("kernel_size"),
           py::kw_only(), py::arg("stride") = std::pair<int64_t, int64_t>{1, 1},
           py::arg("padding") = std::vector<int64_t>{0, 0, 0, 0},
           py::arg("dilation") = std::pair<int64_t, int64_t>{1, 1}, py::arg("groups") = 1,
           py::arg("weight_scales"), py::arg("x_dtype") = "uint8", py::arg("x_scale") = 1.f,
           py::arg("x_zero_point") = 0, py::arg("out_dtype") = "float32",
           py::arg("out_scale") = 1.f, py::arg("out_zero_point") = 0, py::arg("bias") = false,
           py::arg("relu") = false, py::arg("nhwc") = false, py::arg("threads") = py::none())
      .def_property_readonly("flops", &QuantizedConv2d::flops);
}

}  // namespace ppb::bind
