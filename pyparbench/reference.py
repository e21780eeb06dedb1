"""Plain numpy forward pass of any Graph: the correctness oracle for the executor.

Everything is computed in ``dtype`` (float64 by default) straight from the
op definitions in :mod:`pyparbench.graph`, favouring code that is obviously
right over code that is fast: convolution is im2col (a sliding-window view)
followed by one matrix product per group, pooling is a reduction over windows
of a padded copy.

The bf16 reference is the same float64 computation on inputs and weights
rounded to bfloat16 (:func:`round_to_bf16`, as the bf16 kernels round them),
checked within :data:`BF16_TOLERANCE` (:func:`assert_near_bf16`). The int8
reference is float64 on the dequantised inputs and weights, computed as the
exact integer sums times the scales (:mod:`pyparbench.quantization`); its
tolerances are :data:`INT8_ULPS` and :data:`INT8_REQUANTIZED_STEPS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from pyparbench._bfloat16 import to_bfloat16
from pyparbench.graph import Graph, Node
from pyparbench.graph import transformer_math
from pyparbench.graph.positions import padded_positions
from pyparbench.quantization import byte_rowwise_dequantize

__all__ = ["BF16_TOLERANCE", "INT8_REQUANTIZED_STEPS", "INT8_ULPS", "assert_near",
           "assert_near_bf16", "assert_near_int8", "assert_requantized", "conv2d_reference",
           "dynamic_grid", "gemm_reference", "int8_conv2d_reference", "int8_linear_reference",
           "output_error", "reference_forward", "relative_error", "requantize", "round_to_bf16"]

Array = npt.NDArray[Any]
_erf = np.frompyfunc(math.erf, 1, 1)  # numpy has no erf; math.erf is exact to double


def reference_forward(graph: Graph, inputs: Mapping[str, npt.ArrayLike],
                      dtype: npt.DTypeLike = np.float64,
                      return_all: bool = False) -> dict[str, Array]:
    """Run ``graph`` on ``inputs`` with numpy.

    Parameters
    ----------
    graph
        Any graph.
    inputs
        One array per graph input, by name (see ``Graph.random_inputs``);
        float inputs are cast to ``dtype``, indices to int64.
    dtype
        Floating type of the computation.
    return_all
        Return every node's value (by node name), not only the outputs.

    Returns
    -------
    dict
        Output name -> array (of ``dtype``).

    Raises
    ------
    ValueError
        A missing or unknown input name, or an input of the wrong shape.
    IndexError
        An embedding index outside its table.
    """
    ft = np.dtype(dtype)
    if ft.kind != "f":
        raise ValueError(f"dtype must be a floating type, got {ft}")
    names = set(graph.input_names)
    missing, extra = names - set(inputs), set(inputs) - names
    if missing or extra:
        raise ValueError(f"graph {graph.name!r} takes inputs {sorted(names)}; "
                         f"missing {sorted(missing)}, unknown {sorted(extra)}")
    # A value is dropped once its last reader has run, unless return_all.
    readers = [len(c) for c in graph.consumers]
    keep = set(graph.outputs)
    values: dict[int, Array] = {}
    for node in graph.nodes:
        if node.op == "input":
            values[node.id] = _input(node, inputs[node.name], ft)
        else:
            args = [values[j] for j in node.inputs]
            values[node.id] = _OPS[node.op](node, args, ft)
            for j in node.inputs:
                readers[j] -= 1
                if readers[j] == 0 and j not in keep and not return_all:
                    del values[j]
    chosen = range(len(graph.nodes)) if return_all else graph.outputs
    return {graph.nodes[i].name: values[i] for i in chosen}


def _input(node: Node, value: npt.ArrayLike, ft: np.dtype[Any]) -> Array:
    arr = np.asarray(value)
    if arr.shape != node.shape:
        raise ValueError(f"input {node.name!r} must have shape {node.shape}, got {arr.shape}")
    if node.dtype == "int64":
        if arr.dtype.kind not in "iu":
            raise ValueError(f"input {node.name!r} holds indices, got dtype {arr.dtype}")
        return arr.astype(np.int64)
    return arr.astype(ft)


def _param(node: Node, key: str, ft: np.dtype[Any]) -> Array:
    return np.asarray(node.params[key], dtype=ft)


# ----------------------------------------------------------------------- ops


def assert_near(got: npt.ArrayLike, want: npt.ArrayLike, rtol: float = 1e-4) -> None:
    """Assert a float32 result equals its float64 reference within ``rtol``
    elementwise, the absolute tolerance at least ``rtol`` and scaled by the
    result's largest magnitude: a float32 sum of thousands of terms (a 3x3
    conv over 512 channels, values near 20) rounds about 1e-4 from the exact
    sum whatever the kernel's order, which fixed tolerances misread."""
    w = np.asarray(want)
    scale = float(np.abs(w).max()) if w.size else 0.0
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), w, rtol=rtol,
                               atol=max(rtol, 0.1 * rtol * scale))


# The largest max |got - ref| / max |ref| a bf16 kernel may show against its
# bf16 reference (ref: float64 on the bf16-rounded inputs and weights). A
# product of two bf16 values is exact in fp32 (8-bit significands), so what
# remains is the fp32 accumulation: K terms err by at most K·2^-24·Σ|a·b|,
# and for inputs of random sign, where Σ|a·b| is about sqrt(K) times the
# largest output, by about sqrt(K)·2^-24 relative in practice: 4e-6 at
# K = 4096. 1e-4 leaves 25x room there; a kernel that did not round its
# inputs to bf16 (fp32 run under a bf16 name) is off by about 2^-9 ≈ 2e-3,
# 20x beyond. An embedding bag adds whole bf16 rows (exact in fp32) over a
# bag of at most a few hundred rows: 1e-5. The output is fp32, so no final
# rounding to bf16 adds to these.
BF16_TOLERANCE: Mapping[str, float] = {
    "gemm": 1e-4, "linear": 1e-4, "matmul": 1e-4, "conv2d": 1e-4, "embedding_bag": 1e-5,
}


def round_to_bf16(x: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """x rounded to bfloat16 as the bf16 kernels take it (to float32, then to
    the nearest bfloat16, ties to even), returned as float64."""
    return to_bfloat16(x).astype(np.float64)


def assert_near_bf16(got: npt.ArrayLike, want: npt.ArrayLike, op: str) -> None:
    """Assert a bf16 kernel's float32 output is within ``BF16_TOLERANCE[op]``
    of its bf16 reference, relative to max |want|."""
    tol = BF16_TOLERANCE[op]
    err = relative_error(got, want)
    if not err <= tol:
        raise AssertionError(f"{op} in bf16: max |got - ref| / max |ref| = {err:.3g}, "
                             f"more than the tolerance {tol:g}")


# The int8 kernels accumulate exact integer products in s32, so their float32
# output differs from the float64 sum of the dequantised products only by
# float32 rounding after it: the s32 sum converted to float (one rounding),
# the scales multiplied together and into it (two), the bias added (one) —
# on oneDNN 2.x the bias is first divided by the scales (one more). Each
# rounding errs by at most 2^-24 of its operands, so an element may be off by
# INT8_ULPS · 2^-24 · (|sum| + |bias|), with room to spare. A kernel that ran
# fp32 on unquantised inputs is off by the quantisation error (about half a
# scale per input), orders of magnitude more.
INT8_ULPS = 8
# A u8 / s8 output is the float value above divided by its scale, rounded
# half to even: where that value lies within the float32 error of a tie, the
# kernel and the reference may round to neighbours. So an element may differ
# by one quantisation step, and only rarely does.
INT8_REQUANTIZED_STEPS = 1


def int8_linear_reference(x: npt.ArrayLike, x_scale: float, x_zero_point: int,
                          w: npt.ArrayLike, w_scales: npt.ArrayLike,
                          bias: npt.ArrayLike | None = None, *, relu: bool = False
                          ) -> tuple[Array, Array]:
    """x (m, k) u8 / s8 · w (n, k) s8ᵀ on the dequantised values, in float64:
    the integer sum exactly (int64), times x_scale · w_scale[oc] (a product of
    two float32 values, exact in float64), rounded once; then + bias, ReLU.
    Returns the result and the magnitude |sum| + |bias| each element's
    tolerance scales with."""
    xi = np.asarray(x).astype(np.int64) - int(x_zero_point)
    acc = xi @ np.asarray(w).astype(np.int64).T
    return _int8_finish(acc * _dequant_scales(x_scale, w_scales), bias, relu, np.s_[None, :])


def int8_conv2d_reference(x: npt.ArrayLike, x_scale: float, x_zero_point: int,
                          w: npt.ArrayLike, w_scales: npt.ArrayLike,
                          bias: npt.ArrayLike | None, stride: Sequence[int],
                          padding: Sequence[int], dilation: Sequence[int], groups: int, *,
                          relu: bool = False) -> tuple[Array, Array]:
    """The int8 convolution (NCHW / OIHW) as :func:`int8_linear_reference`: the
    integer sums (exact in float64, far below 2^53), then the scales. Padding
    is a real zero, as oneDNN pads (x - x_zero_point = 0 there)."""
    xi = np.asarray(x).astype(np.float64) - int(x_zero_point)
    acc = conv2d_reference(xi, np.asarray(w).astype(np.float64), None, stride, padding,
                           dilation, groups, False)
    scales = _dequant_scales(x_scale, w_scales)[None, :, None, None]
    return _int8_finish(acc * scales, bias, relu, np.s_[None, :, None, None])


def _dequant_scales(x_scale: float, w_scales: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """x_scale · w_scale[oc] of the float32 scales, exact in float64."""
    ws = np.asarray(w_scales, dtype=np.float32).astype(np.float64).reshape(-1)
    return np.asarray(float(np.float32(x_scale)) * ws, dtype=np.float64)


def _int8_finish(y: Array, bias: npt.ArrayLike | None, relu: bool,
                 channel: Any) -> tuple[Array, Array]:
    magnitude = np.abs(y)
    if bias is not None:
        b = np.asarray(bias, dtype=np.float32).astype(np.float64)[channel]
        y = y + b
        magnitude = magnitude + np.abs(b)
    return np.asarray(np.maximum(y, 0) if relu else y), np.asarray(magnitude)


def requantize(y: npt.ArrayLike, scale: float, zero_point: int, dtype: str) -> Array:
    """y / scale rounded half to even, plus zero_point, saturated (as int64)."""
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    s = float(np.float32(scale))
    q = np.clip(np.rint(np.asarray(y, dtype=np.float64) / s) + zero_point, lo, hi)
    return np.asarray(q, dtype=np.int64)


def assert_near_int8(got: npt.ArrayLike, want: npt.ArrayLike, magnitude: npt.ArrayLike,
                     op: str) -> None:
    """Assert an int8 kernel's float32 output is within INT8_ULPS · 2^-24 ·
    magnitude of its reference, element by element."""
    g = np.asarray(got, dtype=np.float64)
    allowed = INT8_ULPS * 2.0**-24 * np.asarray(magnitude) + 1e-30
    excess = np.abs(g - np.asarray(want)) / allowed
    if not np.all(excess <= 1):
        i = np.unravel_index(int(np.argmax(excess)), excess.shape)
        raise AssertionError(f"{op} in int8: element {i} is {g[i]!r}, the reference "
                             f"{np.asarray(want)[i]!r}, {float(excess[i]):.3g}x the tolerance "
                             f"{INT8_ULPS}·2^-24·(|sum| + |bias|)")


def assert_requantized(got: npt.ArrayLike, want: npt.ArrayLike, op: str) -> None:
    """Assert a u8 / s8 output is within INT8_REQUANTIZED_STEPS of the
    reference's rounding everywhere, and equal to it almost everywhere."""
    diff = np.abs(np.asarray(got, dtype=np.int64) - np.asarray(want, dtype=np.int64))
    if diff.size and int(diff.max()) > INT8_REQUANTIZED_STEPS:
        raise AssertionError(f"{op} requantised: an element is {int(diff.max())} steps from the "
                             f"reference (at most {INT8_REQUANTIZED_STEPS})")
    if diff.size and float(np.mean(diff == 0)) < 0.99:
        raise AssertionError(f"{op} requantised: only {float(np.mean(diff == 0)):.1%} of the "
                             f"elements equal the reference's rounding")


def gemm_reference(a: npt.ArrayLike, b: npt.ArrayLike, bias: npt.ArrayLike | None = None, *,
                   trans_a: bool = False, trans_b: bool = False, relu: bool = False,
                   precision: str = "fp32") -> Array:
    """op(A)·op(B) (+ bias) (+ ReLU) in float64, 2-D or batched (3-D);
    precision "bf16" rounds A and B to bfloat16 first (the bias stays fp32,
    as the kernels keep it)."""
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")
    rounded = round_to_bf16 if precision == "bf16" else _float64
    aa, bb = rounded(a), rounded(b)
    y = np.matmul(np.swapaxes(aa, -1, -2) if trans_a else aa,
                  np.swapaxes(bb, -1, -2) if trans_b else bb)
    if bias is not None:
        y = y + _float64(bias)
    return np.asarray(np.maximum(y, 0) if relu else y)


def _float64(x: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return np.asarray(np.asarray(x, dtype=np.float32), dtype=np.float64)


def relative_error(got: npt.ArrayLike, want: npt.ArrayLike) -> float:
    """max |got - want| / max |want| (as float64): how far two runs' outputs
    of one network are apart, relative to the reference's magnitude.

    Raises
    ------
    ValueError
        Outputs of different shapes.
    """
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if g.shape != w.shape:
        raise ValueError(f"shape {g.shape} against {w.shape}")
    scale = max(float(np.abs(w).max(initial=0.0)), 1e-30)
    return float(np.abs(g - w).max(initial=0.0)) / scale


def output_error(got: Mapping[str, npt.ArrayLike], want: Mapping[str, npt.ArrayLike], *,
                 labels: tuple[str, str] = ("got", "want")) -> float:
    """The worst :func:`relative_error` over every output (by name) the two
    runs share: how far one network's outputs in one runtime are from
    another's on the same inputs. ``labels`` name the two in messages.

    Raises
    ------
    ValueError
        No output in common, or one of different shapes (naming it).
    """
    common = sorted(set(got) & set(want))
    if not common:
        raise ValueError(f"no output in common: {labels[0]} {sorted(got)}, "
                         f"{labels[1]} {sorted(want)}")
    worst = 0.0
    for name in common:
        g, w = np.asarray(got[name], np.float64), np.asarray(want[name], np.float64)
        if g.shape != w.shape:
            raise ValueError(f"output {name!r}: {labels[0]} shape {g.shape}, {labels[1]}'s "
                             f"{w.shape}")
        worst = max(worst, relative_error(g, w))
    return worst


def conv2d_reference(x: npt.ArrayLike, w: npt.ArrayLike, bias: npt.ArrayLike | None,
                     stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                     groups: int, relu: bool, dtype: npt.DTypeLike = np.float64,
                     precision: str = "fp32") -> Array:
    """Direct 2-D convolution, NCHW / OIHW, computed in ``dtype`` (float64 by
    default): padding (top, bottom, left, right), PyTorch's semantics.
    precision "bf16" rounds x and w to bfloat16 first (the bias stays fp32)."""
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")
    ft = np.dtype(dtype)
    if precision == "bf16":
        x, w = round_to_bf16(x), round_to_bf16(w)
    xa, wa = np.asarray(x, dtype=ft), np.asarray(w, dtype=ft)
    o, cg, kh, kw = wa.shape
    g = groups
    (sh, sw), (dh, dw), (pt, pb, pl, pr) = stride, dilation, padding
    xp = np.pad(xa, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    # Windows of the dilated kernel's extent, then every dh-th / dw-th tap and
    # every sh-th / sw-th window: (N, C, OH, OW, KH, KW).
    win = sliding_window_view(xp, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
    win = win[:, :, ::sh, ::sw, ::dh, ::dw]
    n, _, oh, ow = win.shape[:4]
    # im2col per group: (N, G, OH*OW, Cg*KH*KW) @ (G, Cg*KH*KW, O/G).
    cols = win.reshape(n, g, cg, oh, ow, kh, kw).transpose(0, 1, 3, 4, 2, 5, 6)
    cols = cols.reshape(n, g, oh * ow, cg * kh * kw)
    wg = wa.reshape(g, o // g, cg * kh * kw).transpose(0, 2, 1)
    y = np.matmul(cols, wg)  # (N, G, OH*OW, O/G)
    y = y.transpose(0, 1, 3, 2).reshape(n, o, oh, ow)
    if bias is not None:
        y = y + np.asarray(bias, dtype=ft)[None, :, None, None]
    return np.asarray(np.maximum(y, 0) if relu else y)


def _activate(node: Node, y: Array) -> Array:
    """A fused activation (attribute set by the optimisation passes)."""
    kind = node.attrs.get("activation")
    return _ELTWISE[kind](y) if kind else y


def _conv2d(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    a = node.attrs
    bias = _param(node, "bias", ft) if "bias" in node.params else None
    y = conv2d_reference(args[0], _param(node, "weight", ft), bias, a["stride"],
                         a["padding"], a["dilation"], a["groups"], a["relu"], ft)
    if len(args) == 2:  # a fused residual, added before the activation
        y = y + args[1]
    return _activate(node, y)


def _linear(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    y = args[0] @ _param(node, "weight", ft).T
    if "bias" in node.params:
        y = y + _param(node, "bias", ft)
    return _activate(node, np.maximum(y, 0) if node.attrs["relu"] else y)


def _grid(node: Node, prefix: str) -> tuple[float, int]:
    """An int8 node's scale and zero point (params ``prefix``_scale, _zero_point)."""
    return (float(node.params[f"{prefix}_scale"][0]),
            int(node.params[f"{prefix}_zero_point"][0]))


def _fake_quantize(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    """ONNX's QuantizeLinear then DequantizeLinear: x (or the sum of the two
    inputs) / scale rounded half to even, plus the zero point, saturated;
    minus it, times the scale."""
    scale, zp = _grid(node, "x")
    x = args[0] if len(args) == 1 else args[0] + args[1]  # a fused residual add
    if "table" in node.params:  # a gate looked up by its input's byte (passes.int8_gates)
        first = int(node.params["table_first"][0])
        t_scale, t_zp = _grid(node, "table")
        rows = requantize(x, t_scale, t_zp, "uint8" if first == 0 else "int8") - first
        x = np.asarray(node.params["table"], dtype=np.float64)[rows]
    q = requantize(x, scale, zp, node.attrs["x_dtype"])
    return np.asarray((q - zp) * float(np.float32(scale)), dtype=ft)


def _quantized(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    """An int8 node in the file's integer semantics: its input quantised,
    the integer products summed exactly, times x_scale · weight_scale[oc],
    plus the bias, ReLU; requantised with the output's grid and dequantised
    where out_dtype is an integer type."""
    a = node.attrs
    scale, zp = _grid(node, "x")
    q = requantize(args[0], scale, zp, a["x_dtype"])
    w, ws = node.params["weight"], node.params["weight_scale"]
    bias = node.params["bias"] if "bias" in node.params else None
    if node.op == "quantized_linear":
        rows = q.reshape(-1, q.shape[-1])
        y, _ = int8_linear_reference(rows, scale, zp, w, ws, bias, relu=a["relu"])
        y = y.reshape(node.shape)
    else:
        y, _ = int8_conv2d_reference(q, scale, zp, w, ws, bias, a["stride"], a["padding"],
                                     a["dilation"], a["groups"], relu=a["relu"])
    if a["out_dtype"] != "float32":
        out_scale, out_zp = _grid(node, "out")
        y = (requantize(y, out_scale, out_zp, a["out_dtype"]) - out_zp) * float(
            np.float32(out_scale))
    return np.asarray(y, dtype=ft)


def dynamic_grid(x: npt.ArrayLike) -> tuple[float, int]:
    """ONNX's DynamicQuantizeLinear grid of ``x``, in float32: scale (max(0,
    max x) - min(0, min x)) / 255, zero point round(clip(-min / scale, 0,
    255)), half to even (scale 0 for zeros: every value quantises to 0)."""
    x32 = np.asarray(x, np.float32)
    lo = np.minimum(np.float32(0), x32.min()) if x32.size else np.float32(0)
    hi = np.maximum(np.float32(0), x32.max()) if x32.size else np.float32(0)
    scale = np.float32((hi - lo) / np.float32(255))
    if not scale > 0:
        return 0.0, 0
    return float(scale), int(np.rint(np.clip(np.float32(0) - lo / scale, 0, 255)))


def _dynamic_quantized(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    """A dynamically quantized node in the file's semantics: its input on
    its own range's uint8 grid, the integer products of (q - z) and
    (weight - weight_zero_point) summed exactly, times the scales, plus the
    bias."""
    a = node.attrs
    scale, zp = dynamic_grid(args[0])
    x32 = np.asarray(args[0], np.float32)
    q = (np.clip(np.rint(x32 / np.float32(scale)) + zp, 0, 255) if scale > 0
         else np.zeros(x32.shape))
    zw = node.params["weight_zero_point"].astype(np.float64)
    w = node.params["weight"].astype(np.float64)
    w = w - zw.reshape((-1,) + (1,) * (w.ndim - 1))
    ws, bias = node.params["weight_scale"], node.params.get("bias")
    if node.op == "dynamic_quantized_linear":
        y, _ = int8_linear_reference(q.reshape(-1, x32.shape[-1]), scale, zp, w, ws, bias)
        return np.asarray(y.reshape(node.shape), dtype=ft)
    y, _ = int8_conv2d_reference(q, scale, zp, w, ws, bias, a["stride"], a["padding"],
                                 a["dilation"], a["groups"])
    return np.asarray(y, dtype=ft)


def _matmul(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    a, b = args
    return _activate(node, np.asarray(
        np.matmul(a, np.swapaxes(b, -1, -2) if node.attrs["trans_b"] else b)))


def _embedding_bag(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    (idx,) = args
    table: Array = node.params["table"]
    if node.attrs.get("table_format") == "byte_rowwise":  # its bytes in float32 words
        table = byte_rowwise_dequantize(np.ascontiguousarray(table).view(np.uint8))
    if idx.size and (idx.min() < 0 or idx.max() >= table.shape[0]):
        bad = idx[(idx < 0) | (idx >= table.shape[0])][0]
        raise IndexError(f"embedding_bag {node.name!r}: index {bad} outside "
                         f"[0, {table.shape[0]})")
    rows = table[idx].astype(ft)  # (batch, bag, dim): gather first, cast only what is read
    return np.asarray(rows.sum(axis=1) if node.attrs["mode"] == "sum" else rows.mean(axis=1))


def _gelu(x: Array) -> Array:
    """The exact GELU: x * Phi(x) = x / 2 * (1 + erf(x / sqrt 2))."""
    return np.asarray(0.5 * x * (1 + np.asarray(_erf(x / math.sqrt(2)), dtype=x.dtype)))


def _gelu_tanh(x: Array) -> Array:
    """GELU's tanh approximation: x / 2 * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    return np.asarray(0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))))


def _sigmoid(x: Array) -> Array:
    # exp(-log(1 + exp(-x))) never overflows, unlike 1 / (1 + exp(-x)).
    return np.exp(-np.logaddexp(0, -x))


_ELTWISE: dict[str, Callable[[Array], Array]] = {
    "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.clip(x, 0, 6),
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "gelu": _gelu,
    "gelu_tanh": _gelu_tanh,
    "swish": lambda x: x * _sigmoid(x),
    "hardswish": lambda x: x * (np.clip(x + 3, 0, 6) / 6),
}


def _eltwise(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    return _ELTWISE[node.attrs["kind"]](args[0])


def _add(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    y = args[0] + args[1]
    return np.maximum(y, 0) if node.attrs["relu"] else y


def _pool2d(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    """PyTorch's pooling: max over the padded window (padding never wins); the
    average divides by the window cells inside the padded input
    (count_include_pad) or inside the input itself."""
    (x,) = args
    a = node.attrs
    (kh, kw), (sh, sw), (pt, pb, pl, pr) = a["kernel"], a["stride"], a["padding"]
    _, _, oh, ow = node.shape
    h, w = x.shape[2:]
    # Extra rows / columns past the padding, for the last ceil_mode window.
    eh = max(0, (oh - 1) * sh + kh - (h + pt + pb))
    ew = max(0, (ow - 1) * sw + kw - (w + pl + pr))
    grid = ((pt, pb + eh), (pl, pr + ew))
    real = np.pad(np.ones((h, w)), grid)  # 1 inside the input
    padded = np.pad(np.ones((h + pt + pb, w + pl + pr)), ((0, eh), (0, ew)))  # 1 inside padding

    def windows(v: Array) -> Array:
        return sliding_window_view(v, (kh, kw), axis=(-2, -1))[..., ::sh, ::sw, :, :][
            ..., :oh, :ow, :, :]

    if a["kind"] == "max":
        xp = np.pad(x, ((0, 0), (0, 0), *grid), constant_values=-np.inf)
        return np.asarray(windows(xp).max(axis=(-2, -1)))
    xp = np.pad(x, ((0, 0), (0, 0), *grid))
    total = windows(xp).sum(axis=(-2, -1))
    count = windows(padded if a["count_include_pad"] else real).sum(axis=(-2, -1))
    return np.asarray(total / count)


def _global_avg_pool(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    return np.asarray(args[0].mean(axis=(2, 3)))


def _batch_norm(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    (x,) = args
    bshape = (1, -1) + (1,) * (x.ndim - 2)  # per channel, channels on axis 1

    def p(key: str) -> Array:
        return _param(node, key, ft).reshape(bshape)

    y = (x - p("mean")) / np.sqrt(p("var") + node.attrs["eps"])
    if "scale" in node.params:
        y = y * p("scale")
    return np.asarray(y + p("shift"))


def _layer_norm(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    (x,) = args
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + node.attrs["eps"])
    return np.asarray(y * _param(node, "scale", ft) + _param(node, "shift", ft))


def _softmax(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    ax = node.attrs["axis"]
    e = np.exp(args[0] - args[0].max(axis=ax, keepdims=True))
    return np.asarray(e / e.sum(axis=ax, keepdims=True))


def _tril_flatten(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    (x,) = args
    # np.tril_indices lists (i, j), j < i, row by row: dlrm's li / lj order.
    li, lj = np.tril_indices(x.shape[1], k=-1)
    return np.asarray(x[:, li, lj])


def _cache_length(node: Node, length: Array) -> int:
    """The value of a cache's int64 (1,) length input."""
    value = int(np.asarray(length).reshape(-1)[0])
    if value < 0:
        raise ValueError(f"node {node.name!r}: a cache's length must be >= 0, got {value}")
    return value


def _table_rows(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> tuple[Array, Array]:
    """A rotary node's cos / sin rows: all of them, or with a cache's length
    input the rows of positions length .. length + S - 1."""
    cos, sin = _param(node, "cos", ft), _param(node, "sin", ft)
    if len(args) < 2:
        return cos, sin
    at, seq = _cache_length(node, args[1]), args[0].shape[-2]
    if at + seq > cos.shape[0]:
        raise ValueError(f"node {node.name!r}: length {at} plus {seq} rows is past the "
                         f"context of {cos.shape[0]}")
    return cos[at:at + seq], sin[at:at + seq]


def _rotary(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    """A rotary node by its tables (all rows, a cache's length's, or those
    at its rows' int64 positions (B, S)), or by the positions with the
    angles float32(position) * inv_freq in float32, as the node (and the
    exporters) compute them; their cos / sin in ``ft``."""
    x = args[0]
    if len(args) > 1 and np.ndim(args[1]) == 2 and "cos" in node.params:
        # Tables (C, D) read at the positions.
        positions = np.asarray(args[1])
        rows = node.params["cos"].shape[0]
        if positions.min() < 0 or positions.max() >= rows:
            raise ValueError(f"node {node.name!r}: positions {positions.min()} .. "
                             f"{positions.max()} are outside its tables' {rows} rows")
        view = (x.shape[0], *(1,) * (x.ndim - 3), *x.shape[-2:])
        cos, sin = (np.reshape(_param(node, w, ft)[positions], view) for w in ("cos", "sin"))
        return transformer_math.rotary(x, cos, sin)
    if "inv_freq" not in node.params:
        return transformer_math.rotary(x, *_table_rows(node, args, ft))
    positions = np.asarray(args[1])
    inv_freq = np.asarray(node.params["inv_freq"], np.float32)
    angles = (positions.astype(np.float32)[..., None] * inv_freq).astype(ft)
    both = np.concatenate([angles, angles], axis=-1)  # (B, S, D)
    scaling = np.asarray(node.params["scaling"], ft).reshape(())
    # x (B, ..., S, D): the tables broadcast over the axes between.
    view = (x.shape[0], *(1,) * (x.ndim - 3), *both.shape[1:])
    cos, sin = (np.reshape(f(both) * scaling, view) for f in (np.cos, np.sin))
    return transformer_math.rotary(x, cos, sin)


def _decode_attention(node: Node, args: Sequence[Array], ft: np.dtype[Any]) -> Array:
    """A decode step's attention; with a cache's length (an int64 sixth
    input) over the cache's first ``length`` rows and the new ones (the
    cache itself is left as it is)."""
    a = node.attrs
    if len(args) > 5 and np.asarray(args[5]).dtype == np.int64:
        at = _cache_length(node, args[5])
        if at + args[1].shape[2] > args[3].shape[2]:
            raise ValueError(f"node {node.name!r}: length {at} plus {args[1].shape[2]} rows "
                             f"is past the context of {args[3].shape[2]}")
        return transformer_math.decode_attention(args[0], args[1], args[2], args[3][:, :, :at],
                                                 args[4][:, :, :at], None, a["scale"],
                                                 a["causal_fill"])
    return transformer_math.decode_attention(args[0], args[1], args[2], args[3], args[4],
                                             args[5] if len(args) > 5 else None, a["scale"],
                                             a["causal_fill"])


_OPS: dict[str, Callable[[Node, Sequence[Array], np.dtype[Any]], Array]] = {
    "constant": lambda node, args, ft: np.asarray(node.params["value"], dtype=ft),
    "conv2d": _conv2d,
    "linear": _linear,
    "matmul": _matmul,
    "embedding_bag": _embedding_bag,
    "eltwise": _eltwise,
    "add": _add,
    "mul": lambda node, args, ft: args[0] * args[1],
    "concat": lambda node, args, ft: np.concatenate(args, axis=node.attrs["axis"]),
    "pool2d": _pool2d,
    "global_avg_pool": _global_avg_pool,
    "batch_norm": _batch_norm,
    "layer_norm": _layer_norm,
    "softmax": _softmax,
    "reshape": lambda node, args, ft: args[0].reshape(node.attrs["shape"]),
    "transpose": lambda node, args, ft: np.ascontiguousarray(
        args[0].transpose(node.attrs["perm"])),
    "tril_flatten": _tril_flatten,
    # A change of memory layout only: the same values.
    "reorder": lambda node, args, ft: args[0],
    "slice": lambda node, args, ft: args[0][node.attrs["start"]:node.attrs["start"] + node.shape[0]],
    "position_ids": lambda node, args, ft: padded_positions(args[0], node.attrs["pad_id"],
                                                            node.attrs["offset"]),
    "rms_norm": lambda node, args, ft: transformer_math.rms_norm(
        args[0], _param(node, "scale", ft), node.attrs["eps"]),
    "rotary": _rotary,
    "attention": lambda node, args, ft: transformer_math.attention(
        args[0], args[1], args[2], args[3] if len(args) > 3 else None, node.attrs["causal"],
        node.attrs["scale"], node.attrs["causal_fill"]),
    "decode_attention": _decode_attention,
    "glu": lambda node, args, ft: transformer_math.glu(args[0], args[1], node.attrs["kind"]),
    "quantized_linear": _quantized,
    "quantized_conv2d": _quantized,
    "fake_quantize": _fake_quantize,
    "dynamic_quantized_linear": _dynamic_quantized,
    "dynamic_quantized_conv2d": _dynamic_quantized,
}
