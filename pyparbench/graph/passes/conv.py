"""Convolution rewrites on channels-last data: a strided pointwise conv split
into a subsampling pool and a stride-1 conv, and the convs the native plan may
run as gathered patches and one matmul (im2col)."""

from __future__ import annotations

from pyparbench.graph.ir import Graph
from pyparbench.graph.node import Node, Params
from pyparbench.graph.passes.rewrite import Emitter

__all__ = ["im2col_marks", "subsample"]


def _strided_pointwise(g: Graph, n: Node) -> bool:
    """A channels-last 1x1 conv2d of stride > 1 with no padding or dilation."""
    return (n.op == "conv2d" and n.attrs.get("layout") == "nhwc"
            and tuple(n.params.shapes["weight"][2:]) == (1, 1)
            and tuple(n.attrs["stride"]) != (1, 1) and not any(n.attrs["padding"])
            and tuple(n.attrs["dilation"]) == (1, 1))


def subsample(g: Graph) -> Graph:
    """Split each channels-last strided 1x1 conv2d into a window-1 max pool of
    its stride (the pixels it reads, copied once per input and stride) and a
    stride-1 conv2d. Values are unchanged: the max over one pixel is it."""
    if not any(_strided_pointwise(g, n) for n in g.nodes):
        return g
    em = Emitter()
    remap: dict[int, int] = {}
    picked: dict[tuple[int, tuple[int, ...]], int] = {}  # (input, stride) -> pool
    for n in g.nodes:
        ins = tuple(remap[i] for i in n.inputs)
        if not _strided_pointwise(g, n):
            remap[n.id] = em.copy(n, ins)
            continue
        stride = tuple(n.attrs["stride"])
        key = (n.inputs[0], stride)
        if key not in picked:
            x = g[n.inputs[0]]
            shape = (x.shape[0], x.shape[1], n.shape[2], n.shape[3])
            attrs = {"kind": "max", "kernel": (1, 1), "stride": stride, "padding": (0, 0, 0, 0),
                     "ceil_mode": False, "count_include_pad": True, "layout": "nhwc"}
            picked[key] = em.emit("pool2d", (ins[0],), attrs, Params({}, 0, 0), shape,
                                  x.dtype, f"{x.name}/stride{stride[0]}x{stride[1]}")
        remap[n.id] = em.copy(n, (picked[key], *ins[1:]), stride=(1, 1))
    return em.graph(g, [remap[o] for o in g.outputs])


def im2col_marks(g: Graph) -> Graph:
    """Mark every channels-last, ungrouped, non-pointwise conv2d ``im2col``:
    the native plan runs it as gathered patches and one matmul where that is
    faster than oneDNN's convolution for its shape and this machine
    (``gemm_conv2d_pays`` in the C++ core); values are unchanged."""
    marked = [n.id for n in g.nodes
              if n.op == "conv2d" and n.attrs.get("layout") == "nhwc" and n.attrs["groups"] == 1
              and tuple(n.params.shapes["weight"][2:]) != (1, 1)]
    if not marked:
        return g
    em = Emitter()
    for n in g.nodes:
        em.copy(n, n.inputs, **({"im2col": True} if n.id in marked else {}))
    return em.graph(g, g.outputs)
