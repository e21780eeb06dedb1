"""SiLU gates of grid values as one lookup, after the layout pass.

A QDQ file's SiLU between int8 convolutions is x · DQ(Q(sigmoid(x))), then
rounded onto the next grid: a sigmoid, a fake_quantize and a mul, each a
float32 pass over the feature map, then the rounding. Where x is a value on
a grid (an int8 node's requantised output, a fake_quantize's), it takes at
most 256 values, so the whole gate is a function of x's byte. Here the
chain (sigmoid, its fake_quantize, the mul, and the fake_quantize after it
or the rounding its int8 readers would make) becomes one fake_quantize
whose ``table`` holds the gate's float32 value for each byte, computed with
the executor's own sigmoid and the fake_quantize's and mul's float32
arithmetic; the node rounds table[byte] onto the output grid, one lookup an
element, and graph.passes.int8_values then passes x to it as bytes.

The plan runs some sigmoids on its direct kernels (the thread rule's
choice) and the others on oneDNN's; the table is oneDNN's. The two differ
in the last bit on many inputs, which moves the rounded sigmoid (by one
step) only where it lies on a tie of its grid: the results are the float
chain's to the bit but for such ties.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pyparbench.graph.ir import Graph
from pyparbench.graph.node import ArrayParams, Node
from pyparbench.graph.passes.int8_values import Grid, output_grid
from pyparbench.graph.passes.rewrite import Emitter, fusable, has_activation

__all__ = ["gate_table", "int8_gates"]

_MATRIX_OPS = ("quantized_conv2d", "quantized_linear")


def _grid_of(n: Node, prefix: str) -> Grid:
    return (n.attrs["x_dtype"] if prefix == "x" else n.attrs["out_dtype"],
            float(n.params[f"{prefix}_scale"][0]), float(n.params[f"{prefix}_zero_point"][0]))


def _rounded(v: npt.NDArray[np.float32], grid: Grid) -> npt.NDArray[np.float32]:
    """``v`` rounded onto ``grid`` and back, in float32 as the fake_quantize
    node computes it: v / scale, half to even, plus the zero point,
    saturated, minus it, times the scale."""
    dtype, scale, zp = grid
    lo, hi = (0.0, 255.0) if dtype == "uint8" else (-128.0, 127.0)
    s, z = np.float32(scale), np.float32(zp)
    q = np.clip(np.rint(v / s) + z, np.float32(lo), np.float32(hi)).astype(np.float32)
    return np.asarray((q - z) * s, dtype=np.float32)


def gate_table(x_grid: Grid, sigmoid_grid: Grid) -> npt.NDArray[np.float32]:
    """x · round(sigmoid(x)) in float32 for each of the 256 values x of
    ``x_grid``, lowest byte first: the sigmoid oneDNN's (the executor's
    eltwise kernel), rounded onto ``sigmoid_grid``."""
    from pyparbench._core import ops as _ops  # noqa: PLC0415 (framework child: no native core)

    dtype, scale, zp = x_grid
    first = 0 if dtype == "uint8" else -128
    q = np.arange(first, first + 256, dtype=np.float32)
    x = np.asarray((q - np.float32(zp)) * np.float32(scale), dtype=np.float32)
    s = np.asarray(_ops.Eltwise("sigmoid", [256], threads=1).run(np.ascontiguousarray(x)), np.float32)
    return np.asarray(x * _rounded(s, sigmoid_grid), dtype=np.float32)


def _readers(g: Graph, n: Node) -> list[Node]:
    return [g[r] for r in g.consumers[n.id]]


def _rounding_after(g: Graph, mul: Node) -> tuple[Grid, list[Node]] | None:
    """The grid ``mul``'s value is rounded onto next, and the fake_quantize
    that rounds it (none where int8 matrix nodes alone read it, all on one
    input grid: each quantises it itself)."""
    readers = _readers(g, mul)
    if mul.id in g.outputs or not readers:
        return None
    if len(readers) == 1 and readers[0].op == "fake_quantize" and len(readers[0].inputs) == 1:
        return _grid_of(readers[0], "x"), readers
    grids = {_grid_of(r, "x") for r in readers if r.op in _MATRIX_OPS and r.inputs == (mul.id,)}
    if len(grids) == 1 and all(r.op in _MATRIX_OPS for r in readers):
        return grids.pop(), []
    return None


def _gate(g: Graph, x: Node) -> tuple[Node, Node, Node, Grid, list[Node]] | None:
    """The sigmoid, its fake_quantize, the mul, the output grid and the
    fake_quantize replaced, where ``x`` is a grid value read only by a SiLU
    gate (see the module's text); else None."""
    # x must reach the lookup as bytes (graph.passes.int8_values): stored
    # channels-last where it is 4-D, as the int8 nodes store bytes.
    layout = x.attrs.get("layout", "nchw")
    if (output_grid(x) is None or x.id in g.outputs or x.dtype != "float32"
            or layout != ("nhwc" if len(x.shape) == 4 else "nchw")):
        return None
    readers = _readers(g, x)
    sig = next((r for r in readers if r.op == "eltwise" and r.attrs.get("kind") == "sigmoid"),
               None)
    mul = next((r for r in readers if r.op == "mul"), None)
    if sig is None or mul is None or len(readers) != 2 or has_activation(sig):
        return None
    after_sig = _readers(g, sig)
    if len(after_sig) != 1 or after_sig[0].op != "fake_quantize" or not fusable(g, sig, after_sig[0]):
        return None
    fq = after_sig[0]
    if (len(fq.inputs) != 1 or not fusable(g, fq, mul) or sorted(mul.inputs) != sorted((x.id, fq.id))
            or has_activation(mul) or not x.shape == sig.shape == fq.shape == mul.shape):
        return None
    if any(n.attrs.get("layout", "nchw") != layout for n in (sig, fq, mul)):
        return None
    after = _rounding_after(g, mul)
    if after is None:
        return None
    return sig, fq, mul, after[0], after[1]


def int8_gates(g: Graph) -> Graph:
    """``g`` with each SiLU gate of a grid value one fake_quantize that
    looks its output up (see the module's text)."""
    gates = {}
    for n in g.nodes:
        found = _gate(g, n)
        if found is not None:
            gates[found[2].id] = (n, *found)
    if not gates:
        return g
    gone = {m.id for x, sig, fq, mul, grid, rounding in gates.values()
            for m in (sig, fq, *rounding)}
    replaced = {rounding[0].id: mul_id for mul_id, (*_, rounding) in gates.items() if rounding}
    em = Emitter()
    new: dict[int, int] = {}
    for n in g.nodes:
        if n.id in gone:
            if n.id in replaced:
                new[n.id] = new[replaced[n.id]]
            continue
        if n.id in gates:
            x, sig, fq, mul, grid, _ = gates[n.id]
            dtype, scale, zp = grid
            x_grid = output_grid(x)
            assert x_grid is not None  # _gate checked it
            x_dtype, x_scale, x_zp = x_grid
            params = ArrayParams({"x_scale": np.array([scale], np.float32),
                                  "x_zero_point": np.array([zp], np.float32),
                                  "table": gate_table(x_grid, _grid_of(fq, "x")),
                                  # the grid the table's rows stand for (the reference's)
                                  "table_scale": np.array([x_scale], np.float32),
                                  "table_zero_point": np.array([x_zp], np.float32),
                                  "table_first": np.array([0 if x_dtype == "uint8" else -128],
                                                          np.float32)})
            new[n.id] = em.emit("fake_quantize", (new[x.id],),
                                {"x_dtype": dtype, "layout": n.attrs.get("layout", "nchw")},
                                params, n.shape, "float32", n.name)
            continue
        new[n.id] = em.copy(n, (new[i] for i in n.inputs))
    return em.graph(g, [new[o] for o in g.outputs])
