// The streamed one-row product's kernel built for avx2.
#include "pyparbench/math/streamed_linear_kernel.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#pragma GCC target("avx2,fma")
#define PPB_STREAMED_KERNEL streamed_kernel_avx2
#define PPB_STREAMED_VEC_FLOATS 8
#include "pyparbench/math/streamed_linear_kernel.inc"
