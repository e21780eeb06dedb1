// The embedding-bag kernel built for generic.
#include "pyparbench/ops/embedding_bag_kernel.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#define PPB_BAG_KERNEL bag_kernel_generic
#define PPB_BAG_VEC_BYTES 16
#include "pyparbench/ops/embedding_bag_kernel.inc"
