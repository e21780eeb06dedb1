"""Scaled dot-product attention as exporters write it, found in a file's
nodes and replaced by one ``Attention`` node (ONNX's, opset 23), which the
importer maps onto the native fused kernel.

Exporters write softmax(c q' k' + mask) v' with q', k', v' made from the
heads q (B, H, Sq, D), k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv) by layout
ops alone: a scale (a scalar Mul or Div, on either side), kᵀ by a
Transpose (or reshapes around one), and, for grouped-query attention, each
key / value head repeated H / Hkv times (Unsqueeze, Expand, Reshape). The
pattern is not read op by op: from each Softmax over the last axis whose
scores are a MatMul (optionally scaled by a constant c, plus an optional
additive mask, or a bias and a mask added one after the other) and whose result
(after torch's NaN guard, :func:`~pyparbench.graph.onnx.rewrites.nan_guard_of_softmax`)
one MatMul reads, the chains of layout ops back from the three operands are
evaluated on random heads (onnx's reference evaluator), and where q' is
a q, k' is b kᵀ with k's heads repeated, v' is v's heads repeated, the
final MatMul becomes Attention(q, k, v, mask) of scale a b c. The layout
nodes are then read by nothing and never imported (so the repeated keys
and values are never made).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from pyparbench.graph.onnx.attributes import node_attrs
from pyparbench.graph.onnx.values import Array

__all__ = ["Constants", "fuse_attention", "run_nodes"]

# Ops that only move, repeat or scale a tensor's elements.
_LAYOUT = frozenset({"Transpose", "Reshape", "Unsqueeze", "Squeeze", "Expand", "Mul", "Div",
                     "Identity"})
_SHAPE_ONLY = frozenset({"Shape", "Size"})


class Constants:
    """The file's constants, and the values computed from constants (or
    from shapes fixed at import) alone, evaluated when first asked for."""

    def __init__(self, nodes: Sequence[onnx.NodeProto], inits: Mapping[str, object],
                 shapes_of: Mapping[str, tuple[int, ...]], opset: int) -> None:
        self.nodes = nodes
        self.values: dict[str, Array | None] = {
            k: v for k, v in inits.items() if isinstance(v, np.ndarray)}
        self.producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
        self.shapes_of = shapes_of
        self.opset = opset

    def get(self, name: str, depth: int = 0) -> Array | None:
        if name in self.values:
            return self.values[name]
        self.values[name] = None  # until known (a cycle or a data value stays None)
        k = self.producer.get(name)
        if k is None or depth > 64:
            return None
        n = self.nodes[k]
        out: Array | None = None
        if n.op_type in _SHAPE_ONLY:
            shape = self.shapes_of.get(n.input[0])
            if shape is not None:
                full = np.array(shape, np.int64)
                a = node_attrs(n)
                out = (np.array(int(np.prod(full)), np.int64) if n.op_type == "Size"
                       else full[a.get("start", 0):a.get("end", len(full))])
        else:
            feeds = {i: self.get(i, depth + 1) for i in n.input if i}
            if all(v is not None for v in feeds.values()) and all(
                    v is None or v.size <= 1 << 16 for v in feeds.values()):
                try:
                    # IEEE arithmetic (T5's position buckets take log 0).
                    with np.errstate(all="ignore"):
                        res = ReferenceEvaluator(n, opsets={"": self.opset}).run(None, feeds)
                    for o, v in zip(n.output, res, strict=False):
                        if o:
                            self.values[o] = np.asarray(v)
                except Exception:
                    return None
                return self.values.get(name)
        self.values[name] = out
        return out


def _scalar(c: Constants, name: str) -> float | None:
    v = c.get(name)
    return float(v.reshape(-1)[0]) if v is not None and v.size == 1 and v.dtype.kind == "f" \
        else None


def _chain_back(nodes: Sequence[onnx.NodeProto], producer: Mapping[str, int], c: Constants,
                value: str) -> list[tuple[str, list[int]]]:
    """The values a layout chain ending at ``value`` starts from (the value
    itself first, then each one further back), each with the chain's nodes
    from it, in file order."""
    found: list[tuple[str, list[int]]] = [(value, [])]
    chain: list[int] = []
    v = value
    while True:
        k = producer.get(v)
        if k is None or nodes[k].op_type not in _LAYOUT:
            break
        n = nodes[k]
        if n.op_type in ("Mul", "Div"):
            a, b = n.input[0], n.input[1]
            if _scalar(c, b) is not None:
                v = a
            elif n.op_type == "Mul" and _scalar(c, a) is not None:
                v = b
            else:
                break
        else:
            if any(c.get(i) is None for i in n.input[1:] if i):
                break
            v = n.input[0]
        chain.insert(0, k)
        found.append((v, list(chain)))
    return found


def run_nodes(nodes: Sequence[onnx.NodeProto], c: Constants, order: Sequence[int],
              vals: dict[str, Array], opset: int) -> dict[str, Array] | None:
    """``vals`` with the outputs of ``nodes[k]`` for each k of ``order``,
    evaluated one after another by onnx's reference evaluator (inputs from
    ``vals`` or the constants); None where an input is neither or a node
    fails to evaluate."""
    try:
        for k in order:
            n = nodes[k]
            feeds = {}
            for i in n.input:
                if not i:
                    continue
                v = vals[i] if i in vals else c.get(i)
                if v is None:
                    return None
                feeds[i] = v
            with np.errstate(all="ignore"):
                res = ReferenceEvaluator(n, opsets={"": opset}).run(None, feeds)
            vals.update({o: np.asarray(r) for o, r in zip(n.output, res, strict=False) if o})
    except Exception:
        return None
    return vals


def _evaluate(nodes: Sequence[onnx.NodeProto], c: Constants, chain: list[int], start: str,
              x: Array, opset: int) -> Array | None:
    """The chain's last value with ``x`` for ``start``."""
    vals = run_nodes(nodes, c, chain, {start: x}, opset)
    if vals is None:
        return None
    return vals[nodes[chain[-1]].output[0]] if chain else x


def _heads(nodes: Sequence[onnx.NodeProto], producer: Mapping[str, int], c: Constants,
           value: str, shapes_of: Mapping[str, tuple[int, ...]], opset: int, heads: int,
           transposed: bool) -> tuple[str, float, bool] | None:
    """(the heads h, the scale s, whether h is (B, S, Hkv, D)) with ``value`` =
    s * repeat(h)ᵀ (or without the transpose), h (B, heads / g, S, D)
    repeated g times along axis 1; or h (B, S, heads / g, D), its axes 1
    and 2 swapped (where the exporter never writes the heads' own layout)."""
    rng = np.random.default_rng(0)
    for start, chain in reversed(_chain_back(nodes, producer, c, value)):
        shape = shapes_of.get(start)
        if shape is None or len(shape) != 4:
            continue
        for swapped in (False, True):
            h = shape[2] if swapped else shape[1]
            if heads % h:
                continue
            x = rng.standard_normal(shape).astype(np.float32) + 2.0
            got = _evaluate(nodes, c, chain, start, x, opset)
            want = np.repeat(np.swapaxes(x, 1, 2) if swapped else x, heads // h, axis=1)
            if transposed:
                want = np.swapaxes(want, -1, -2)
            if got is None or got.shape != want.shape:
                continue
            s = float(got.reshape(-1)[0] / want.reshape(-1)[0])
            if np.allclose(got, s * want, rtol=1e-5, atol=1e-6 * abs(s)):
                return start, s, swapped
    return None


def _scores_and_terms(nodes: Sequence[onnx.NodeProto], producer: Mapping[str, int],
                      readers: Mapping[str, list[int]], outputs: set[str], c: Constants,
                      softmax_input: str) -> tuple[str, list[str], float]:
    """(the scores, the terms added to them, a factor the scores were scaled
    by) of a Softmax's input: a MatMul, optionally scaled by a constant
    scalar (a Mul or a Div of the MatMul alone), plus a mask, or (scaled
    MatMul + bias) + mask where the inner sum has no other reader (T5's
    position bias and padding mask, added one after the other)."""
    def scaled(x: str) -> tuple[str, float] | None:
        k = producer.get(x)
        if k is None:
            return None
        n = nodes[k]
        if n.op_type == "MatMul":
            return x, 1.0
        if n.op_type not in ("Mul", "Div") or x in outputs or len(readers.get(x, [])) != 1:
            return None
        a, b = n.input[0], n.input[1]
        sb = _scalar(c, b)
        sa = _scalar(c, a) if n.op_type == "Mul" else None
        src, factor = (a, sb) if sb is not None else (b, sa)
        m = producer.get(src)
        if factor is None or m is None or nodes[m].op_type != "MatMul" \
                or len(readers.get(src, [])) != 1 or src in outputs:
            return None
        return src, (1.0 / factor if n.op_type == "Div" else factor)

    whole = scaled(softmax_input)
    if whole is not None:
        return whole[0], [], whole[1]
    k = producer.get(softmax_input)
    if k is None or nodes[k].op_type != "Add":
        return softmax_input, [], 1.0
    a, b = nodes[k].input[0], nodes[k].input[1]
    for x, y in ((a, b), (b, a)):
        found = scaled(x)
        if found is not None:
            return found[0], [y], found[1]
    for inner, other in ((a, b), (b, a)):
        j = producer.get(inner)
        if j is None or nodes[j].op_type != "Add" or inner in outputs \
                or len(readers.get(inner, [])) != 1:
            continue
        x, y = nodes[j].input[0], nodes[j].input[1]
        for p, q in ((x, y), (y, x)):
            found = scaled(p)
            if found is not None:
                return found[0], [q, other], found[1]
    return softmax_input, [], 1.0


def fuse_attention(nodes: list[onnx.NodeProto], inits: Mapping[str, object],
                   outputs: set[str], shapes_of: Mapping[str, tuple[int, ...]],
                   opset: int) -> list[onnx.NodeProto]:
    """The nodes with each attention found replaced by one Attention node
    (see the module's description); the rest as they were."""
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    readers: dict[str, list[int]] = {}
    for k, n in enumerate(nodes):
        for i in n.input:
            readers.setdefault(i, []).append(k)
    c = Constants(nodes, inits, shapes_of, opset)
    new: dict[int, list[onnx.NodeProto]] = {}
    for n in nodes:
        if n.op_type != "Softmax":
            continue
        if int(node_attrs(n).get("axis", -1)) not in (-1, 3):
            continue
        mask = ""
        # terms: the masks added to the scores, none, one or two
        scores, terms, factor = _scores_and_terms(nodes, producer, readers, outputs, c,
                                                  n.input[0])
        k = producer.get(scores, -1)
        if k < 0 or nodes[k].op_type != "MatMul":
            continue
        probs = n.output[0]
        r = readers.get(probs, [])
        while len(r) == 1 and nodes[r[0]].op_type == "Identity" and probs not in outputs:
            probs = nodes[r[0]].output[0]
            r = readers.get(probs, [])
        if len(r) != 1 or nodes[r[0]].op_type != "MatMul" or nodes[r[0]].input[0] != probs:
            continue
        last = r[0]
        q_shape = shapes_of.get(nodes[k].input[0])
        if q_shape is None or len(q_shape) != 4:
            continue
        heads = q_shape[1]
        q = _heads(nodes, producer, c, nodes[k].input[0], shapes_of, opset, heads, False)
        kk = _heads(nodes, producer, c, nodes[k].input[1], shapes_of, opset, heads, True)
        v = _heads(nodes, producer, c, nodes[last].input[1], shapes_of, opset, heads, False)
        if q is None or kk is None or v is None or abs(v[1] - 1.0) > 1e-6:
            continue
        name = nodes[last].name or n.name
        made: list[onnx.NodeProto] = []
        if len(terms) == 2:  # (scores + bias) + mask: one mask, bias + mask
            made.append(helper.make_node("Add", terms, [f"{name}/mask"], name=f"{name}/mask"))
            mask = made[-1].output[0]
        elif terms:
            mask = terms[0]
        ins = []
        for which, (src, _, swapped) in zip("qkv", (q, kk, v), strict=True):
            if swapped:  # (B, S, H, D) -> (B, H, S, D)
                made.append(helper.make_node("Transpose", [src], [f"{name}/{which}_heads"],
                                             perm=[0, 2, 1, 3], name=f"{name}/{which}_heads"))
                src = made[-1].output[0]
            ins.append(src)
        made.append(helper.make_node("Attention", [*ins, *([mask] if mask else [])],
                                     [nodes[last].output[0]], scale=q[1] * kk[1] * factor, name=name))
        new[last] = made
    out: list[onnx.NodeProto] = []
    for k, n in enumerate(nodes):
        out.extend(new.get(k, [n]))
    return out

