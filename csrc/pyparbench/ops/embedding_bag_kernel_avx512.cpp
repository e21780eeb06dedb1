// The embedding-bag kernel built for avx512.
#include "pyparbench/ops/embedding_bag_kernel.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
#define PPB_BAG_KERNEL bag_kernel_avx512
#define PPB_BAG_VEC_BYTES 64
#include "pyparbench/ops/embedding_bag_kernel.inc"
