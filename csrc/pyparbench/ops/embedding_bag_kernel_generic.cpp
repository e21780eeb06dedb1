// The embedding-bag kernel built for generic.
#include "pyparbench/ops/embedding_bag_kernel.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#define PPB_BAG_KERNEL bag_kernel_generic
#include "pyparbench/ops/embedding_bag_kernel.inc"
