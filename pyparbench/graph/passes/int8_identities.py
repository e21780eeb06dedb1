"""Fake_quantize nodes that change nothing, dropped after the layout pass.

A QDQ file rounds a value onto its grid again after ops that only move
values: a channel shuffle's reshape and transpose, slices, layout reorders,
a concat of values on one grid, a max pool (quantize_static gives those
ops' outputs their input's grid). Such a fake_quantize reads values already
on its grid, and rounding a grid value k · scale (k an integer) onto the
same grid gives it back: k · scale / scale is within an ulp of k, far from
a tie. So the node is dropped, its readers read its input, and values and
results are the same to the bit.
"""

from __future__ import annotations

from pyparbench.graph.ir import Graph
from pyparbench.graph.node import Node
from pyparbench.graph.passes.int8_values import Grid, output_grid
from pyparbench.graph.passes.rewrite import Emitter

__all__ = ["int8_identities"]

# Ops whose output values are some of their input's values (one input).
_MOVES = frozenset({"reshape", "transpose", "slice", "reorder"})


def _moves_values(n: Node) -> bool:
    return n.op in _MOVES or (n.op == "pool2d" and n.attrs["kind"] == "max") or n.op == "concat"


def _stored_alike(a: Node, b: Node) -> bool:
    """Same shape, type and layout: one can stand for the other."""
    return (a.shape == b.shape and a.dtype == b.dtype
            and a.attrs.get("layout", "nchw") == b.attrs.get("layout", "nchw"))


def _grids(g: Graph) -> dict[int, Grid]:
    """The grid each value lies on: a grid-writing node's, and through ops
    that only move values (a concat where its inputs share one)."""
    grids: dict[int, Grid] = {}
    for n in g.nodes:
        grid = output_grid(n)
        if grid is None and _moves_values(n):
            found = {grids.get(i) for i in n.inputs}
            grid = found.pop() if len(found) == 1 else None
        if grid is not None:
            grids[n.id] = grid
    return grids


def int8_identities(g: Graph) -> Graph:
    """``g`` without the fake_quantize nodes that read, through ops that
    only move values, values on their own grid (see the module's text)."""
    grids = _grids(g)
    outputs = set(g.outputs)
    dropped = {n.id for n in g.nodes
               if n.op == "fake_quantize" and len(n.inputs) == 1 and n.id not in outputs
               and _moves_values(g[n.inputs[0]]) and grids.get(n.inputs[0]) == output_grid(n)
               and _stored_alike(g[n.inputs[0]], n)}
    if not dropped:
        return g
    em = Emitter()
    new: dict[int, int] = {}
    for n in g.nodes:
        if n.id in dropped:
            new[n.id] = new[n.inputs[0]]
        else:
            new[n.id] = em.copy(n, (new[i] for i in n.inputs))
    return em.graph(g, [new[o] for o in g.outputs])
