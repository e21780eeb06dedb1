// The direct kernels built for generic.
#include "pyparbench/ops/direct_kernels.hpp"

#include <cstdint>

#define PPB_DIRECT_VEC_BYTES 16
#define PPB_DIRECT_ISA "generic"
#define PPB_DIRECT_TABLE direct_kernels_generic
#include "pyparbench/ops/direct_kernels.inc"
