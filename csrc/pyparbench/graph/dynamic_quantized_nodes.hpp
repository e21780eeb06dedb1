// The dynamically quantized matrix nodes of a plan (ONNX's
// DynamicQuantizeLinear feeding MatMulInteger / ConvInteger, then the
// product's Cast, its Mul by x_scale · w_scale and the bias's Add), float32
// in and out. Each run takes its input's range as DynamicQuantizeLinear
// does (x_min = min(0, min x), x_max = max(0, max x), scale = (x_max -
// x_min) / 255, zero point = round(saturate(-x_min / scale)), half to
// even), quantises it to uint8, sums (q - zero point) · (w - w_zero_point)
// exactly in int32 and writes float(sum) · (scale · w_scale[o]) + bias[o],
// in the file's order of float operations. The linear node sums on
// oneDNN's int8 matmul (u8 x s8 -> s32, zero points compensated around it)
// where the library has int8 dot products (VNNI, AMX), on int16 loops
// otherwise and for the convolution.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/graph/node_spec.hpp"
#include "pyparbench/graph/quantized_nodes.hpp"

#include <vector>

namespace ppb {

// Whether `op` is dynamic_quantized_linear or dynamic_quantized_conv2d.
bool is_dynamic_quantized_node(OpKind op);

// The call of node `s` reading ins[0] and writing `out` on `threads`
// threads; std::invalid_argument naming the node for a missing parameter,
// a weight or zero point that is no integer of int8 / uint8, or wrong shapes.
QuantizedNodeCall make_dynamic_quantized_call(const NodeSpec& s, const std::vector<Tensor>& ins,
                                              const Tensor& out, int threads);

}  // namespace ppb
