"""Rotary position embeddings as exporters write them (Llama's, Qwen2's
rotate-half): x * cos + Concat(-x[..., D/2:], x[..., :D/2]) * sin with
constant tables (the exporters' ``Sin`` / ``Cos`` of the fixed positions,
folded here), found in a file's nodes and replaced by one
``RotaryEmbedding`` node (ONNX's, opset 23), which the importer maps onto
the native ``rotary`` kernel.

The pattern is taken from its shape (an Add of two Muls, one of x and one
of a Concat of a Neg) and then checked by evaluating the nodes on random
x (onnx's reference evaluator) against the rotate-half formula.

Where cos / sin are computed from an int64 (B, S) input of the file alone
(``position_ids``, as Optimum's and generation's exports take it), the
chain must be the exporters' one: angles float32(position) * inv_freq,
each in both halves, their cos / sin times a scaling. inv_freq is read
from the chain's angles at positions 1 and the scaling from its cos at 0,
and the chain is then checked on probe positions against that formula;
the rotary becomes one :data:`POSITIONS_OP` node of x, the positions and
the two constants, which the importer maps onto the native ``rotary``
kernel with positions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from pyparbench.graph.onnx.attention import Constants, run_nodes
from pyparbench.graph.onnx.values import Array
from pyparbench.graph.transformer_math import rotary

__all__ = ["POSITIONS_OP", "fuse_rotary"]

# The node the positions' pattern becomes (the importer's own: no ONNX op
# computes the tables from positions).
POSITIONS_OP = "PyparbenchRotaryPositions"


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


def _chain(nodes: Sequence[onnx.NodeProto], producer: Mapping[str, int], c: Constants,
           name: str, ints: Mapping[str, tuple[int, ...]]) -> tuple[set[int], set[str]] | None:
    """The nodes computing ``name`` from constants and int64 inputs, and
    those inputs; None where a float input or too long a chain feeds it."""
    sub: set[int] = set()
    read: set[str] = set()
    stack = [name]
    while stack:
        v = stack.pop()
        if v in ints:
            read.add(v)
            continue
        if c.get(v) is not None:
            continue
        k = producer.get(v)
        if k is None or len(sub) > 32:
            return None
        if k not in sub:
            sub.add(k)
            stack.extend(i for i in nodes[k].input if i)
    return sub, read


def _positions_of(nodes: Sequence[onnx.NodeProto], producer: Mapping[str, int], c: Constants,
                  cos_name: str, sin_name: str, shape: tuple[int, ...],
                  ints: Mapping[str, tuple[int, ...]], opset: int
                  ) -> tuple[str, Array, float] | None:
    """(the positions input, inv_freq, scaling) where ``cos_name`` /
    ``sin_name`` are the exporters' tables of an int64 (B, S) input's
    positions for an x (B, H, S, D) of ``shape``; else None."""
    cos_chain = _chain(nodes, producer, c, cos_name, ints)
    sin_chain = _chain(nodes, producer, c, sin_name, ints)
    if cos_chain is None or sin_chain is None or len(shape) != 4:
        return None
    (cos_nodes, cos_reads), (sin_nodes, sin_reads) = cos_chain, sin_chain
    if cos_reads != sin_reads or len(cos_reads) != 1:
        return None
    (positions,) = cos_reads
    batch, seq, d = shape[0], shape[2], shape[3]
    if ints[positions] != (batch, seq):
        return None
    order = sorted(cos_nodes | sin_nodes)
    angle = [nodes[k].input[0] for k in cos_nodes if nodes[k].op_type == "Cos"]
    if len(angle) != 1:
        return None

    def at(p: Array) -> dict[str, Array] | None:
        return run_nodes(nodes, c, order, {positions: p.astype(np.int64)}, opset)

    ones, zeros = at(np.ones((batch, seq))), at(np.zeros((batch, seq)))
    if ones is None or zeros is None or ones[angle[0]].shape[-1:] != (d,):
        return None
    inv_freq = np.asarray(ones[angle[0]], np.float32).reshape(-1, d)[0, :d // 2]
    scaling = float(np.asarray(zeros[cos_name]).reshape(-1)[0])
    # Probe positions, negative and far past any table included: the chain
    # must give the formula's tables at each.
    probe = np.random.default_rng(0).integers(-64, 8192, (batch, seq))
    got = at(probe)
    if got is None:
        return None
    angles = probe.astype(np.float32)[..., None] * inv_freq
    both = np.concatenate([angles, angles], axis=-1)[:, None]  # (B, 1, S, D)
    for name, f in ((cos_name, np.cos), (sin_name, np.sin)):
        want = np.broadcast_to(f(both) * np.float32(scaling), shape)
        try:
            value = np.broadcast_to(got[name], shape)
        except ValueError:
            return None
        if not np.allclose(value, want, rtol=1e-5, atol=1e-5):
            return None
    return positions, inv_freq, scaling


class _Found(NamedTuple):
    """A rotary's x and either its constant (S, D) tables or (the int64
    input of its positions, inv_freq, scaling)."""

    x: str
    tables: tuple[Array, Array] | None
    positions: tuple[str, Array, float] | None


def _rotary_of(nodes: Sequence[onnx.NodeProto], producer: Mapping[str, int], c: Constants,
               add: int, shapes_of: Mapping[str, tuple[int, ...]],
               ints: Mapping[str, tuple[int, ...]], opset: int) -> _Found | None:
    """The rotary where node ``add`` is x * cos + rotate_half(x) * sin."""
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
            if cos is not None and sin is not None:
                if _checks(nodes, producer, c, add, x, shape, {}, cos, sin, opset):
                    return _Found(x, (cos, sin), None)
                continue
            found = _positions_of(nodes, producer, c, cos_name, sin_name, shape, ints, opset)
            if found is None:
                continue
            # Any tables of the form, seeded as the chain's values: the
            # nodes from them and x must be the rotate-half formula.
            inv_freq, scaling = found[1], found[2]
            at = np.arange(shape[0] * shape[2], dtype=np.float32).reshape(shape[0], 1, -1, 1)
            angles = np.concatenate([at * inv_freq, at * inv_freq], axis=-1)
            cos_t, sin_t = (f(angles) * np.float32(scaling) for f in (np.cos, np.sin))
            if _checks(nodes, producer, c, add, x, shape, {cos_name: cos_t, sin_name: sin_t},
                       cos_t, sin_t, opset):
                return _Found(x, None, found)
    return None


def _checks(nodes: Sequence[onnx.NodeProto], producer: Mapping[str, int], c: Constants,
            add: int, x: str, shape: tuple[int, ...], tables: Mapping[str, Array],
            cos: Array, sin: Array, opset: int) -> bool:
    """The nodes between x (and ``tables``, values given) and ``add``
    compute the rotate-half formula with tables ``cos``, ``sin``."""
    sub: list[int] = []
    stack = [add]
    while stack:
        k = stack.pop()
        if k in sub:
            continue
        sub.append(k)
        for i in nodes[k].input:
            j = producer.get(i)
            if i and i != x and i not in tables and j is not None and c.get(i) is None:
                stack.append(j)
        if len(sub) > 16:
            return False
    seeded = {x: np.random.default_rng(0).standard_normal(shape).astype(np.float32),
              **tables}
    vals = run_nodes(nodes, c, sorted(sub), seeded, opset)
    if vals is None:
        return False
    got = vals[nodes[add].output[0]]
    want = rotary(vals[x].astype(np.float64), cos.astype(np.float64), sin.astype(np.float64))
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-5, atol=1e-5))


def fuse_rotary(nodes: list[onnx.NodeProto], inits: Mapping[str, object], outputs: set[str],
                shapes_of: Mapping[str, tuple[int, ...]], opset: int,
                ints: Mapping[str, tuple[int, ...]] | None = None) -> list[onnx.NodeProto]:
    """The nodes with each rotate-half rotary embedding replaced by one
    RotaryEmbedding node of x and (1, S, D / 2) cos / sin caches (Constant
    nodes); the tables' halves must agree (as cat(freqs, freqs) makes them).
    A rotary whose tables the exporters compute from one of ``ints`` (the
    file's int64 inputs and their shapes) becomes one :data:`POSITIONS_OP`
    node of x, the positions, inv_freq and the scaling (Constant nodes)."""
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    c = Constants(nodes, inits, shapes_of, opset)
    new: dict[int, list[onnx.NodeProto]] = {}
    for k, n in enumerate(nodes):
        if n.op_type != "Add":
            continue
        found = _rotary_of(nodes, producer, c, k, shapes_of, ints or {}, opset)
        if found is None:
            continue
        name = n.name or n.output[0]
        if found.positions is not None:
            positions, inv_freq, scaling = found.positions
            consts = [helper.make_node("Constant", [], [f"{name}/{w}"], name=f"{name}/{w}",
                                       value=numpy_helper.from_array(np.asarray(t, np.float32)))
                      for w, t in (("inv_freq", inv_freq), ("scaling", [scaling]))]
            new[k] = [*consts, helper.make_node(
                POSITIONS_OP, [found.x, positions, *(t.output[0] for t in consts)],
                [n.output[0]], name=name)]
            continue
        assert found.tables is not None
        cos, sin = found.tables
        half = cos.shape[-1] // 2
        if not (np.array_equal(cos[:, :half], cos[:, half:])
                and np.array_equal(sin[:, :half], sin[:, half:])):
            continue
        caches = [helper.make_node("Constant", [], [f"{name}/{w}_cache"], name=f"{name}/{w}",
                                   value=numpy_helper.from_array(
                                       np.ascontiguousarray(t[None, :, :half])))
                  for w, t in (("cos", cos), ("sin", sin))]
        new[k] = [*caches, helper.make_node(
            "RotaryEmbedding", [found.x, caches[0].output[0], caches[1].output[0]],
            [n.output[0]], name=name)]
    out: list[onnx.NodeProto] = []
    for k, n in enumerate(nodes):
        out.extend(new.get(k, [n]))
    return out
