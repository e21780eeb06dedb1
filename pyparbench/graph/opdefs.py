"""The op vocabulary of the graph IR, listed once: op names, which ops are
heavy, element sizes, eltwise costs, and which attributes the native plan
takes. Every other module (IR, builder, analysis, reference, executor, the
framework runners) reads the ops from here."""

from __future__ import annotations

__all__ = ["DTYPE_BYTES", "ELTWISE_FLOPS", "FLOAT32_MIN", "FUSABLE_ACTIVATIONS", "GLU_KINDS",
           "HEAVY_OPS",
           "NATIVE_ATTRS",
           "NO_KERNEL_OPS", "OPS", "PASS_ATTRS"]

OPS = frozenset({
    "input", "constant", "conv2d", "linear", "matmul", "embedding_bag", "eltwise", "add", "mul",
    "concat", "pool2d", "global_avg_pool", "batch_norm", "layer_norm", "softmax",
    "reshape", "transpose", "tril_flatten", "reorder", "slice", "position_ids",
    "rms_norm", "rotary", "attention", "decode_attention", "glu",
    "quantized_linear", "quantized_conv2d", "fake_quantize",
    "dynamic_quantized_linear", "dynamic_quantized_conv2d",
})
HEAVY_OPS = frozenset({"conv2d", "linear", "matmul", "embedding_bag", "quantized_linear",
                       "quantized_conv2d", "dynamic_quantized_linear",
                       "dynamic_quantized_conv2d"})
# Ops the native plan runs no kernel for: its inputs and constants (buffers
# filled before the run), reshape and slice (views of their input's buffer).
NO_KERNEL_OPS = frozenset({"input", "constant", "reshape", "slice"})
# bfloat16: only the values the bf16 plan converts for its matrix nodes, or
# its convolutions write for them (graph.passes.precision); uint8 / int8: only int8 values kept as bytes
# between int8 nodes (graph.passes.int8_values); graph inputs are float32 or
# int64.
DTYPE_BYTES = {"float32": 4, "int64": 8, "bfloat16": 2, "uint8": 1, "int8": 1}
# Elementary operations per element, transcendental functions counted as one.
ELTWISE_FLOPS = {
    "relu": 1,      # max
    "relu6": 2,     # max, min
    "sigmoid": 4,   # negate, exp, add, divide
    "tanh": 5,      # (exp(2x) - 1) / (exp(2x) + 1): multiply, exp, subtract, add, divide
    "gelu": 5,      # 0.5 * x * (1 + erf(x / sqrt 2)): divide, erf, add, multiply, multiply
    "gelu_tanh": 9,  # 0.5 x (1 + tanh(c (x + 0.044715 x^3))): cube (2), 3 multiplies, 2 adds, tanh
    "swish": 5,     # x * sigmoid(x) (SiLU): the sigmoid's four, multiply
    "hardswish": 5,  # x * relu6(x + 3) / 6: add, max, min, multiply, multiply
}

# Activations a conv2d / linear / matmul can apply as a fused post-op.
FUSABLE_ACTIVATIONS = tuple(ELTWISE_FLOPS)

# Attributes only the optimisation passes (graph/passes/) set, any op may
# carry them, absent means the default: "activation" (a fused eltwise kind of
# conv2d / linear / matmul), "layout" ("nhwc": the node's 4-D data stored
# channels-last, "nchw8c" / "nchw16c": in oneDNN's blocked layouts; for a
# reorder, the layout of its output), "input_layout" (a reorder's source
# layout, or the plain "nchw" a blocked conv2d reads), "inplace" (the
# input whose buffer the output takes), "im2col" (a conv2d the native plan
# may run as gathered patches and one matmul: a kernel choice, values
# unchanged), "precision" ("bf16": a conv2d / linear / matmul that reads its
# activations in bf16, from nodes of dtype bfloat16: reorders, or bf16
# convolutions read only by matrix nodes).
PASS_ATTRS = ("activation", "layout", "input_layout", "inplace", "im2col", "precision")

# Attributes the native plan takes, per op (NodeSpec fields of the same names);
# the rest (reshape's shape, input's dtype, batch-norm's scale flag) are given
# by the node's output shape, dtype and parameters.
NATIVE_ATTRS: dict[str, tuple[str, ...]] = {
    "conv2d": ("stride", "padding", "dilation", "groups", "relu"),
    "pool2d": ("kind", "kernel", "stride", "padding", "ceil_mode", "count_include_pad"),
    "linear": ("relu",),
    "add": ("relu",),
    "matmul": ("trans_b",),
    "embedding_bag": ("mode",),
    "eltwise": ("kind",),
    "concat": ("axis",),
    "softmax": ("axis",),
    "batch_norm": ("eps",),
    "layer_norm": ("eps",),
    "transpose": ("perm",),
    "slice": ("start",),
    "position_ids": ("pad_id", "offset"),
    "rms_norm": ("eps",),
    "attention": ("causal", "scale", "causal_fill"),
    "decode_attention": ("scale", "causal_fill"),
    "glu": ("kind",),
    # int8 nodes: x_dtype is the NodeSpec's kind, out_dtype its mode (executor._spec).
    "quantized_conv2d": ("stride", "padding", "dilation", "groups", "relu"),
    "quantized_linear": ("relu",),
    "fake_quantize": (),
    "dynamic_quantized_conv2d": ("stride", "padding", "dilation", "groups"),
    "dynamic_quantized_linear": (),
}
# The float32 minimum: the score of a key an attention's causal masking
# hides (as exporters' masks write it).
FLOAT32_MIN = -3.4028234663852886e38
# The activations of a gated linear unit (glu: act(gate) * up).
GLU_KINDS = ("swish", "gelu", "gelu_tanh")
