// A non-owning view of a dense, C-contiguous array handed in by a caller.
#pragma once

#include <cstdint>
#include <vector>

namespace ppb {

using Shape = std::vector<int64_t>;

template <typename T>
struct View {
  T* data = nullptr;
  Shape shape;
  bool present() const { return data != nullptr; }
  int64_t size() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

using FloatView = View<float>;
using ConstFloatView = View<const float>;

// Indices arrive as int32 or int64 (numpy's and PyTorch's defaults differ).
struct IndexView {
  const void* data = nullptr;
  Shape shape;
  bool is64 = true;
  bool present() const { return data != nullptr; }
  int64_t size() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

}  // namespace ppb
