// The ops a compiled graph is made of (the vocabulary of pyparbench/graph.py,
// which documents their attributes), and the one place that converts
// between their names and kinds.
#pragma once

#include <string>

namespace ppb {

enum class OpKind {
  input,  // a graph input: its buffer is filled by the caller
  conv2d,
  linear,
  matmul,
  embedding_bag,
  eltwise,
  add,
  mul,
  concat,
  pool2d,
  global_avg_pool,
  batch_norm,
  layer_norm,
  softmax,
  reshape,  // its input's buffer under another shape
  transpose,
  tril_flatten,
  reorder,  // the same logical tensor in another memory layout (NodeSpec::input_layout -> layout)
  slice,    // rows [start, start + shape[0]) of its first input along axis 0: a view
  position_ids,  // int64 ids -> int64 padding-aware positions (ops/position_ids.hpp)
  rms_norm,      // over the last axis, then scale (ops/rms_norm.hpp)
  rotary,        // rotate-half rotary positions by cos / sin tables (ops/rotary.hpp)
  attention,     // scaled dot-product attention, GQA, causal / additive mask (ops/attention.hpp)
  glu,           // act(gate) * up (ops/glu.hpp)
  decode_attention,  // a decode step's attention over a past and new rows (ops/decode_attention.hpp)
  quantized_linear,  // int8 x · Wᵀ, float32 in and out (graph/quantized_nodes.hpp)
  quantized_conv2d,  // int8 2-D convolution, float32 in and out (graph/quantized_nodes.hpp)
  fake_quantize,     // a value rounded onto its int8 / uint8 grid (graph/quantized_nodes.hpp)
  // x · Wᵀ / 2-D convolution, x quantised per run from its own range
  // (graph/dynamic_quantized_nodes.hpp)
  dynamic_quantized_linear,
  dynamic_quantized_conv2d,
};

// The op's name in the graph IR ("conv2d", "global_avg_pool", ...).
const char* op_name(OpKind op);
// The inverse of op_name; std::invalid_argument naming `name` and the valid
// names.
OpKind parse_op(const std::string& name);

// Ops that compute nothing: their output is an input's buffer or the caller's.
bool is_alias(OpKind op);

}  // namespace ppb
