"""Rotary position embeddings as exporters write them (Llama's, Qwen2's
rotate-half): x * cos + Concat(-x[..., D/2:], x[..., :D/2]) * sin with
constant tables (the exporters' ``Sin`` / ``Cos`` of the fixed positions,
folded here), found in a file's nodes and replaced by one
``RotaryEmbedding`` node (ONNX's, opset 23), which the importer maps onto
the native ``rotary`` kernel.

The pattern is taken from its shape (an Add of two Muls, one of x and one
of a Concat of a Neg) and then checked by evaluating the nodes on random
x (onnx's reference evaluator) against the rotate-half formula.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from pyparbench.graph.onnx.attention import Constants, run_nodes
from pyparbench.graph.onnx.values import Array
from pyparbench.graph.transformer_math import rotary

__all__ = ["fuse_rotary"]


def _table(c: Constants, name: str, shape: tuple[int, ...]) -> Array | None:
    """A constant table broadcast over x's leading axes: (S, D), or None."""
    t = c.get(name)
    if t is None or t.dtype.kind != "f" or t.ndim > len(shape) or t.ndim < 2:
        return None
    try:
        full = np.broadcast_to(t, shape)
    except ValueError:
        return None
    lead = full.reshape(-1, *shape[-2:])
    if not np.all(lead == lead[:1]):
        return None
    return np.asarray(lead[0], np.float32)


def _rotary_of(nodes: Sequence[onnx.NodeProto], producer: Mapping[str, int], c: Constants,
               add: int, shapes_of: Mapping[str, tuple[int, ...]], opset: int
               ) -> tuple[str, Array, Array] | None:
    """(x, cos, sin) where node ``add`` is x * cos + rotate_half(x) * sin."""
    n = nodes[add]
    muls = [producer.get(i) for i in n.input[:2]]
    if any(m is None or nodes[m].op_type != "Mul" for m in muls):
        return None
    for plain, turned in ((muls[0], muls[1]), (muls[1], muls[0])):
        assert plain is not None and turned is not None
        cat = next((producer.get(i) for i in nodes[turned].input
                    if producer.get(i) is not None
                    and nodes[producer[i]].op_type == "Concat"), None)
        if cat is None:
            continue
        sin_name = next(i for i in nodes[turned].input if i != nodes[cat].output[0])
        for x, cos_name in ((nodes[plain].input[0], nodes[plain].input[1]),
                            (nodes[plain].input[1], nodes[plain].input[0])):
            shape = shapes_of.get(x)
            if shape is None or len(shape) < 2 or shape[-1] % 2:
                continue
            cos, sin = _table(c, cos_name, shape), _table(c, sin_name, shape)
            if cos is None or sin is None:
                continue
            if _checks(nodes, producer, c, add, x, shape, cos, sin, opset):
                return x, cos, sin
    return None


def _checks(nodes: Sequence[onnx.NodeProto], producer: Mapping[str, int], c: Constants,
            add: int, x: str, shape: tuple[int, ...], cos: Array, sin: Array,
            opset: int) -> bool:
    """The nodes between x and ``add`` compute the rotate-half formula."""
    sub: list[int] = []
    stack = [add]
    while stack:
        k = stack.pop()
        if k in sub:
            continue
        sub.append(k)
        for i in nodes[k].input:
            j = producer.get(i)
            if i and i != x and j is not None and c.get(i) is None:
                stack.append(j)
        if len(sub) > 16:
            return False
    seeded = {x: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    vals = run_nodes(nodes, c, sorted(sub), seeded, opset)
    if vals is None:
        return False
    got = vals[nodes[add].output[0]]
    want = rotary(vals[x].astype(np.float64), cos.astype(np.float64), sin.astype(np.float64))
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-5, atol=1e-5))


def fuse_rotary(nodes: list[onnx.NodeProto], inits: Mapping[str, object], outputs: set[str],
                shapes_of: Mapping[str, tuple[int, ...]], opset: int
                ) -> list[onnx.NodeProto]:
    """The nodes with each rotate-half rotary embedding replaced by one
    RotaryEmbedding node of x and (1, S, D / 2) cos / sin caches (Constant
    nodes); the tables' halves must agree (as cat(freqs, freqs) makes them)."""
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    c = Constants(nodes, inits, shapes_of, opset)
    new: dict[int, list[onnx.NodeProto]] = {}
    for k, n in enumerate(nodes):
        if n.op_type != "Add":
            continue
        found = _rotary_of(nodes, producer, c, k, shapes_of, opset)
        if found is None:
            continue
        x, cos, sin = found
        half = cos.shape[-1] // 2
        if not (np.array_equal(cos[:, :half], cos[:, half:])
                and np.array_equal(sin[:, :half], sin[:, half:])):
            continue
        name = n.name or n.output[0]
        caches = [helper.make_node("Constant", [], [f"{name}/{w}_cache"], name=f"{name}/{w}",
                                   value=numpy_helper.from_array(
                                       np.ascontiguousarray(t[None, :, :half])))
                  for w, t in (("cos", cos), ("sin", sin))]
        new[k] = [*caches, helper.make_node(
            "RotaryEmbedding", [x, caches[0].output[0], caches[1].output[0]],
            [n.output[0]], name=name)]
    out: list[onnx.NodeProto] = []
    for k, n in enumerate(nodes):
        out.extend(new.get(k, [n]))
    return out
