#include "pyparbench/graph/node_work.hpp"

namespace ppb {

namespace {

double elements(const Shape& s) {
  double n = 1;
  for (auto d : s) n *= static_cast<double>(d);
  return n;
}

// Vector operations per element of each activation (direct_vec_math.inc).
double activation_ops(const std::string& kind) {
  if (kind.empty()) return 0;
  if (kind == "relu") return 1;
  if (kind == "relu6") return 2;
  if (kind == "sigmoid") return 20;
  if (kind == "tanh" || kind == "gelu_tanh") return 25;
  if (kind == "gelu") return 35;
  if (kind == "swish") return 21;
  if (kind == "hardswish") return 5;
  return 25;
}

}  // namespace

NodeWork node_work(const NodeSpec& s, const std::vector<Shape>& inputs) {
  NodeWork w;
  if (is_alias(s.op) || s.op == OpKind::input) return w;
  const double out = elements(s.shape);
  for (size_t i = 0; i < inputs.size(); ++i) {
    // Embedding indices are 8 bytes; only the rows they gather are read.
    const bool indices = (s.op == OpKind::embedding_bag && i == 0) ||
                         (s.op == OpKind::rotary && i == 1 && inputs[i].size() == 2);
    w.bytes += elements(inputs[i]) * (indices ? 8 : 4);
  }
  w.bytes += out * 4;
  for (const auto& [name, p] : s.params)
    if (s.op != OpKind::embedding_bag) w.bytes += elements(p.shape) * 4;
  const double fused = out * (activation_ops(s.activation) + (s.relu ? 1 : 0));
  switch (s.op) {
    case OpKind::conv2d: {
      const auto it = s.params.find("weight");
      const double per_out = it == s.params.end() ? 1
                             : elements(it->second.shape) / static_cast<double>(
                                                                 it->second.shape[0]);
      w.flops = 2 * out * per_out + fused;
      break;
    }
    case OpKind::quantized_conv2d: {
      const auto it = s.params.find("weight");
      const double per_out = it == s.params.end() ? 1
                             : elements(it->second.shape) / static_cast<double>(
                                                                 it->second.shape[0]);
      w.flops = 2 * out * per_out + (s.relu ? out : 0);
      break;
    }
    case OpKind::quantized_linear:
      w.flops = 2 * out * static_cast<double>(inputs.empty() ? 1 : inputs[0].back()) +
                (s.relu ? out : 0);
      break;
    case OpKind::dynamic_quantized_linear:
      // The input's range and quantisation (4 per element) besides the sums.
      w.flops = 2 * out * static_cast<double>(inputs.empty() ? 1 : inputs[0].back()) +
                (inputs.empty() ? 0 : 4 * elements(inputs[0])) + 2 * out;
      break;
    case OpKind::dynamic_quantized_conv2d: {
      const auto it = s.params.find("weight");
      const double per_out = it == s.params.end() ? 1
                             : elements(it->second.shape) / static_cast<double>(
                                                                 it->second.shape[0]);
      w.flops = 2 * out * per_out + (inputs.empty() ? 0 : 4 * elements(inputs[0])) + 2 * out;
      break;
    }
    case OpKind::fake_quantize:
      w.flops = 4 * out;  // divide, round, add, clamp; the dequantisation's two left out
      break;
    case OpKind::linear:
    case OpKind::matmul:
      w.flops = 2 * out * static_cast<double>(inputs.empty() ? 1 : inputs[0].back()) + fused;
      break;
    case OpKind::embedding_bag:
      // The gathered rows: indices x dim floats read and summed (an 8-bit
      // rowwise table's rows: dim bytes and its scale and bias).
      w.bytes += inputs.empty() ? 0
                 : elements(inputs[0]) * (s.kind == "byte_rowwise"
                                              ? static_cast<double>(s.shape.back()) + 8
                                              : static_cast<double>(s.shape.back()) * 4);
      w.flops = inputs.empty() ? 0 : elements(inputs[0]) * static_cast<double>(s.shape.back());
      break;
    case OpKind::eltwise:
      w.flops = out * activation_ops(s.kind);
      break;
    case OpKind::add:
    case OpKind::mul:
      w.flops = out + fused;
      break;
    case OpKind::pool2d:
      w.flops = out * static_cast<double>(s.kernel[0] * s.kernel[1]);
      break;
    case OpKind::global_avg_pool:
      w.flops = inputs.empty() ? out : elements(inputs[0]);
      break;
    case OpKind::batch_norm:
      w.flops = 4 * out;
      break;
    case OpKind::layer_norm:
      w.flops = 8 * out;
      break;
    case OpKind::rms_norm:
      w.flops = 4 * out;  // square, sum, scale by the inverse, by the weight
      break;
    case OpKind::rotary:
      w.flops = 3 * out;
      // With (B, S) positions: per position and frequency, the angle, its
      // cos and sin, and the scaling of both.
      if (inputs.size() > 1 && inputs[1].size() == 2)
        w.flops += 5.0 * elements(inputs[1]) * static_cast<double>(s.shape.back() / 2);
      break;
    case OpKind::glu:
      w.flops = out * (activation_ops(s.kind) + 1);
      break;
    case OpKind::attention:
      // q k^T and p v: 2 Sk (D + Dv) per output row; the softmax's exp per score.
      if (inputs.size() >= 3) {
        const double rows = elements(s.shape) / static_cast<double>(s.shape.back());
        const double sk = static_cast<double>(inputs[1][2]);
        w.flops = rows * sk * (2.0 * static_cast<double>(inputs[0].back() + s.shape.back()) +
                               activation_ops("tanh"));
      }
      break;
    case OpKind::decode_attention:
      // As attention's, over the past and the new rows.
      if (inputs.size() >= 5) {
        const double rows = elements(s.shape) / static_cast<double>(s.shape.back());
        const double sk = static_cast<double>(inputs[3][2] + inputs[1][2]);
        w.flops = rows * sk * (2.0 * static_cast<double>(inputs[0].back() + s.shape.back()) +
                               activation_ops("tanh"));
      }
      break;
    case OpKind::softmax:
      w.flops = out * (activation_ops("tanh") + 3);  // an exp, the max, the sum, the scale
      break;
    default:
      break;  // data movement only
  }
  return w;
}

}  // namespace ppb
