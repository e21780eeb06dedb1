// The streamed one-row product's kernel built for generic.
#include "pyparbench/math/streamed_linear_kernel.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#define PPB_STREAMED_KERNEL streamed_kernel_generic
#define PPB_STREAMED_VEC_FLOATS 4
#include "pyparbench/math/streamed_linear_kernel.inc"
