"""The converter of each ONNX op type that maps onto the IR; an op type
missing here is listed as unsupported."""

from __future__ import annotations

from collections.abc import Mapping

from pyparbench.graph.onnx.convert_attention import (
    attention,
    rotary_embedding,
    rotary_positions,
)
from pyparbench.graph.onnx.convert_conv_pool import conv, global_pool, pool
from pyparbench.graph.onnx.convert_elementwise import (
    binary,
    clip,
    eltwise,
    hard_sigmoid,
    negate,
    pass_through,
)
from pyparbench.graph.onnx.convert_dynamic_quant import DYNAMIC_CONVERTERS
from pyparbench.graph.onnx.convert_gather import gather
from pyparbench.graph.onnx.convert_linear import gemm, matmul
from pyparbench.graph.onnx.convert_qoperator import QOPERATOR_CONVERTERS, QOPERATOR_READERS
from pyparbench.graph.onnx.convert_quantized import QDQ_CONVERTERS
from pyparbench.graph.onnx.convert_normalisation import batch_norm, layer_norm, rms_norm, softmax
from pyparbench.graph.onnx.convert_reduce import reduce_mean
from pyparbench.graph.onnx.rotary import POSITIONS_OP
from pyparbench.graph.onnx.convert_shape import (
    concat,
    pad,
    slice_,
    split,
    transpose,
    view,
)
from pyparbench.graph.onnx.importer import Converter

__all__ = ["CONVERTERS", "INTEGER_READERS"]

CONVERTERS: Mapping[str, Converter] = {
    "Conv": conv,
    "Gemm": gemm,
    "MatMul": matmul,
    "Add": binary,
    "Sub": binary,
    "Mul": binary,
    "Div": binary,
    "Neg": negate,
    "Relu": eltwise("relu"),
    "Sigmoid": eltwise("sigmoid"),
    "Tanh": eltwise("tanh"),
    "Gelu": eltwise("gelu"),
    "Clip": clip,
    "HardSigmoid": hard_sigmoid,
    "HardSwish": eltwise("hardswish"),
    "Swish": eltwise("swish"),
    "MaxPool": pool,
    "AveragePool": pool,
    "GlobalAveragePool": global_pool,
    "GlobalMaxPool": global_pool,
    "ReduceMean": reduce_mean,
    "BatchNormalization": batch_norm,
    "LayerNormalization": layer_norm,
    "RMSNormalization": rms_norm,
    "Softmax": softmax,
    "Attention": attention,
    "RotaryEmbedding": rotary_embedding,
    POSITIONS_OP: rotary_positions,
    "Concat": concat,
    "Reshape": view,
    "Flatten": view,
    "Squeeze": view,
    "Unsqueeze": view,
    "Transpose": transpose,
    "Split": split,
    "Slice": slice_,
    "Pad": pad,
    "Gather": gather,
    "Identity": pass_through,
    "Dropout": pass_through,
    "Cast": pass_through,
    # Conv, MatMul and Gemm again: int8 nodes where a QDQ file quantises them.
    **QDQ_CONVERTERS,
    # QOperator files: their quantized ops, QuantizeLinear / DequantizeLinear
    # of both formats, and the ops that move an integer value unchanged.
    **QOPERATOR_CONVERTERS,
    # Dynamic quantization: each product's chain, fused (onnx/dynamic_quant.py).
    **DYNAMIC_CONVERTERS,
}
# The converters that read an integer value of a QOperator file.
INTEGER_READERS = QOPERATOR_READERS
