// The streamed one-row product's kernel built for avx512.
#include "pyparbench/math/streamed_linear_kernel.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
#define PPB_STREAMED_KERNEL streamed_kernel_avx512
#define PPB_STREAMED_VEC_FLOATS 16
#include "pyparbench/math/streamed_linear_kernel.inc"
