"""QDQ files (onnxruntime.quantization.quantize_static, QuantFormat.QDQ):
QuantizeLinear -> DequantizeLinear pairs on activations, DequantizeLinear of
int8 weight and int32 bias initialisers.

A Conv, MatMul or Gemm whose input is such a pair's output and whose weight
is the DequantizeLinear of an int8 initialiser (per tensor, or per output
channel; zero point 0) becomes one int8 node (quantized_conv2d /
quantized_linear): it quantises its float input onto the pair's grid, runs
the oneDNN int8 primitive and dequantises; where the op's output is read by
a QuantizeLinear alone, that grid becomes the node's output grid (the
result is requantised, then dequantised), and the pair after it is the
node itself. Any other pair is a ``fake_quantize`` node (the value rounded
onto its grid), so Add, MaxPool and the like read exactly the values the
file's DequantizeLinear gives. DequantizeLinear of a constant folds at
import (a float32 weight or bias, the file's own value).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from pyparbench.graph.onnx.attributes import as_text
from pyparbench.graph.onnx.convert_conv_pool import conv as float_conv
from pyparbench.graph.onnx.convert_conv_pool import conv_pads, spatial
from pyparbench.graph.onnx.convert_linear import gemm as float_gemm
from pyparbench.graph.onnx.convert_linear import matmul as float_matmul
from pyparbench.graph.onnx.importer import Converter, Importer
from pyparbench.graph.onnx.quant_grid import QuantGrid
from pyparbench.graph.onnx.values import Array, Unsupported, Value

__all__ = ["QDQ_CONVERTERS"]

_QUANT_TYPES = {np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8"}


@dataclass(frozen=True)
class _Weights:
    """An int8 op's weights: (out, ...) int8 values, a scale per output channel."""

    values: Array
    scales: Array


def _const(im: Importer, name: str) -> Array | None:
    v = im.values.get(name)
    return v if isinstance(v, np.ndarray) else None


def _producer(im: Importer, name: str) -> onnx.NodeProto | None:
    k = im.producer.get(name)
    return None if k is None else im.nodes[k]


def _grid_of(im: Importer, n: onnx.NodeProto, what: str) -> QuantGrid:
    """The per-tensor grid of a QuantizeLinear / DequantizeLinear of an activation."""
    scale = _const(im, n.input[1])
    zp = _const(im, n.input[2]) if len(n.input) > 2 and n.input[2] else None
    if scale is None or (len(n.input) > 2 and n.input[2] and zp is None):
        raise Unsupported(f"{what}: a scale or zero point that is computed")
    if scale.size != 1 or (zp is not None and zp.size != 1):
        raise Unsupported(f"{what}: a per-channel grid on an activation (per tensor only)")
    dtype = _QUANT_TYPES.get(np.dtype(zp.dtype) if zp is not None else np.dtype(np.uint8))
    if dtype is None:
        raise Unsupported(f"{what}: a {zp.dtype if zp is not None else ''} grid (uint8 / int8 "
                          "only)")
    s = float(np.float32(scale.reshape(-1)[0]))
    if not (np.isfinite(s) and s > 0):
        raise Unsupported(f"{what}: scale {s} (finite and > 0 only)")
    return QuantGrid(s, int(zp.reshape(-1)[0]) if zp is not None else 0, dtype)


def _weights(im: Importer, name: str, out_axis: int, op: str) -> _Weights | None:
    """The int8 weights behind ``name`` (a DequantizeLinear of an int8
    initialiser), in (out, ...) order; None when ``name`` is no such value."""
    dq = _producer(im, name)
    if dq is None or dq.op_type != "DequantizeLinear":
        return None
    q = _const(im, dq.input[0])
    scale = _const(im, dq.input[1])
    if q is None or scale is None or q.dtype not in (np.int8, np.uint8):
        return None
    where = f"{op}'s weight {dq.input[0]!r}"
    if q.dtype != np.int8:
        raise Unsupported(f"{where} is uint8: the int8 kernels take int8 weights")
    zp = _const(im, dq.input[2]) if len(dq.input) > 2 and dq.input[2] else None
    if zp is not None and np.any(zp != 0):
        raise Unsupported(f"{where} has a nonzero weight zero point (the int8 kernels take "
                          "symmetric weights)")
    axis = int(next((a.i for a in dq.attribute if a.name == "axis"), 1))
    if scale.size != 1 and axis % q.ndim != out_axis:
        raise Unsupported(f"{where} has its scales along axis {axis}, not along the output "
                          f"channels (axis {out_axis})")
    channels = q.shape[out_axis]
    scales = np.broadcast_to(np.asarray(scale, np.float32).reshape(-1), (channels,))
    values = np.moveaxis(q, out_axis, 0)
    return _Weights(np.ascontiguousarray(values, np.float32), np.ascontiguousarray(scales))


def _input_grid(im: Importer, name: str) -> QuantGrid | None:
    """The grid of an op's input that is a QDQ pair's output."""
    return im.grids.get(name)


def _gemm_is_plain(n: onnx.NodeProto) -> bool:
    a = {x.name: x for x in n.attribute}
    return ("transA" not in a or a["transA"].i == 0) and \
        ("alpha" not in a or a["alpha"].f == 1.0) and ("beta" not in a or a["beta"].f == 1.0)


def _int8_weights_of(im: Importer, n: onnx.NodeProto) -> _Weights | None:
    """The int8 weights of a Conv / MatMul / Gemm the int8 nodes run, or None
    where it stays a float op."""
    if len(n.input) < 2:
        return None
    if n.op_type == "Conv":
        return _weights(im, n.input[1], 0, "Conv")
    if n.op_type == "MatMul":
        w = _weights(im, n.input[1], 1, "MatMul")
        return w if w is not None and w.values.ndim == 2 else None
    if n.op_type == "Gemm" and _gemm_is_plain(n):
        trans_b = any(a.name == "transB" and a.i for a in n.attribute)
        return _weights(im, n.input[1], 0 if trans_b else 1, "Gemm")
    return None


def _reads_as_int8(im: Importer, name: str) -> bool:
    """Whether every reader of ``name`` is an int8 op reading it as its input."""
    readers = im.readers.get(name, [])
    try:
        return bool(readers) and name not in im.output_names and all(
            im.nodes[r].input[0] == name and name not in im.nodes[r].input[1:]
            and _int8_weights_of(im, im.nodes[r]) is not None for r in readers)
    except Unsupported:  # refused where that reader is converted, naming it
        return False


def _output_grid(im: Importer, n: onnx.NodeProto
                 ) -> tuple[QuantGrid, list[onnx.NodeProto]] | None:
    """The grid of the QuantizeLinear that alone reads ``n``'s output (and
    whose output only DequantizeLinear nodes of the same grid read)."""
    out = n.output[0]
    readers = im.readers.get(out, [])
    if len(readers) != 1 or out in im.output_names:
        return None
    q = im.nodes[readers[0]]
    if q.op_type != "QuantizeLinear" or q.output[0] in im.output_names:
        return None
    try:
        grid = _grid_of(im, q, f"QuantizeLinear {q.name!r}")
    except Unsupported:
        return None
    dqs = [im.nodes[r] for r in im.readers.get(q.output[0], [])]
    if not dqs or any(d.op_type != "DequantizeLinear" or _grid_of(im, d, d.name) != grid
                      for d in dqs):
        return None
    return grid, dqs


def _int8_node(im: Importer, n: onnx.NodeProto, ins: list[Value | None], w: _Weights
               ) -> int:
    """The quantized_conv2d / quantized_linear node of ``n``."""
    grid = _input_grid(im, n.input[0])
    x = im.node_of(ins[0], f"{n.op_type}'s input")
    if grid is None:
        raise Unsupported("int8 weights on an input that no QuantizeLinear -> "
                          "DequantizeLinear pair quantises")
    bias = None
    if len(ins) > 2 and ins[2] is not None:
        b = im.const_of(ins[2], f"{n.op_type}'s bias")
        bias = np.broadcast_to(np.asarray(b, np.float32), b.shape)
        if bias.size != w.values.shape[0]:
            raise Unsupported(f"a bias of shape {b.shape} for {w.values.shape[0]} outputs")
        bias = np.ascontiguousarray(bias.reshape(-1))
    out = _output_grid(im, n)
    out_dtype = out[0].dtype if out else "float32"
    if out:  # the pair after it is this node: a graph output it writes names it
        written = [d.output[0] for d in out[1] if d.output[0] in im.output_names]
        if written:
            im.rename_as_output(written[0])
    if n.op_type == "Conv":
        xs = im.shape(x)
        if w.values.ndim != 4 or len(xs) != 4:
            raise Unsupported("an int8 convolution other than 2-D")
        a = {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
        k = tuple(int(d) for d in w.values.shape[2:])
        s = spatial(a, "strides", 2, 1)
        d = spatial(a, "dilations", 2, 1)
        pads = conv_pads(as_text(a.get("auto_pad", "NOTSET")), xs[2:], k, s, d,
                         a.get("pads", []))
        y = im.builder.quantized_conv2d(
            x, int(w.values.shape[0]), k, stride=s, padding=(*pads[0], *pads[1]), dilation=d,
            groups=int(a.get("group", 1)), bias=bias is not None, x_dtype=grid.dtype,
            out_dtype=out_dtype, name=im.node_name)
    else:
        y = im.builder.quantized_linear(x, int(w.values.shape[0]), bias=bias is not None,
                                        x_dtype=grid.dtype, out_dtype=out_dtype,
                                        name=im.node_name)
    arrays: dict[str, Array] = {
        "x_scale": np.array([grid.scale], np.float32),
        "x_zero_point": np.array([grid.zero_point], np.float32),
        "weight": w.values, "weight_scale": w.scales}
    if bias is not None:
        arrays["bias"] = bias
    if out:
        arrays["out_scale"] = np.array([out[0].scale], np.float32)
        arrays["out_zero_point"] = np.array([out[0].zero_point], np.float32)
        im.on_grid[y] = out[0]
    im.builder.set_weights(y, arrays)
    return y


def _int8_or(float_op: Converter) -> Converter:
    """The int8 node where ``n`` has int8 weights, else ``float_op``'s."""
    def convert(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                a: dict[str, Any]) -> list[Value]:
        w = _int8_weights_of(im, n)
        if w is None or _input_grid(im, n.input[0]) is None:
            return float_op(im, k, n, ins, a)
        return [_int8_node(im, n, ins, w)]
    return convert


def quantize_linear(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                    a: dict[str, Any]) -> list[Value]:
    """The integer value stays its float source here: the DequantizeLinear
    readers (the only ones allowed) round it onto the grid."""
    x = im.node_of(ins[0], "QuantizeLinear's input")
    _grid_of(im, n, "QuantizeLinear")
    if n.output[0] in im.output_names:
        raise Unsupported("an integer graph output")
    for r in im.readers.get(n.output[0], []):
        if im.nodes[r].op_type != "DequantizeLinear":
            raise Unsupported(f"its integer output is read by {im.nodes[r].op_type} "
                              f"{im.nodes[r].name!r} (only DequantizeLinear reads it)")
    return [x]


def _lies_on(im: Importer, x: int, grid: QuantGrid) -> bool:
    """Whether node ``x``'s values lie on ``grid``: a node that rounded onto
    it, or a max pool or reshape of one (they pick values, and padding never
    wins a max)."""
    while im.on_grid.get(x) != grid:
        op, attrs, ins = im.builder.op_and_inputs(x)
        if not (op == "reshape" or (op == "pool2d" and attrs["kind"] == "max")):
            return False
        x = ins[0]
    return True


def dequantize_linear(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                      a: dict[str, Any]) -> list[Value]:
    """The pair's value on its grid: the source itself where it is there
    already (an int8 node's requantised output) or where int8 nodes alone
    read it (they quantise it themselves), else a fake_quantize node."""
    q = _producer(im, n.input[0])
    if q is None or q.op_type != "QuantizeLinear":
        raise Unsupported("a DequantizeLinear of a computed value that no QuantizeLinear "
                          "makes")
    grid = _grid_of(im, n, "DequantizeLinear")
    if _grid_of(im, q, "QuantizeLinear") != grid:
        raise Unsupported(f"a grid other than its QuantizeLinear's {q.name!r}")
    x = im.node_of(ins[0], "DequantizeLinear's input")
    im.grids[n.output[0]] = grid
    if _lies_on(im, x, grid) or _reads_as_int8(im, n.output[0]):
        return [x]
    y = im.builder.fake_quantize(x, x_dtype=grid.dtype, name=im.node_name)
    im.builder.set_weights(y, {"x_scale": np.array([grid.scale], np.float32),
                               "x_zero_point": np.array([grid.zero_point], np.float32)})
    im.on_grid[y] = grid
    return [y]


QDQ_CONVERTERS: dict[str, Converter] = {
    "Conv": _int8_or(float_conv),
    "MatMul": _int8_or(float_matmul),
    "Gemm": _int8_or(float_gemm),
    "QuantizeLinear": quantize_linear,
    "DequantizeLinear": dequantize_linear,
}
