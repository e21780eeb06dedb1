// A conv2d node's geometry as the convolution kernels take it: shared by
// the float node runner and the int8 node, which read it from the same
// NodeSpec fields.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/graph/node_spec.hpp"
#include "pyparbench/math/conv2d_op.hpp"

#include <cstdint>

namespace ppb {

// x: the NCHW input's shape, w: the OIHW weights', out_channels: O.
inline Conv2dConfig conv_geometry(const NodeSpec& s, const Shape& x, const Shape& w,
                                  int64_t out_channels) {
  Conv2dConfig c;
  c.n = x[0]; c.c = x[1]; c.h = x[2]; c.w = x[3];
  c.out_channels = out_channels;
  c.kh = w[2]; c.kw = w[3];
  c.stride_h = s.stride[0]; c.stride_w = s.stride[1];
  c.pad_top = s.padding[0]; c.pad_bottom = s.padding[1];
  c.pad_left = s.padding[2]; c.pad_right = s.padding[3];
  c.dilation_h = s.dilation[0]; c.dilation_w = s.dilation[1];
  c.groups = s.groups;
  return c;
}

}  // namespace ppb
