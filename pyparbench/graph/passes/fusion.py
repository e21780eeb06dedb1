"""Fusion passes: batch norm folded into the conv / linear before it, a
residual add and an activation fused into the op that produces their input
(oneDNN's sum and eltwise post-ops)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from pyparbench.graph.ir import Graph
from pyparbench.graph.node import Node, Params
from pyparbench.graph.opdefs import FUSABLE_ACTIVATIONS
from pyparbench.graph.passes.rewrite import DerivedParams, Emitter, fusable, has_activation

__all__ = ["activation_fusion", "bn_fold", "residual_fusion"]


def bn_fold(g: Graph) -> Graph:
    """Fold each inference batch-norm into the conv2d or 2-D linear before it:
    w' = w * s, b' = (b - mean) * s + shift with s = scale / sqrt(var + eps),
    per output channel, computed in float64. Only when the conv / linear
    output has no other reader and no fused activation or residual."""
    folds: dict[int, int] = {}  # producer id -> batch-norm id
    for n in g.nodes:
        if n.op != "batch_norm":
            continue
        p = g[n.inputs[0]]
        ok = (p.op == "conv2d" and len(p.inputs) == 1) or (p.op == "linear" and len(p.shape) == 2)
        if ok and not has_activation(p) and fusable(g, p, n):
            folds[p.id] = n.id
    if not folds:
        return g
    return _merged(g, folds, _folded)


def _folded(conv: Node, bn: Node) -> tuple[dict[str, Any], Params]:
    """The attributes and parameters of ``conv`` with ``bn`` folded in (the
    weights and bias are computed on first access)."""
    def make() -> dict[str, np.ndarray]:
        w = np.asarray(conv.params["weight"], np.float64)
        b = (np.asarray(conv.params["bias"], np.float64) if "bias" in conv.params
             else np.zeros(w.shape[0]))
        mean = np.asarray(bn.params["mean"], np.float64)
        var = np.asarray(bn.params["var"], np.float64)
        scale = (np.asarray(bn.params["scale"], np.float64) if "scale" in bn.params
                 else np.ones_like(mean))
        shift = np.asarray(bn.params["shift"], np.float64)
        s = scale / np.sqrt(var + float(bn.attrs["eps"]))
        return {"weight": w * s.reshape((-1,) + (1,) * (w.ndim - 1)), "bias": (b - mean) * s + shift}
    weight = conv.params.shapes["weight"]
    return dict(conv.attrs), DerivedParams({"weight": weight, "bias": (weight[0],)}, make)


def _ancestors(g: Graph, node: int) -> set[int]:
    seen: set[int] = set()
    stack = list(g[node].inputs)
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack.extend(g[i].inputs)
    return seen


def _may_overwrite(g: Graph, residual: Node, conv: Node, add: Node) -> bool:
    """The fused node may write into the residual's buffer: that buffer is
    the residual's own (not a graph input's, not shared by a reshape), it is
    no graph output nor the conv's source, and every other reader of it has finished before the
    conv starts (is the conv's ancestor), so nothing reads it afterwards."""
    if residual.op in ("input", "constant", "reshape") or residual.id in g.outputs:
        return False
    if residual.id in conv.inputs:  # a convolution cannot write over its own source
        return False
    before = _ancestors(g, conv.id)
    for c in g.consumers[residual.id]:
        if c == add.id:
            continue
        if g[c].op == "reshape" or c not in before:
            return False
    return True


def residual_fusion(g: Graph) -> Graph:
    """Fuse ``add(conv(x), r)`` (and the add's ReLU) into the conv: its second
    input is the residual, added by oneDNN's sum post-op before the
    activation. Where the residual is dead after the add the conv writes in
    place into its buffer (attribute ``inplace``), else into its own after a
    copy. Of two conv inputs the later one is fused (the other, computed
    first, is the residual)."""
    fuse: dict[int, tuple[int, int, bool]] = {}  # add id -> (conv id, residual id, in place)
    for n in g.nodes:
        if n.op != "add" or g[n.inputs[0]].shape != g[n.inputs[1]].shape:
            continue
        cands = [g[i] for i in n.inputs
                 if g[i].op == "conv2d" and len(g[i].inputs) == 1 and not has_activation(g[i])
                 and fusable(g, g[i], n) and g[i].attrs.get("layout") is None]
        if not cands or n.inputs[0] == n.inputs[1]:
            continue
        conv = max(cands, key=lambda c: c.id)
        r = g[n.inputs[1] if n.inputs[0] == conv.id else n.inputs[0]]
        fuse[n.id] = (conv.id, r.id, _may_overwrite(g, r, conv, n))
    if not fuse:
        return g
    by_conv = {c: (a, r, inplace) for a, (c, r, inplace) in fuse.items()}
    em = Emitter()
    remap: dict[int, int] = {}
    for n in g.nodes:
        if n.id in by_conv:  # emitted at its add, where the residual exists
            continue
        if n.id in fuse:
            conv_id, r_id, inplace = fuse[n.id]
            conv = g[conv_id]
            attrs = dict(conv.attrs)
            if n.attrs.get("relu"):
                attrs["activation"] = "relu"
            if inplace:
                attrs["inplace"] = 1
            ins = (remap[conv.inputs[0]], remap[r_id])
            remap[n.id] = remap[conv_id] = em.emit(
                "conv2d", ins, attrs, conv.params, n.shape, n.dtype, n.name)
            continue
        remap[n.id] = em.copy(n, (remap[i] for i in n.inputs))
    return em.graph(g, [remap[o] for o in g.outputs])


def activation_fusion(g: Graph, kinds: Iterable[str] = FUSABLE_ACTIVATIONS) -> Graph:
    """Fuse each eltwise of ``kinds`` into the conv2d / linear / matmul before
    it (attribute ``activation``), when nothing else reads the producer's
    value and it has no activation yet. A conv with a residual applies the
    activation after the sum, as the eltwise did after the add."""
    allowed = set(kinds)
    fuse: dict[int, int] = {}  # producer id -> eltwise id
    for n in g.nodes:
        if n.op != "eltwise" or n.attrs["kind"] not in allowed:
            continue
        p = g[n.inputs[0]]
        if p.op in ("conv2d", "linear", "matmul") and not has_activation(p) \
                and fusable(g, p, n):
            fuse[p.id] = n.id
    if not fuse:
        return g
    return _merged(g, fuse, lambda p, act: ({**p.attrs, "activation": act.attrs["kind"]},
                                             p.params))


def relu_flag_fusion(g: Graph) -> Graph:
    """Fuse each ReLU into the conv2d / linear before it as its ``relu``
    flag (what the int8 nodes take: their ReLU runs on the s32 sum's
    float result, before the output is written), when nothing else reads
    the producer's value and it has no activation yet."""
    fuse: dict[int, int] = {}  # producer id -> eltwise id
    for n in g.nodes:
        if n.op != "eltwise" or n.attrs["kind"] != "relu":
            continue
        p = g[n.inputs[0]]
        if p.op in ("conv2d", "linear") and len(p.inputs) == 1 and not has_activation(p) \
                and fusable(g, p, n):
            fuse[p.id] = n.id
    if not fuse:
        return g
    return _merged(g, fuse, lambda p, act: ({**p.attrs, "relu": True}, p.params))


def _merged(g: Graph, readers: Mapping[int, int],
            merge: Callable[[Node, Node], tuple[dict[str, Any], Params]]) -> Graph:
    """``g`` with each producer of ``readers`` (producer id -> the id of its
    only reader) and that reader made one node: the producer's op on its
    inputs, with the attributes and parameters ``merge(producer, reader)``
    gives, and the reader's output, under the reader's name."""
    em = Emitter()
    remap: dict[int, int] = {}
    for n in g.nodes:
        if n.id in remap:  # a reader, emitted with its producer
            continue
        ins = tuple(remap[i] for i in n.inputs)
        r = readers.get(n.id)
        if r is None:
            remap[n.id] = em.copy(n, ins)
            continue
        reader = g[r]
        attrs, params = merge(n, reader)
        remap[n.id] = remap[r] = em.emit(n.op, ins, attrs, params, reader.shape, reader.dtype,
                                         reader.name)
    return em.graph(g, [remap[o] for o in g.outputs])
