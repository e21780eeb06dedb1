// How a node's 4-D activations (logical N, C, H, W) are stored: plain NCHW,
// channels-last NHWC, or oneDNN's blocked nChw8c / nChw16c (channels in
// blocks of 8 or 16 stored innermost, (N, C/b, H, W, b)). Blocked data must
// fill its blocks (C a multiple of b), so it takes exactly the bytes of the
// plain tensor and a batch row is still one contiguous slab.
#pragma once

#include "pyparbench/core/tensor.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <string>

namespace ppb {

enum class ActLayout { nchw, nhwc, nchw8c, nchw16c };

// "nchw", "nhwc", "nchw8c" or "nchw16c"; std::invalid_argument naming the
// value otherwise.
ActLayout parse_act_layout(const std::string& name);
const char* act_layout_name(ActLayout layout);
// Channels per block: 8 or 16 for the blocked layouts, 1 otherwise.
int64_t channel_block(ActLayout layout);
// The fp32 descriptor of logical NCHW dims `nchw` stored as `layout`;
// std::invalid_argument when blocked data would not fill its blocks.
dnnl::memory::desc act_md(const Shape& nchw, ActLayout layout,
                          dnnl::memory::data_type type = dnnl::memory::data_type::f32);
// The stored shape the kernels check: (N, H, W, C) for nhwc,
// (N, C/b, H, W, b) for blocked, `nchw` itself for plain or non-4-D data.
Shape stored_shape(const Shape& nchw, ActLayout layout);
// The layout oneDNN's own convolution picks for its activations when left
// free (format_tag::any) on this machine and oneDNN build: nchw8c / nchw16c
// where its direct kernels are the blocked ones (oneDNN 2.x on AVX2 /
// AVX-512), nhwc where they read channels-last (oneDNN 3.x brgconv), nchw
// otherwise. Asked once per process.
ActLayout preferred_conv_layout();

}  // namespace ppb
