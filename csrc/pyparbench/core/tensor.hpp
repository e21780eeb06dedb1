// Dense, C-contiguous arrays that the core reads and writes but never owns.
// A view borrows its dimensions too (numpy's own shape array), so making one
// allocates nothing: a tiny kernel's run() stays within a few hundred ns. A
// Tensor keeps its own copy of the shape, so it can be stored and sliced (a
// plan's node buffers) and viewed for each run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ppb {

using Shape = std::vector<int64_t>;

// Borrowed dimensions: a pointer and a count.
struct Dims {
  const int64_t* data = nullptr;
  int ndim = 0;

  Dims() = default;
  Dims(const int64_t* d, int n) : data(d), ndim(n) {}
  Dims(const Shape& s) : data(s.data()), ndim(static_cast<int>(s.size())) {}  // NOLINT: implicit by design

  size_t size() const { return static_cast<size_t>(ndim); }
  bool empty() const { return ndim == 0; }
  int64_t operator[](size_t i) const { return data[i]; }
  Shape to_shape() const { return Shape(data, data + ndim); }
  int64_t elements() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= data[i];
    return n;
  }
  bool operator==(const Dims& o) const {
    if (ndim != o.ndim) return false;
    for (int i = 0; i < ndim; ++i)
      if (data[i] != o.data[i]) return false;
    return true;
  }
  bool operator!=(const Dims& o) const { return !(*this == o); }
};

template <typename T>
struct View {
  T* data = nullptr;
  Dims shape;
  bool present() const { return data != nullptr; }
  int64_t size() const { return shape.elements(); }
};

using FloatView = View<float>;
using ConstFloatView = View<const float>;
// bfloat16 elements as their raw bits (the upper half of an fp32), as
// ml_dtypes.bfloat16 arrays store them.
using ConstBf16View = View<const uint16_t>;
using Bf16View = View<uint16_t>;

// Indices arrive as int32 or int64 (numpy's and PyTorch's defaults differ).
struct IndexView {
  const void* data = nullptr;
  Dims shape;
  bool is64 = true;
  bool present() const { return data != nullptr; }
  int64_t size() const { return shape.elements(); }
};

// A buffer of float32 or int64 elements, with its shape.
struct Tensor {
  void* data = nullptr;
  Shape shape;

  // Float32 views whose dimensions borrow this tensor's shape.
  ConstFloatView input_view() const { return {static_cast<const float*>(data), shape}; }
  FloatView output_view() const { return {static_cast<float*>(data), shape}; }
};

}  // namespace ppb
