// One node of a compiled graph, as the Python Graph IR describes it
// (pyparbench/graph.py lists the op vocabulary and attribute meanings).
#pragma once

#include "pyparbench/core/knobs.hpp"
#include "pyparbench/core/tensor.hpp"
#include "pyparbench/graph/op_kind.hpp"
#include "pyparbench/ops/activation_layout.hpp"

#include <array>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace ppb {

// A parameter array owned by the caller (the Python graph keeps it alive).
struct ParamArray {
  const float* data = nullptr;
  Shape shape;

  // A view whose dimensions borrow this array's shape.
  ConstFloatView view() const { return {data, shape}; }
};

struct NodeSpec {
  OpKind op = OpKind::input;
  std::string name;
  std::vector<int> inputs;  // indices of earlier nodes
  Shape shape;              // output
  bool int64 = false;       // output holds int64 indices (an input node, position_ids)
  // Output holds bf16 (a reorder converting fp32 into bf16 for the bf16
  // matrix nodes that read it, or a bf16 conv2d without a residual that only
  // they read: pyparbench/graph/passes/precision.py).
  bool bf16 = false;
  // conv2d / linear / matmul: bf16 multiplies bf16 activations (its first
  // input, and a matmul's second, are bf16 nodes) by weights converted to
  // bf16 when the kernel is prepared, accumulating in fp32 and writing fp32
  // (bf16 for a conv2d marked bf16).
  Precision precision = Precision::fp32;
  // Output holds uint8 / int8 values on the node's own grid, one byte each
  // (graph/passes/int8_values.py): an int8 node's requantised output (its
  // type: mode) or a fake_quantize's (its type: kind), read only by int8
  // nodes, which take the bytes as they are.
  bool int8 = false;
  // Per input, the type of the grid bytes it holds ("uint8" / "int8"), empty
  // for a float32 input. Set by the plan from its inputs' element types.
  std::vector<std::string> int8_inputs;
  // Attributes; each op reads the ones it has.
  std::string kind;  // eltwise kind, pool kind; an int8 node's input type (uint8 / int8);
                     // an embedding bag's table: "" (float32) or "byte_rowwise"
  std::string mode;  // embedding_bag sum / mean; an int8 node's output (float32 / uint8 / int8)
  std::array<int64_t, 2> kernel{1, 1}, stride{1, 1}, dilation{1, 1};
  std::array<int64_t, 4> padding{0, 0, 0, 0};  // top, bottom, left, right
  int64_t groups = 1;
  int64_t start = 0;  // slice: the first row it views along axis 0
  int64_t pad_id = 0, offset = 0;  // position_ids: the padding id, the first position
  int axis = 1;
  float eps = 1e-5f;
  bool relu = false, trans_b = false, ceil_mode = false, count_include_pad = true;
  bool causal = false;  // attention: each query sees the keys up to its own position
  float scale = 1.0f;   // attention: the factor of q k^T
  float causal_fill = 0.0f;  // attention: the score of a key causal masking hides
  // A fused eltwise activation of conv2d / linear / matmul (an eltwise kind,
  // empty for none). A conv2d with a second input adds it to its result
  // before the activation (a fused residual add).
  std::string activation;
  // How the node's 4-D activations are stored (activation_layout.hpp); shape
  // stays logical NCHW, and global_avg_pool's output is plain. input_layout
  // is its first input's: a reorder's source, the plain input a blocked
  // graph's first convolution reads; else the same as layout.
  ActLayout layout = ActLayout::nchw;
  ActLayout input_layout = ActLayout::nchw;
  // >= 0: the output is written in place into the buffer of input `inplace`
  // (that input is dead once this node has run).
  int inplace = -1;
  // conv2d: run as im2col rows and one matmul where that is faster than
  // oneDNN's convolution (make_conv2d's lower_to_gemm).
  bool im2col = false;
  std::vector<int64_t> perm;
  // decode_attention (5) / rotary (1): the input holding the current length
  // of a cache kept across runs (int64, shape (1,)), read when the node runs;
  // -1 for none. Set by the plan from its inputs' element types.
  int length_input = -1;
  // rotary (1): the int64 (B, S) positions of its rows, read when it runs
  // (the tables computed from them); -1 for none. Set by the plan.
  int positions_input = -1;
  std::map<std::string, ParamArray> params;  // weight, bias, table, mean, var, scale, shift
};

// Bytes per element of the node's output (8 int64, 2 bf16, 1 int8, 4 fp32).
inline size_t element_bytes(const NodeSpec& s) {
  return s.int64 ? 8 : s.bf16 ? 2 : s.int8 ? 1 : 4;
}

// The type of an int8 node's bytes ("uint8" / "int8"): a fake_quantize's
// grid is its kind, an int8 matrix node's output its mode.
inline const std::string& int8_type(const NodeSpec& s) {
  return s.op == OpKind::fake_quantize ? s.kind : s.mode;
}

// Whether input `i` of `s` is read as bf16 (a bf16 matrix node's activations).
inline bool reads_bf16(const NodeSpec& s, size_t i) {
  return s.precision == Precision::bf16 && (i == 0 || (s.op == OpKind::matmul && i == 1));
}

// How an error names node `s`: "node 'NAME' (op)".
inline std::string node_where(const NodeSpec& s) {
  return "node '" + s.name + "' (" + op_name(s.op) + ")";
}

// Node `s`'s parameter `name`; std::invalid_argument naming both where it
// has none.
inline const ParamArray& required_param(const NodeSpec& s, const char* name) {
  auto it = s.params.find(name);
  if (it == s.params.end() || !it->second.data)
    throw std::invalid_argument(node_where(s) + " has no '" + name + "' parameter");
  return it->second;
}

}  // namespace ppb
