// im2col for NCHW convolution (Caffe's layout; TensorFlow's and PyTorch's
// non-oneDNN paths compute convolution the same way): an image's patches as
// a (C·KH·KW) x (OH·OW) row-major matrix, row (c, ki, kj) holding input
// channel c seen through kernel tap (ki, kj) at every output position, zero
// where the tap falls in the padding. Group g's rows are the contiguous
// block of its channels, so each group's product reads its own sub-matrix.
#pragma once

#include "pyparbench/math/conv2d_op.hpp"

namespace ppb {

// True when the column matrix is the image itself (1x1 kernel, stride 1,
// no padding), so no copy is needed.
bool im2col_is_identity(const Conv2dConfig& cfg);

// Fills rows [row_begin, row_end) of the column matrix of one image (C, H, W).
void im2col_rows(const Conv2dConfig& cfg, int64_t out_h, int64_t out_w, const float* image,
                 float* columns, int64_t row_begin, int64_t row_end);

// Channels-last im2col (groups 1): a batch's patches as an (N·OH·OW) x
// (KH·KW·C) row-major matrix, row (n, oy, ox) holding the C channels seen
// through each tap (ki, kj) in turn, zero where the tap falls in the
// padding: the left operand of one matmul with (KH·KW·C) x O weights.
// Fills rows [row_begin, row_end) from x (N, H, W, C).
void im2col_nhwc_rows(const Conv2dConfig& cfg, int64_t out_h, int64_t out_w, const float* x,
                      float* rows, int64_t row_begin, int64_t row_end);

}  // namespace ppb
