"""Int8 values kept as bytes between int8 nodes, after the layout pass.

A QDQ file's int8 nodes (graph.onnx.convert_quantized) are float32 in and
out: each requantised output is dequantised, and the next int8 node
quantises it again onto the same grid, which gives back the same bytes.
Here, where every reader of a value on a grid takes it on that grid, the
value stays those bytes (node dtype "uint8" / "int8", one byte an element):

* an int8 convolution or product with an output grid, a fake_quantize, and
  a max pool of such bytes, write bytes where each reader is an int8
  convolution or product whose input grid is that grid, a fake_quantize
  (which dequantises them in float32, as DequantizeLinear) or a max pool
  writing bytes (the largest byte is the largest value); 4-D values only
  where both sides are channels-last (the int8 kernels' own order);
* a residual ``add`` whose only reader is a fake_quantize is fused into it
  (the fake_quantize sums its two inputs in float32, as the Add did), and
  one that int8 matrix nodes alone read, all on one grid, becomes a
  fake_quantize of its two inputs onto that grid (each reader would have
  quantised the sum onto it): a QDQ residual block's sum reads the two
  values as bytes and writes bytes.

Values, and so results, are the same to the bit: a value's bytes are the
integers its float32 form is (q - zero point) · scale of.
"""

from __future__ import annotations

import numpy as np

from pyparbench.graph.ir import Graph
from pyparbench.graph.node import ArrayParams, Node
from pyparbench.graph.passes.rewrite import DerivedParams, Emitter, fusable, has_activation

__all__ = ["Grid", "int8_values", "output_grid"]

Grid = tuple[str, float, float]
"""A quantisation grid: (integer type, scale, zero point)."""


def output_grid(n: Node) -> Grid | None:
    """The grid ``n`` writes its values on, or None."""
    if n.op == "fake_quantize":
        return (n.attrs["x_dtype"], float(n.params["x_scale"][0]),
                float(n.params["x_zero_point"][0]))
    if n.op in ("quantized_conv2d", "quantized_linear") and n.attrs["out_dtype"] != "float32":
        return (n.attrs["out_dtype"], float(n.params["out_scale"][0]),
                float(n.params["out_zero_point"][0]))
    return None


def _input_grid(n: Node) -> Grid:
    return (n.attrs["x_dtype"], float(n.params["x_scale"][0]),
            float(n.params["x_zero_point"][0]))


def _same_order(a: Node, b: Node) -> bool:
    """Both store the value alike: channels-last for a 4-D value, else plain."""
    return _layout(a) == _layout(b) == ("nhwc" if len(a.shape) == 4 else "nchw")


def _layout(n: Node) -> str:
    return str(n.attrs.get("layout", "nchw"))


def _sum_grid(g: Graph, n: Node) -> Grid | None:
    """The grid every int8 matrix node reading ``n`` quantises it onto, where
    they alone read it and agree, else None."""
    readers = [g[r] for r in g.consumers[n.id]]
    grids = {_input_grid(r) for r in readers
             if r.op in ("quantized_conv2d", "quantized_linear") and r.inputs == (n.id,)}
    return grids.pop() if len(grids) == 1 and len(readers) == len(
        [r for r in readers if r.op in ("quantized_conv2d", "quantized_linear")]) else None


def _fused_sums(g: Graph) -> Graph:
    """Each same-shape ``add`` (no activation, no graph output) whose only
    reader is a fake_quantize, fused into it (the fake_quantize reads the two
    addends); or whose readers are int8 matrix nodes alone, all on one input
    grid: a fake_quantize of the two addends onto that grid, which they
    would each have quantised the sum onto."""
    em = Emitter()
    new: dict[int, int] = {}
    fused: dict[int, Node] = {}  # fake_quantize id -> the add it takes in
    outputs = set(g.outputs)
    changed = False
    for n in g.nodes:
        if n.id in fused:
            new[n.id] = em.copy(n, (new[i] for i in fused[n.id].inputs))
            continue
        if (n.op == "add" and not has_activation(n) and n.id not in outputs
                and all(g[i].shape == n.shape and g[i].dtype == "float32" for i in n.inputs)):
            readers = [g[r] for r in g.consumers[n.id]]
            if (len(readers) == 1 and readers[0].op == "fake_quantize"
                    and len(readers[0].inputs) == 1 and fusable(g, n, readers[0])
                    and _layout(n) == _layout(readers[0])):
                fused[readers[0].id] = n
                changed = True
                continue
            grid = _sum_grid(g, n)
            if grid is not None:
                dtype, scale, zp = grid
                params = ArrayParams({"x_scale": np.array([scale], np.float32),
                                      "x_zero_point": np.array([zp], np.float32)})
                new[n.id] = em.emit("fake_quantize", tuple(new[i] for i in n.inputs),
                                    {"x_dtype": dtype, "layout": _layout(n)}, params,
                                    n.shape, "float32", n.name)
                changed = True
                continue
        new[n.id] = em.copy(n, (new[i] for i in n.inputs))
    return em.graph(g, [new[o] for o in g.outputs]) if changed else g


def _keeps_grid(n: Node) -> bool:
    """A max pool: it picks values, so they stay on their grid."""
    return n.op == "pool2d" and n.attrs["kind"] == "max" and _layout(n) == "nhwc"


def _reads_bytes(value: Node, grid: Grid, reader: Node, as_bytes: set[int]) -> bool:
    """Whether ``reader`` can take ``value`` (on ``grid``) as its bytes: a
    max pool where it writes bytes itself."""
    if not _same_order(value, reader):
        return False
    if reader.op == "fake_quantize":
        return True
    if _keeps_grid(reader):
        return reader.id in as_bytes
    return (reader.op in ("quantized_conv2d", "quantized_linear")
            and reader.inputs[0] == value.id and _input_grid(reader) == grid)


def _with_input_grids(n: Node, grids: dict[int, Grid]) -> DerivedParams:
    """A fake_quantize's parameters and, for each input ``j`` read as bytes,
    that input's grid (in<j>_scale, in<j>_zero_point)."""
    extra = {f"in{j}_{what}": np.array([value], np.float32)
             for j, (_, scale, zp) in grids.items()
             for what, value in (("scale", scale), ("zero_point", zp))}
    shapes = {**n.params.shapes, **{k: (1,) for k in extra}}
    params = n.params
    return DerivedParams(shapes, lambda: {**{k: params[k] for k in params}, **extra})


def int8_values(g: Graph) -> Graph:
    """``g`` with its int8 values kept as bytes (see the module's text)."""
    g = _fused_sums(g)
    outputs = set(g.outputs)
    grids: dict[int, Grid] = {}  # the grid each value lies on
    for n in g.nodes:
        grid = output_grid(n)
        if grid is None and _keeps_grid(n) and n.inputs[0] in grids:
            grid = grids[n.inputs[0]]
        if grid is not None:
            grids[n.id] = grid
    # Readers before their values: whether a max pool writes bytes decides
    # whether its input may be bytes.
    as_bytes: set[int] = set()
    for n in reversed(g.nodes):
        readers = [g[r] for r in g.consumers[n.id]]
        if (n.id in grids and readers and n.id not in outputs
                and all(_reads_bytes(n, grids[n.id], r, as_bytes) for r in readers)):
            as_bytes.add(n.id)
    # A max pool reads bytes only where it writes them, and the reverse.
    for n in g.nodes:
        if n.id in as_bytes and _keeps_grid(n) and n.inputs[0] not in as_bytes:
            as_bytes.discard(n.id)
    if not as_bytes:
        return g
    em = Emitter()
    for n in g.nodes:
        dtype = grids[n.id][0] if n.id in as_bytes else n.dtype
        params = n.params
        if n.op == "fake_quantize":
            read = {j: grids[i] for j, i in enumerate(n.inputs) if i in as_bytes}
            if read:
                params = _with_input_grids(n, read)
        em.emit(n.op, n.inputs, dict(n.attrs), params, n.shape, dtype, n.name)
    return em.graph(g, list(g.outputs))
