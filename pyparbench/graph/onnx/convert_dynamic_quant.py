"""Converters of the dynamically quantized products
(:mod:`~pyparbench.graph.onnx.dynamic_quant` fuses each chain of
onnxruntime.quantization.quantize_dynamic into one node): a
``dynamic_quantized_linear`` / ``dynamic_quantized_conv2d`` node with the
file's int8 / uint8 weights, their zero points (per tensor or per output),
their scales and the float32 bias. ONNX Runtime's own fused op of the
same product, com.microsoft DynamicQuantizeMatMul (in a model its graph
optimisation saved), is the same node."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from pyparbench.graph.onnx.attributes import as_text
from pyparbench.graph.onnx.convert_conv_pool import conv_pads, spatial
from pyparbench.graph.onnx.dynamic_quant import DYNAMIC_CONV_OP, DYNAMIC_MATMUL_OP
from pyparbench.graph.onnx.importer import Converter, Importer
from pyparbench.graph.onnx.values import Array, Unsupported, Value

__all__ = ["DYNAMIC_CONVERTERS"]


def _per_output(v: Array, outs: int, axis: int, rank: int, what: str) -> Array:
    """``v`` (one value, or one per output along ``axis`` of a result of
    ``rank`` dims, as the file broadcasts it) as (outs,) float32."""
    shape = (1,) * (rank - v.ndim) + v.shape if v.ndim <= rank else v.shape
    if v.size != 1 and (len(shape) != rank or shape[axis] != outs or v.size != outs):
        raise Unsupported(f"{what} of shape {v.shape} is not one value per output ({outs} "
                          f"along axis {axis} of the {rank}-D result)")
    return np.ascontiguousarray(np.broadcast_to(v.astype(np.float32).reshape(-1), (outs,)))


def _integer_weights(im: Importer, ins: list[Value | None], n: onnx.NodeProto
                     ) -> tuple[Array, Array]:
    """The weight and its zero point: int8 or uint8 constants."""
    w = im.const_of(ins[1], "the integer weight")
    if w.dtype not in (np.int8, np.uint8):
        raise Unsupported(f"weight {n.input[1]!r} is {w.dtype} (int8 or uint8 only)")
    if ins[2] is None:
        return w, np.zeros((), w.dtype)
    zp = im.const_of(ins[2], "the weight's zero point")
    if zp.dtype != w.dtype:
        raise Unsupported(f"weight zero point {n.input[2]!r} is {zp.dtype}, the weight "
                          f"{w.dtype}")
    return w, zp


def _finish(im: Importer, y: int, values: Array, zp: Array, scales: Array,
            bias: Array | None) -> int:
    arrays = {"weight": np.ascontiguousarray(values, np.float32), "weight_zero_point": zp,
              "weight_scale": scales}
    if bias is not None:
        arrays["bias"] = bias
    im.builder.set_weights(y, arrays)
    return y


def dynamic_matmul(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                   a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "MatMulInteger's input")
    w, zp = _integer_weights(im, ins, n)
    xs = im.shape(x)
    if w.ndim != 2 or len(xs) < 2 or xs[-1] != w.shape[0]:
        raise Unsupported(f"a weight of shape {w.shape} for an input of shape {xs} (a 2-D "
                          "weight over the input's last axis only)")
    outs, rank = int(w.shape[1]), len(xs)
    zero_points = _per_output(zp, outs, rank - 1, rank, "the weight's zero point")
    scales = _per_output(im.const_of(ins[3], "the weight's scale"), outs, rank - 1, rank,
                         "the weight's scale")
    bias = None if ins[4] is None else _per_output(
        im.const_of(ins[4], "the bias"), outs, rank - 1, rank, "the bias")
    y = im.builder.dynamic_quantized_linear(x, outs, bias=bias is not None, name=im.node_name)
    return [_finish(im, y, w.T, zero_points, scales, bias)]


def dynamic_conv(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                 a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "ConvInteger's input")
    w, zp = _integer_weights(im, ins, n)
    xs = im.shape(x)
    if w.ndim != 4 or len(xs) != 4:
        raise Unsupported("a ConvInteger other than 2-D")
    outs = int(w.shape[0])
    zero_points = _per_output(zp, outs, 0, 1, "the weight's zero point")
    scales = _per_output(im.const_of(ins[3], "the weight's scale"), outs, 1, 4,
                         "the weight's scale")
    bias = None if ins[4] is None else _per_output(
        im.const_of(ins[4], "the bias"), outs, 1, 4, "the bias")
    kernel = tuple(int(d) for d in w.shape[2:])
    s = spatial(a, "strides", 2, 1)
    d = spatial(a, "dilations", 2, 1)
    pads = conv_pads(as_text(a.get("auto_pad", "NOTSET")), xs[2:], kernel, s, d,
                     a.get("pads", []))
    y = im.builder.dynamic_quantized_conv2d(
        x, outs, kernel, stride=s, padding=(*pads[0], *pads[1]), dilation=d,
        groups=int(a.get("group", 1)), bias=bias is not None, name=im.node_name)
    return [_finish(im, y, w, zero_points, scales, bias)]


def dynamic_quantize_matmul(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                            a: dict[str, Any]) -> list[Value]:
    """com.microsoft DynamicQuantizeMatMul (A, B, b_scale, b_zero_point?,
    bias?): the fused node's inputs in another order."""
    padded = [*ins, None, None][:5]
    names = [*n.input, "", ""][:5]
    fused = onnx.helper.make_node(DYNAMIC_MATMUL_OP, [names[i] for i in (0, 1, 3, 2, 4)],
                                  list(n.output), name=n.name)
    return dynamic_matmul(im, k, fused, [padded[i] for i in (0, 1, 3, 2, 4)], a)


DYNAMIC_CONVERTERS: dict[str, Converter] = {
    "com.microsoft.DynamicQuantizeMatMul": dynamic_quantize_matmul,
    DYNAMIC_MATMUL_OP: dynamic_matmul,
    DYNAMIC_CONV_OP: dynamic_conv,
}
