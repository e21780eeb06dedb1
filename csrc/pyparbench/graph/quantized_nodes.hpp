// The int8 nodes of a plan: quantized_linear and quantized_conv2d quantise
// their float32 input with the node's activation scale and zero point, run
// the oneDNN int8 primitive (math/quantized.hpp: s8 weights converted once,
// when the kernel is prepared) and dequantise its output, which is first
// requantised with the output's scale and zero point where the node has
// them (a QuantizeLinear right after the op in a QDQ file); fake_quantize
// rounds a value (or the sum of two: a fused residual add) onto its
// quantisation grid (quantise, then dequantise). Rounding is half to even
// and saturating, as ONNX's QuantizeLinear. Where the plan keeps a value
// as its grid bytes (NodeSpec::int8, graph/passes/int8_values.py), a node
// reads those bytes as they are (a fake_quantize dequantises them) and
// writes its own without dequantising.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/graph/node_spec.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ppb {

// A prepared int8 node and the call that runs it on fixed buffers.
struct QuantizedNodeCall {
  std::shared_ptr<void> state;  // the kernel and the node's scratch buffers
  std::function<void()> fn;
  std::string implementation;   // oneDNN's (empty for fake_quantize)
};

// Whether `op` is one of the int8 nodes.
bool is_quantized_node(OpKind op);

// The call of int8 node `s` reading ins[0] and writing `out` on `threads`
// threads; std::invalid_argument naming the node for a missing parameter,
// a bad type, scale or zero point, or wrong shapes.
QuantizedNodeCall make_quantized_node_call(const NodeSpec& s, const std::vector<Tensor>& ins,
                                           const Tensor& out, int threads);

// The call of max pool2d node `s` on grid bytes, channels-last, in and out
// (graph/passes/int8_values.py): the largest byte of each window is its
// largest value, the scale being positive; padding never wins.
// std::invalid_argument naming the node for another kind, layout or type.
QuantizedNodeCall make_int8_max_pool_call(const NodeSpec& s, const std::vector<Tensor>& ins,
                                          const Tensor& out, int threads);

}  // namespace ppb
