#include "bindings/pybind.hpp"

namespace ppb::bind {

namespace {

// numpy's type numbers (stable ABI values).
constexpr int kFloat32 = 11;  // NPY_FLOAT
constexpr int kInt32 = 5;     // NPY_INT
constexpr int kInt64 = 7;     // NPY_LONG on LP64 Linux
constexpr int kLongLong = 9;  // NPY_LONGLONG, also 64-bit here

struct RawArray {
  void* data;
  Dims shape;
  int type_num;
  bool c_contiguous;
  bool writeable;
};

RawArray raw(py::handle obj, const char* name, const char* expected) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(std::string(name) + " must be a numpy array of " + expected + ", got " +
                         std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  auto* a = py::detail::array_proxy(obj.ptr());
  auto* d = py::detail::array_descriptor_proxy(a->descr);
  static_assert(sizeof(*a->dimensions) == sizeof(int64_t), "numpy dims must be 64-bit");
  RawArray r{a->data, Dims(reinterpret_cast<const int64_t*>(a->dimensions), a->nd), d->type_num,
             (a->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) != 0,
             (a->flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_) != 0};
  return r;
}

std::string dtype_of(py::handle obj) { return py::str(obj.attr("dtype")); }

RawArray float_array(py::handle obj, const char* name) {
  RawArray r = raw(obj, name, "float32");
  if (r.type_num != kFloat32)
    throw py::type_error(std::string(name) + " must be float32, got " + dtype_of(obj) +
                         "; convert with np.asarray(x, dtype=np.float32)");
  if (!r.c_contiguous)
    throw py::type_error(std::string(name) +
                         " must be C-contiguous; copy it with np.ascontiguousarray(x)");
  return r;
}

}  // namespace

ConstFloatView in_view(py::handle obj, const char* name) {
  RawArray r = float_array(obj, name);
  return {static_cast<const float*>(r.data), r.shape};
}

bool is_bf16_array(py::handle obj) {
  if (!py::isinstance<py::array>(obj)) return false;
  // ml_dtypes registers bfloat16 as a numpy user type; its name tells it apart
  // from the other 2-byte user types (float16 is built in).
  const py::object dtype = obj.attr("dtype");
  return dtype.attr("itemsize").cast<int>() == 2 &&
         py::str(dtype.attr("name")).cast<std::string>() == "bfloat16";
}

ConstBf16View bf16_in_view(py::handle obj, const char* name) {
  RawArray r = raw(obj, name, "ml_dtypes.bfloat16");
  if (!is_bf16_array(obj))
    throw py::type_error(std::string(name) + " must be bfloat16 (the kernel was prepared with "
                         "precision 'bf16'), got " + dtype_of(obj) +
                         "; convert with np.asarray(x, dtype=ml_dtypes.bfloat16)");
  if (!r.c_contiguous)
    throw py::type_error(std::string(name) +
                         " must be C-contiguous; copy it with np.ascontiguousarray(x)");
  return {static_cast<const uint16_t*>(r.data), r.shape};
}

ConstFloatView optional_in_view(py::handle obj, const char* name) {
  if (obj.is_none()) return {};
  return in_view(obj, name);
}

FloatView out_view(py::handle obj, const char* name) {
  RawArray r = float_array(obj, name);
  if (!r.writeable) throw py::value_error(std::string(name) + " is read-only");
  return {static_cast<float*>(r.data), r.shape};
}

IndexView index_view(py::handle obj, const char* name) {
  if (obj.is_none()) return {};
  RawArray r = raw(obj, name, "int32 or int64");
  IndexView v;
  if (r.type_num == kInt64 || r.type_num == kLongLong)
    v.is64 = true;
  else if (r.type_num == kInt32)
    v.is64 = false;
  else
    throw py::type_error(std::string(name) + " must be int32 or int64, got " + dtype_of(obj) +
                         "; convert with np.asarray(x, dtype=np.int64)");
  if (!r.c_contiguous)
    throw py::type_error(std::string(name) +
                         " must be C-contiguous; copy it with np.ascontiguousarray(x)");
  v.data = r.data;
  v.shape = r.shape;
  return v;
}

bool is_kernel_float_array(py::handle obj, int ndim) {
  if (!py::isinstance<py::array>(obj)) return false;
  auto* a = py::detail::array_proxy(obj.ptr());
  return py::detail::array_descriptor_proxy(a->descr)->type_num == kFloat32 &&
         (a->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) != 0 &&
         (ndim < 0 || a->nd == ndim);
}

int kernel_index_bits(py::handle obj) {
  if (!py::isinstance<py::array>(obj)) return 0;
  auto* a = py::detail::array_proxy(obj.ptr());
  if ((a->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) == 0) return 0;
  const int t = py::detail::array_descriptor_proxy(a->descr)->type_num;
  return t == kInt64 || t == kLongLong ? 64 : t == kInt32 ? 32 : 0;
}

std::vector<ConstFloatView> in_views(const py::sequence& seq, const char* name) {
  std::vector<ConstFloatView> out;
  out.reserve(seq.size());
  for (size_t i = 0; i < seq.size(); ++i) {
    const std::string item = std::string(name) + "[" + std::to_string(i) + "]";
    out.push_back(in_view(seq[i], item.c_str()));
  }
  return out;
}

py::array_t<double> as_array(std::vector<double>&& v) {
  py::array_t<double> a(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

py::array new_output(const Shape& s) {
  return py::array_t<float>(std::vector<py::ssize_t>(s.begin(), s.end()));
}

py::tuple shape_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) t[i] = s[i];
  return t;
}

}  // namespace ppb::bind
