// The embedding-bag kernel built for avx2.
#include "pyparbench/ops/embedding_bag_kernel.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#pragma GCC target("avx2,fma")
#define PPB_BAG_KERNEL bag_kernel_avx2
#define PPB_BAG_VEC_BYTES 32
#include "pyparbench/ops/embedding_bag_kernel.inc"
