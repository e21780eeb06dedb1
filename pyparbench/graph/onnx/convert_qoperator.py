"""QOperator files (onnxruntime.quantization.quantize_static,
QuantFormat.QOperator): a QuantizeLinear makes an integer value, quantized
ops read and write integer values, each on the grid (scale, zero point)
its inputs name, and a DequantizeLinear gives the float result back.

The graph holds an integer value q on grid (s, z) as its real value
(q - z) · s, which every node reads and writes as float32:

* QuantizeLinear is a ``fake_quantize`` node (the value rounded onto its
  grid), or its input itself where int8 matrix nodes alone read it (they
  quantise it themselves); DequantizeLinear is the value itself;
* QLinearConv, QLinearMatMul of a constant int8 weight and com.microsoft
  QGemm are ``quantized_conv2d`` / ``quantized_linear`` nodes requantised
  onto their output grid (an int32 bias is b · x_scale · w_scale, added
  after the integer sum as a float32 bias); a QLinearMatMul of two
  computed values is a float MatMul of the two real values;
* the com.microsoft glue ops (QLinearAdd, QLinearMul, QLinearSigmoid,
  QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat,
  QLinearSoftmax) are their float op on the real values, then a
  ``fake_quantize`` onto the output grid: ONNX Runtime's semantics
  (dequantise, compute in float, requantise), up to float rounding;
* MaxPool, Flatten, Reshape, Transpose, Squeeze, Unsqueeze and Identity
  of an integer value move values without changing them: the float op,
  on the same grid (a max commutes with (q - z) · s, s > 0).

A file whose QuantizeLinear / DequantizeLinear form QDQ pairs goes to
:mod:`~pyparbench.graph.onnx.convert_quantized`."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

from pyparbench.graph.onnx.attributes import as_text
from pyparbench.graph.onnx.convert_conv_pool import conv_pads, global_pool, pool, spatial
from pyparbench.graph.onnx.convert_elementwise import binary, eltwise, pass_through
from pyparbench.graph.onnx.convert_linear import matmul as float_matmul
from pyparbench.graph.onnx.convert_normalisation import softmax
from pyparbench.graph.onnx.convert_quantized import QDQ_CONVERTERS
from pyparbench.graph.onnx.convert_shape import concat, transpose, view
from pyparbench.graph.onnx.importer import Converter, Importer, op_key
from pyparbench.graph.onnx.quant_grid import QuantGrid
from pyparbench.graph.onnx.values import Array, Unsupported, Value

__all__ = ["QOPERATOR_CONVERTERS", "QOPERATOR_READERS"]

_QUANT_TYPES = {np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8"}
# The ops that become int8 nodes (with a constant weight), which quantise
# their input themselves.
_MATRIX_OPS = ("QLinearConv", "QLinearMatMul", "com.microsoft.QGemm")


def _const(im: Importer, name: str, what: str) -> Array:
    v = im.values.get(name)
    if not isinstance(v, np.ndarray):
        raise Unsupported(f"{what} {name!r} must be a constant")
    return v


def _grid(im: Importer, scale: str, zero_point: str, what: str) -> QuantGrid:
    """The per-tensor grid of the (scale, zero point) inputs named."""
    s = _const(im, scale, f"{what}'s scale")
    z = _const(im, zero_point, f"{what}'s zero point") if zero_point else \
        np.zeros((), np.uint8)
    if s.size != 1 or z.size != 1:
        raise Unsupported(f"{what}: a per-channel grid on an activation (per tensor only)")
    dtype = _QUANT_TYPES.get(np.dtype(z.dtype))
    if dtype is None:
        raise Unsupported(f"{what}: a {z.dtype} grid (uint8 / int8 only)")
    scale_value = float(np.float32(s.reshape(-1)[0]))
    if not (np.isfinite(scale_value) and scale_value > 0):
        raise Unsupported(f"{what}: scale {scale_value} (finite and > 0 only)")
    return QuantGrid(scale_value, int(z.reshape(-1)[0]), dtype)


def _integer_input(im: Importer, n: onnx.NodeProto, at: int, ins: list[Value | None],
                   what: str) -> tuple[int, QuantGrid]:
    """The node of integer input ``at`` (scale and zero point after it), whose
    grid must be the one its maker wrote it on."""
    grid = _grid(im, n.input[at + 1], n.input[at + 2] if len(n.input) > at + 2 else "", what)
    made = im.integer_grids.get(n.input[at])
    if made is None:
        raise Unsupported(f"{what} {n.input[at]!r} is no quantized op's output")
    if made != grid:
        raise Unsupported(f"{what} {n.input[at]!r} is read on grid {grid} but was written "
                          f"on {made}")
    return im.node_of(ins[at], what), grid


def _written_as_output(im: Importer, n: onnx.NodeProto) -> None:
    """A graph output that a DequantizeLinear of ``n``'s output writes names
    the node (the DequantizeLinear is the value itself)."""
    for r in im.readers.get(n.output[0], []):
        d = im.nodes[r]
        if d.op_type == "DequantizeLinear" and d.output[0] in im.output_names:
            im.rename_as_output(d.output[0])
            return


def _onto_grid(im: Importer, y: int, grid: QuantGrid, out: str) -> int:
    """``y`` rounded onto ``grid`` (named as the current node), the integer
    value ``out`` of the file."""
    q = im.builder.fake_quantize(y, x_dtype=grid.dtype, name=im.node_name)
    im.builder.set_weights(q, {"x_scale": np.array([grid.scale], np.float32),
                               "x_zero_point": np.array([grid.zero_point], np.float32)})
    im.on_grid[q] = grid
    im.integer_grids[out] = grid
    return q


def _read_by_matrix_ops_alone(im: Importer, name: str) -> bool:
    """Whether int8 nodes alone read ``name``, as their input."""
    readers = [im.nodes[r] for r in im.readers.get(name, [])]
    return bool(readers) and name not in im.output_names and all(
        op_key(r) in _MATRIX_OPS and r.input[0] == name and name not in r.input[1:]
        and isinstance(im.values.get(r.input[3]), np.ndarray) for r in readers)


def _is_qdq(im: Importer, n: onnx.NodeProto) -> bool:
    """Whether QuantizeLinear ``n``'s integer output goes to no op of the
    QOperator format (a QDQ pair; the QDQ converter refuses any reader but
    DequantizeLinear), or DequantizeLinear ``n`` reads such a pair."""
    if n.op_type == "DequantizeLinear":
        return n.input[0] not in im.integer_grids
    readers = im.readers.get(n.output[0], [])
    return n.output[0] in im.output_names or not any(
        op_key(im.nodes[r]) in QOPERATOR_READERS and im.nodes[r].op_type != "DequantizeLinear"
        for r in readers)


def quantize_linear(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                    a: dict[str, Any]) -> list[Value]:
    if _is_qdq(im, n):
        return QDQ_CONVERTERS["QuantizeLinear"](im, k, n, ins, a)
    grid = _grid(im, n.input[1], n.input[2] if len(n.input) > 2 else "", "QuantizeLinear")
    x = im.node_of(ins[0], "QuantizeLinear's input")
    if im.on_grid.get(x) == grid or _read_by_matrix_ops_alone(im, n.output[0]):
        im.integer_grids[n.output[0]] = grid
        return [x]
    return [_onto_grid(im, x, grid, n.output[0])]


def dequantize_linear(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                      a: dict[str, Any]) -> list[Value]:
    if _is_qdq(im, n):
        return QDQ_CONVERTERS["DequantizeLinear"](im, k, n, ins, a)
    x, _ = _integer_input(im, n, 0, ins, "DequantizeLinear's input")
    return [x]


def _weights(im: Importer, n: onnx.NodeProto, at: int, out_axis: int
             ) -> tuple[Array, Array]:
    """The int8 weights at input ``at`` (scale, zero point after it) in
    (out, ...) order as float32 whole numbers, and a scale per output."""
    what = f"{n.op_type}'s weight {n.input[at]!r}"
    q = _const(im, n.input[at], what)
    scale = _const(im, n.input[at + 1], f"{what}'s scale")
    zp = _const(im, n.input[at + 2], f"{what}'s zero point")
    if q.dtype != np.int8:
        raise Unsupported(f"{what} is {q.dtype}: the int8 kernels take int8 weights")
    if np.any(zp != 0):
        raise Unsupported(f"{what} has a nonzero weight zero point (the int8 kernels take "
                          "symmetric weights)")
    channels = q.shape[out_axis]
    if scale.size not in (1, channels):
        raise Unsupported(f"{what} has {scale.size} scales for {channels} output channels")
    scales = np.broadcast_to(np.asarray(scale, np.float32).reshape(-1), (channels,))
    values = np.moveaxis(q, out_axis, 0)
    return np.ascontiguousarray(values, np.float32), np.ascontiguousarray(scales)


def _int8_matrix(im: Importer, n: onnx.NodeProto, ins: list[Value | None],
                 w_at: int, out_axis: int, bias_at: int | None, out_at: int | None) -> int:
    """The quantized_conv2d / quantized_linear node of QLinearConv,
    QLinearMatMul or QGemm ``n``: input at 0, weight at ``w_at``, int32
    bias at ``bias_at``, output grid at ``out_at`` (None: float32 out)."""
    x, xg = _integer_input(im, n, 0, ins, f"{n.op_type}'s input")
    values, scales = _weights(im, n, w_at, out_axis)
    arrays: dict[str, Array] = {
        "x_scale": np.array([xg.scale], np.float32),
        "x_zero_point": np.array([xg.zero_point], np.float32),
        "weight": values, "weight_scale": scales}
    if bias_at is not None and len(n.input) > bias_at and n.input[bias_at]:
        b = _const(im, n.input[bias_at], f"{n.op_type}'s bias")
        if b.dtype != np.int32 or b.size != values.shape[0]:
            raise Unsupported(f"a bias of {b.dtype} {b.shape} for {values.shape[0]} outputs "
                              "(int32, one per output)")
        # The int32 bias is summed with the products, on their scale.
        arrays["bias"] = (b.reshape(-1).astype(np.float64) * np.float64(xg.scale)
                          * scales.astype(np.float64)).astype(np.float32)
    out = None if out_at is None else _grid(im, *_out(n, out_at), f"{n.op_type}'s output")
    _written_as_output(im, n)
    out_dtype = out.dtype if out else "float32"
    if n.op_type == "QLinearConv":
        xs = im.shape(x)
        if values.ndim != 4 or len(xs) != 4:
            raise Unsupported("an int8 convolution other than 2-D")
        a = {at.name: helper.get_attribute_value(at) for at in n.attribute}
        kernel = tuple(int(d) for d in values.shape[2:])
        s = spatial(a, "strides", 2, 1)
        d = spatial(a, "dilations", 2, 1)
        pads = conv_pads(as_text(a.get("auto_pad", "NOTSET")), xs[2:], kernel, s, d,
                         a.get("pads", []))
        y = im.builder.quantized_conv2d(
            x, int(values.shape[0]), kernel, stride=s, padding=(*pads[0], *pads[1]),
            dilation=d, groups=int(a.get("group", 1)), bias="bias" in arrays,
            x_dtype=xg.dtype, out_dtype=out_dtype, name=im.node_name)
    else:
        if values.ndim != 2:
            raise Unsupported(f"a {values.ndim}-D constant weight (2-D only)")
        y = im.builder.quantized_linear(x, int(values.shape[0]), bias="bias" in arrays,
                                        x_dtype=xg.dtype, out_dtype=out_dtype,
                                        name=im.node_name)
    if out:
        arrays["out_scale"] = np.array([out.scale], np.float32)
        arrays["out_zero_point"] = np.array([out.zero_point], np.float32)
        im.on_grid[y] = out
        im.integer_grids[n.output[0]] = out
    im.builder.set_weights(y, arrays)
    return y


def qlinear_conv(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                 a: dict[str, Any]) -> list[Value]:
    # x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B
    return [_int8_matrix(im, n, ins, 3, 0, 8, 6)]


def qlinear_matmul(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                   a: dict[str, Any]) -> list[Value]:
    # a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp
    if isinstance(ins[3], np.ndarray):
        return [_int8_matrix(im, n, ins, 3, 1, None, 6)]
    # Two computed values: their real values multiplied in float32.
    return _float_between(im, n, ins, "MatMul", [0, 3], _out(n, 6), float_matmul, {})


def qgemm(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
          a: dict[str, Any]) -> list[Value]:
    # A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale?, y_zp?
    if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0:
        raise Unsupported("transA or an alpha other than 1")
    out_at = 7 if len(n.input) > 7 and n.input[7] else None
    return [_int8_matrix(im, n, ins, 3, 0 if a.get("transB", 0) else 1, 6, out_at)]


def _out(n: onnx.NodeProto, at: int) -> tuple[str, str]:
    """The names of the output grid's scale and zero point, at ``at``."""
    return n.input[at], n.input[at + 1] if len(n.input) > at + 1 else ""


def _float_between(im: Importer, n: onnx.NodeProto, ins: list[Value | None], float_op: str,
                   reads: list[int], out: tuple[str, str], convert: Converter,
                   attrs: dict[str, Any]) -> list[Value]:
    """The float op ``float_op`` of the real values of the integer inputs at
    ``reads`` (each followed by its scale and zero point; a constant one is
    dequantised here), its result rounded onto the grid ``out`` names:
    dequantise, compute, requantise."""
    values: list[Value | None] = []
    names: list[str] = []
    for at in reads:
        what = f"{n.op_type}'s input {n.input[at]!r}"
        v = ins[at]
        if isinstance(v, np.ndarray):
            g = _grid(im, n.input[at + 1], n.input[at + 2], what)
            v = ((v.astype(np.float32) - np.float32(g.zero_point))
                 * np.float32(g.scale)).astype(np.float32)
        else:
            v, _ = _integer_input(im, n, at, ins, what)
        values.append(v)
        names.append(n.input[at])
    grid = _grid(im, out[0], out[1], f"{n.op_type}'s output")
    _written_as_output(im, n)
    name = im.node_name
    im.node_name = im.fresh(float_op.lower())
    node = helper.make_node(float_op, names, [im.node_name], **attrs)
    (y,) = convert(im, -1, node, values, attrs)
    im.node_name = name
    return [_onto_grid(im, im.node_of(y, f"{float_op}'s result"), grid, n.output[0])]


def _glue(float_op: str, reads: list[int], out_at: int, convert: Converter) -> Converter:
    def f(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
          a: dict[str, Any]) -> list[Value]:
        return _float_between(im, n, ins, float_op, reads, _out(n, out_at), convert, a)
    return f


def qlinear_concat(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                   a: dict[str, Any]) -> list[Value]:
    # y_scale, y_zp, then (x, x_scale, x_zp) per input
    return _float_between(im, n, ins, "Concat", list(range(2, len(n.input), 3)), _out(n, 0),
                          concat, a)


def qlinear_global_average_pool(im: Importer, k: int, n: onnx.NodeProto,
                                ins: list[Value | None], a: dict[str, Any]) -> list[Value]:
    if a.get("channels_last", 0):
        raise Unsupported("channels_last (NCHW only)")
    return _float_between(im, n, ins, "GlobalAveragePool", [0], _out(n, 3), global_pool, {})


def qlinear_average_pool(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                         a: dict[str, Any]) -> list[Value]:
    if a.get("channels_last", 0):
        raise Unsupported("channels_last (NCHW only)")
    return _float_between(im, n, ins, "AveragePool", [0], _out(n, 3), pool,
                          {k: v for k, v in a.items() if k != "channels_last"})


def qlinear_softmax(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                    a: dict[str, Any]) -> list[Value]:
    # X, x_scale, x_zp, y_scale, y_zp; its opset attribute says how it reads axis
    if int(a.get("opset", 13)) < 13:
        raise Unsupported(f"opset {a.get('opset')} (the axis of opset 13 on)")
    return _float_between(im, n, ins, "Softmax", [0], _out(n, 3), softmax,
                          {"axis": int(a.get("axis", -1))})


def _same_grid(convert: Converter) -> Converter:
    """``convert``'s op on an integer value: the same values moved, on the
    same grid; a float input is left to ``convert`` alone."""
    def f(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
          a: dict[str, Any]) -> list[Value]:
        grid = im.integer_grids.get(n.input[0]) if n.input else None
        if grid is None:
            return convert(im, k, n, ins, a)
        if n.op_type == "MaxPool" and len(n.output) > 1 and n.output[1]:
            raise Unsupported("a MaxPool's indices")
        _written_as_output(im, n)
        outs = convert(im, k, n, ins, a)
        im.integer_grids[n.output[0]] = grid
        if isinstance(outs[0], int):
            im.on_grid[outs[0]] = grid
        return outs
    return f


QOPERATOR_CONVERTERS: dict[str, Converter] = {
    "QuantizeLinear": quantize_linear,
    "DequantizeLinear": dequantize_linear,
    "QLinearConv": qlinear_conv,
    "QLinearMatMul": qlinear_matmul,
    "com.microsoft.QGemm": qgemm,
    "com.microsoft.QLinearAdd": _glue("Add", [0, 3], 6, binary),
    "com.microsoft.QLinearMul": _glue("Mul", [0, 3], 6, binary),
    "com.microsoft.QLinearSigmoid": _glue("Sigmoid", [0], 3, eltwise("sigmoid")),
    "com.microsoft.QLinearGlobalAveragePool": qlinear_global_average_pool,
    "com.microsoft.QLinearAveragePool": qlinear_average_pool,
    "com.microsoft.QLinearConcat": qlinear_concat,
    "com.microsoft.QLinearSoftmax": qlinear_softmax,
    "MaxPool": _same_grid(pool),
    "Flatten": _same_grid(view),
    "Reshape": _same_grid(view),
    "Squeeze": _same_grid(view),
    "Unsqueeze": _same_grid(view),
    "Transpose": _same_grid(transpose),
    "Identity": _same_grid(pass_through),
}
# The op types whose converters read an integer value (the importer refuses
# any other op reading one).
QOPERATOR_READERS = frozenset(QOPERATOR_CONVERTERS) - {"QuantizeLinear"}
