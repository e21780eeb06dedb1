// The byte lookup built for any CPU: one table read an element.
#include "pyparbench/ops/lookup_kernel.hpp"

#include <cstdint>
#include <cstring>

namespace ppb {

void lookup_kernel_generic(const LookupTable& t, const uint8_t* x, int64_t n, void* out) {
  // Local restrict pointers: a byte store may alias anything, so the table's
  // address would otherwise be reloaded every element.
  const uint8_t* __restrict in = x;
  if (!t.floats_out) {
    const uint8_t* __restrict table = t.bytes;
    uint8_t* __restrict q = static_cast<uint8_t*>(out);
    // Eight bytes a load and a store: the loop is bound by memory
    // operations, one table read a byte is left.
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
      uint64_t w, o = 0;
      std::memcpy(&w, in + k, 8);
      for (int b = 0; b < 64; b += 8) o |= uint64_t{table[(w >> b) & 0xff]} << b;
      std::memcpy(q + k, &o, 8);
    }
    for (; k < n; ++k) q[k] = table[in[k]];
    return;
  }
  const float* __restrict table = t.floats;
  float* __restrict v = static_cast<float*>(out);
  for (int64_t k = 0; k < n; ++k) v[k] = table[in[k]];
}

}  // namespace ppb
