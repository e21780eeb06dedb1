#include "pyparbench/graph/op_kind.hpp"

#include "pyparbench/core/enum_names.hpp"

namespace ppb {

namespace {

constexpr std::pair<OpKind, const char*> kOpNames[] = {
    {OpKind::input, "input"},
    {OpKind::conv2d, "conv2d"},
    {OpKind::linear, "linear"},
    {OpKind::matmul, "matmul"},
    {OpKind::embedding_bag, "embedding_bag"},
    {OpKind::eltwise, "eltwise"},
    {OpKind::add, "add"},
    {OpKind::mul, "mul"},
    {OpKind::concat, "concat"},
    {OpKind::pool2d, "pool2d"},
    {OpKind::global_avg_pool, "global_avg_pool"},
    {OpKind::batch_norm, "batch_norm"},
    {OpKind::layer_norm, "layer_norm"},
    {OpKind::softmax, "softmax"},
    {OpKind::reshape, "reshape"},
    {OpKind::transpose, "transpose"},
    {OpKind::tril_flatten, "tril_flatten"},
    {OpKind::reorder, "reorder"},
    {OpKind::slice, "slice"},
    {OpKind::position_ids, "position_ids"},
    {OpKind::rms_norm, "rms_norm"},
    {OpKind::rotary, "rotary"},
    {OpKind::attention, "attention"},
    {OpKind::glu, "glu"},
    {OpKind::decode_attention, "decode_attention"},
    {OpKind::quantized_linear, "quantized_linear"},
    {OpKind::quantized_conv2d, "quantized_conv2d"},
    {OpKind::fake_quantize, "fake_quantize"},
    {OpKind::dynamic_quantized_linear, "dynamic_quantized_linear"},
    {OpKind::dynamic_quantized_conv2d, "dynamic_quantized_conv2d"},
};

}  // namespace

const char* op_name(OpKind op) { return enum_name(kOpNames, op); }

OpKind parse_op(const std::string& name) { return enum_value(kOpNames, "op", name); }

bool is_alias(OpKind op) {
  return op == OpKind::input || op == OpKind::reshape || op == OpKind::slice;
}

}  // namespace ppb
