// The exact integer matrix product of u8 rows and s8 weights, y (m, n) =
// x (m, k) · Wᵀ summed in int32, as one oneDNN int8 matmul with no scales
// and no zero points: the building block of a node that compensates its zero
// points itself and wants the sums bit for bit (the dynamically quantized
// linear node). The weights arrive as (n, k), PyTorch's layout, and are
// reordered once into the layout the matmul picked.
//
// Exact only where the library multiplies on int8 dot-product instructions
// (native(): VNNI, AMX, Arm's SDOT): without them oneDNN pairs vpmaddubsw
// products in int16, which saturates for full-range s8 weights.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/ops/primitive_kernel.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace ppb {

class Int8Product : public PrimitiveKernel {
 public:
  // Throws std::invalid_argument naming a size < 1.
  Int8Product(int64_t m, int64_t n, int64_t k, std::optional<int> threads);

  // oneDNN's implementation name, and whether it multiplies on int8
  // dot-product instructions (dnnl_compat.hpp says how that is decided).
  const std::string& implementation() const { return implementation_; }
  bool native() const;

  // Copies the (n, k) s8 weights, row-major, into the primitive's layout.
  void set_weights(const int8_t* weight);
  // out (m, n) = x (m, k) · Wᵀ, both row-major; std::invalid_argument before
  // set_weights().
  void run(const uint8_t* x, int32_t* out);

 private:
  int64_t m_, n_, k_;
  dnnl::memory::desc user_weights_md_;
  std::string implementation_;
  bool has_weights_ = false;
};

}  // namespace ppb
