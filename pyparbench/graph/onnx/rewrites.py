"""Rewrites of an ONNX file's nodes before they are mapped onto the IR
(:mod:`~pyparbench.graph.onnx.importer`): patterns that exporters write as
several nodes and the IR runs as one.

* :func:`erf_gelu`: x * 0.5 * (1 + erf(x / sqrt 2)) as one Gelu;
* :func:`gated_by_itself`: x * Sigmoid(x) as Swish, x * HardSigmoid(x) with
  HardSwish's constants as HardSwish (where nothing else reads the gate);
* :func:`tanh_gelu`: GELU's tanh approximation as one Gelu (approximate "tanh");
* :func:`nan_guard_of_softmax`: Where(IsNaN(s), c, s) of a Softmax's s as
  s (the softmax of finite scores holds no NaN; exporters guard a row
  masked whole, which an additive mask of the float32 minimum never makes);
* :func:`rms_norm`: RMS normalisation (Pow, ReduceMean, Add, Sqrt, a
  division or reciprocal, Mul, the weight's Mul) as one RMSNormalization;
* :func:`pad_into_conv`: a zero Pad of H and W read only by a Conv folded
  into the Conv's pads;
* :func:`masked_fill_as_add`: Where(m, x, c) of an additive term x and a
  fill c of at most -1e30 (T5's position bias masked by its padding) as x +
  Where(m, 0, c): the mask's own value beside x;
* :func:`~pyparbench.graph.onnx.dynamic_quant.fuse_dynamic_quantization`:
  a dynamically quantized product (DynamicQuantizeLinear, MatMulInteger or
  ConvInteger, the Cast, the scales' Mul, the bias's Add) as one node;
  :func:`~pyparbench.graph.onnx.dynamic_quant.dequantized_embeddings`: the
  rows of a quantized embedding table dequantised as the table itself.

Each takes the nodes, the file's constants by value name and the graph's
output names, and returns the nodes rewritten; it reads no shape, so a
pattern it does not recognise is left as it is for the mapping to refuse.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper

from pyparbench.graph.onnx.attributes import as_text, node_attrs
from pyparbench.graph.onnx.dynamic_quant import dequantized_embeddings, fuse_dynamic_quantization

__all__ = ["REWRITES", "erf_gelu", "gated_by_itself", "masked_fill_as_add",
           "nan_guard_of_softmax", "pad_into_conv", "rms_norm", "tanh_gelu"]

Array = npt.NDArray[Any]
Rewrite = Callable[[list[onnx.NodeProto], Mapping[str, object], set[str]],
                   list[onnx.NodeProto]]


def _readers(nodes: list[onnx.NodeProto]) -> dict[str, list[int]]:
    """For each value, the indexes of the nodes that read it."""
    readers: dict[str, list[int]] = {}
    for k, n in enumerate(nodes):
        for i in n.input:
            readers.setdefault(i, []).append(k)
    return readers


def _only_reader(nodes: list[onnx.NodeProto], readers: Mapping[str, list[int]],
                 outputs: set[str]) -> Callable[[str, str], int | None]:
    """(value, op) -> the one node reading ``value`` (no graph output), if it
    is an ``op``; else None."""
    def only_reader(value: str, op: str) -> int | None:
        r = [] if value in outputs else readers.get(value, [])
        return r[0] if len(r) == 1 and nodes[r[0]].op_type == op else None

    return only_reader


def erf_gelu(nodes: list[onnx.NodeProto], inits: Mapping[str, object],
              outputs: set[str]) -> list[onnx.NodeProto]:
    """The exact GELU exporters write as x * 0.5 * (1 + erf(x / sqrt 2)) (any
    order of the two products, x / sqrt 2 or x * (1 / sqrt 2)) as one Gelu node."""
    consts = _scalars(nodes, inits)
    readers = _readers(nodes)
    producer = {o: k for k, n in enumerate(nodes) for o in n.output}
    only_reader = _only_reader(nodes, readers, outputs)

    def split(n: onnx.NodeProto) -> tuple[str, float] | None:
        """(the value, the constant) of a binary node with one scalar constant."""
        a, b = n.input[0], n.input[1]
        if b in consts:
            return a, consts[b]
        if a in consts and n.op_type != "Div":
            return b, consts[a]
        return None

    drop: set[int] = set()
    new: dict[int, onnx.NodeProto] = {}
    for k, n in enumerate(nodes):
        if n.op_type != "Erf" or n.input[0] not in producer:
            continue
        d = nodes[producer[n.input[0]]]
        sc = split(d) if d.op_type in ("Div", "Mul") else None
        if sc is None:
            continue
        x, c = sc
        if not math.isclose(c if d.op_type == "Div" else 1.0 / c, math.sqrt(2.0), rel_tol=1e-4):
            continue
        add = only_reader(n.output[0], "Add")
        if add is None or (split(nodes[add]) or ("", 0.0))[1] != 1.0:
            continue
        m1 = only_reader(nodes[add].output[0], "Mul")
        if m1 is None:
            continue
        other = [i for i in nodes[m1].input if i != nodes[add].output[0]]
        chain: list[int] = [producer[n.input[0]], k, add, m1]
        if other == [x]:  # x * (1 + erf), then * 0.5
            m2 = only_reader(nodes[m1].output[0], "Mul")
            if m2 is None or (split(nodes[m2]) or ("", 0.0))[1] != 0.5:
                continue
            chain.append(m2)
        elif other and other[0] in consts and consts[other[0]] == 0.5:  # x * (0.5 * (1 + erf))
            m2 = only_reader(nodes[m1].output[0], "Mul")
            if m2 is None or sorted(nodes[m2].input) != sorted([x, nodes[m1].output[0]]):
                continue
            chain.append(m2)
        elif other and other[0] in producer and nodes[producer[other[0]]].op_type == "Mul" \
                and split(nodes[producer[other[0]]]) == (x, 0.5) \
                and len(readers.get(other[0], [])) == 1:  # (x * 0.5) * (1 + erf)
            chain.insert(0, producer[other[0]])
        else:
            continue
        if any(len(readers.get(nodes[j].output[0], [])) != 1 or nodes[j].output[0] in outputs
               for j in chain[:-1]):
            continue
        last = nodes[chain[-1]]
        new[chain[-1]] = helper.make_node("Gelu", [x], [last.output[0]],
                                          name=n.name or last.name)
        drop.update(chain[:-1])
    return [new.get(k, n) for k, n in enumerate(nodes) if k not in drop]


def _scalars(nodes: list[onnx.NodeProto], inits: Mapping[str, object]) -> dict[str, float]:
    """The float scalars among the constants and Constant nodes, by value name."""
    consts: dict[str, float] = {}
    for key, val in inits.items():
        if isinstance(val, np.ndarray) and val.size == 1 and val.dtype.kind == "f":
            consts[key] = float(val.reshape(-1)[0])
    for n in nodes:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            v = numpy_helper.to_array(n.attribute[0].t)
            if v.size == 1 and v.dtype.kind == "f":
                consts[n.output[0]] = float(v.reshape(-1)[0])
    return consts


def tanh_gelu(nodes: list[onnx.NodeProto], inits: Mapping[str, object],
              outputs: set[str]) -> list[onnx.NodeProto]:
    """GELU's tanh approximation as exporters write it (ALBERT's gelu_new):
    (x * 0.5) * (1 + tanh((x + Pow(x, 3) * 0.044715) * sqrt(2 / pi))) as one
    Gelu node of approximate "tanh"."""
    consts = _scalars(nodes, inits)
    readers = _readers(nodes)
    producer = {o: k for k, n in enumerate(nodes) for o in n.output}
    only_reader = _only_reader(nodes, readers, outputs)

    def other(k: int, value: str) -> str:
        a, b = (str(i) for i in nodes[k].input[:2])
        return b if a == value else a

    def near(name: str, want: float) -> bool:
        return name in consts and math.isclose(consts[name], want, rel_tol=1e-5)

    drop: set[int] = set()
    new: dict[int, onnx.NodeProto] = {}
    for k, n in enumerate(nodes):
        if n.op_type != "Pow" or not near(n.input[1], 3.0):
            continue
        x = n.input[0]
        chain = [k]
        m1 = only_reader(n.output[0], "Mul")
        if m1 is None or not near(other(m1, n.output[0]), 0.044715):
            continue
        a1 = only_reader(nodes[m1].output[0], "Add")
        if a1 is None or other(a1, nodes[m1].output[0]) != x:
            continue
        m2 = only_reader(nodes[a1].output[0], "Mul")
        if m2 is None or not near(other(m2, nodes[a1].output[0]), math.sqrt(2 / math.pi)):
            continue
        t = only_reader(nodes[m2].output[0], "Tanh")
        a2 = only_reader(nodes[t].output[0], "Add") if t is not None else None
        if t is None or a2 is None or not near(other(a2, nodes[t].output[0]), 1.0):
            continue
        last = only_reader(nodes[a2].output[0], "Mul")
        if last is None:
            continue
        half = producer.get(other(last, nodes[a2].output[0]))
        if half is None or nodes[half].op_type != "Mul" or sorted(nodes[half].input) != sorted(
                [x, next((i for i in nodes[half].input if near(i, 0.5)), "")]) \
                or len(readers.get(nodes[half].output[0], [])) != 1:
            continue
        chain += [m1, a1, m2, t, a2, half]
        new[last] = helper.make_node("Gelu", [x], [nodes[last].output[0]], approximate="tanh",
                                     name=nodes[last].name or n.name)
        drop.update(chain)
    return [new.get(k, n) for k, n in enumerate(nodes) if k not in drop]


def gated_by_itself(nodes: list[onnx.NodeProto], inits: Mapping[str, object],
                     outputs: set[str]) -> list[onnx.NodeProto]:
    """x * Sigmoid(x) (SiLU, as exporters write it) as one Swish node, and
    x * HardSigmoid(x) with alpha 1/6, beta 1/2 as one HardSwish node, where
    nothing else reads the gate: one kernel, which a conv may fuse."""
    readers = _readers(nodes)
    drop: set[int] = set()
    new: dict[int, onnx.NodeProto] = {}
    for k, n in enumerate(nodes):
        if n.op_type == "Sigmoid":
            fused = "Swish"
        elif n.op_type == "HardSigmoid":
            a = node_attrs(n)
            if not (math.isclose(float(a.get("alpha", 0.2)), 1 / 6, rel_tol=1e-6)
                    and math.isclose(float(a.get("beta", 0.5)), 0.5, rel_tol=1e-6)):
                continue
            fused = "HardSwish"
        else:
            continue
        x, gate = n.input[0], n.output[0]
        r = readers.get(gate, [])
        if gate in outputs or len(r) != 1:
            continue
        m = nodes[r[0]]
        if m.op_type != "Mul" or sorted(m.input) != sorted([x, gate]) or x == gate:
            continue
        new[r[0]] = helper.make_node(fused, [x], [m.output[0]], name=m.name or n.name)
        drop.add(k)
    return [new.get(k, n) for k, n in enumerate(nodes) if k not in drop]


def pad_into_conv(nodes: list[onnx.NodeProto], inits: Mapping[str, object],
                   outputs: set[str]) -> list[onnx.NodeProto]:
    """A zero Pad of H and W read only by a Conv (as TensorFlow exports write
    'same' padding) folded into the Conv's pads."""
    consts: dict[str, Array] = {k: v for k, v in inits.items() if isinstance(v, np.ndarray)}
    for n in nodes:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    readers = _readers(nodes)
    drop: set[int] = set()
    new: dict[int, onnx.NodeProto] = {}
    for k, n in enumerate(nodes):
        if n.op_type != "Pad" or n.output[0] in outputs:
            continue
        r = readers.get(n.output[0], [])
        if len(r) != 1 or nodes[r[0]].op_type != "Conv" or nodes[r[0]].input[0] != n.output[0]:
            continue
        a = node_attrs(n)
        if as_text(a.get("mode", "constant")) != "constant":
            continue
        if len(n.input) > 1:
            pv = consts.get(n.input[1])
            value = consts.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None
            if pv is None or (len(n.input) > 2 and n.input[2] and value is None) \
                    or len(n.input) > 3 and n.input[3]:
                continue
        else:
            pv, value = np.asarray(a.get("pads", [])), np.asarray(a.get("value", 0.0))
        pads = [int(p) for p in np.asarray(pv).reshape(-1)]
        if value is not None and float(np.asarray(value).reshape(-1)[0]) != 0.0:
            continue
        if len(pads) != 8 or any(pads[i] for i in (0, 1, 4, 5)) or min(pads) < 0:
            continue
        conv = nodes[r[0]]
        ca = node_attrs(conv)
        if as_text(ca.get("auto_pad", "NOTSET")) not in ("NOTSET", ""):
            continue
        cp = list(ca.get("pads", [0, 0, 0, 0]))
        merged = [cp[0] + pads[2], cp[1] + pads[3], cp[2] + pads[6], cp[3] + pads[7]]
        attrs = {**ca, "pads": merged}
        new[r[0]] = helper.make_node("Conv", [n.input[0], *conv.input[1:]], list(conv.output),
                                     name=conv.name, **attrs)
        drop.add(k)
    return [new.get(k, n) for k, n in enumerate(nodes) if k not in drop]


def nan_guard_of_softmax(nodes: list[onnx.NodeProto], inits: Mapping[str, object],
                         outputs: set[str]) -> list[onnx.NodeProto]:
    """Where(IsNaN(s), c, s) of a Softmax's output s as s: a softmax of
    finite scores holds no NaN, so the guard (torch's attention writes it
    for rows masked whole by -inf) never fires."""
    producer = {o: k for k, n in enumerate(nodes) for o in n.output}
    readers = _readers(nodes)
    drop: set[int] = set()
    new: dict[int, onnx.NodeProto] = {}
    for k, n in enumerate(nodes):
        if n.op_type != "Where" or len(n.input) != 3:
            continue
        cond, s = n.input[0], n.input[2]
        j = producer.get(cond)
        if j is None or nodes[j].op_type != "IsNaN" or nodes[j].input[0] != s \
                or cond in outputs or len(readers.get(cond, [])) != 1:
            continue
        src = producer.get(s)
        if src is None or nodes[src].op_type != "Softmax":
            continue
        new[k] = helper.make_node("Identity", [s], [n.output[0]], name=n.name)
        drop.add(j)
    return [new.get(k, n) for k, n in enumerate(nodes) if k not in drop]


def rms_norm(nodes: list[onnx.NodeProto], inits: Mapping[str, object],
             outputs: set[str]) -> list[onnx.NodeProto]:
    """RMS normalisation as exporters write it (Llama's, Qwen2's, T5's):
    w * Cast?(x * 1 / Sqrt(ReduceMean(Pow(x, 2), last axis) + eps)) (or
    x / Sqrt(...), or x * Reciprocal(Sqrt(...))) with a constant weight w, as
    one RMSNormalization node (ONNX's, opset 23) of x and w."""
    consts = _scalars(nodes, inits)
    readers = _readers(nodes)
    only_reader = _only_reader(nodes, readers, outputs)

    def other(k: int, value: str) -> str:
        a, b = (str(i) for i in nodes[k].input[:2])
        return b if a == value else a

    def last_axis(k: int) -> bool:
        a = node_attrs(nodes[k])
        axes = a.get("axes")
        if len(nodes[k].input) > 1 and nodes[k].input[1]:
            v = _constant_array(nodes, nodes[k].input[1], inits)
            axes = None if v is None else np.asarray(v).reshape(-1).tolist()
        return axes is not None and [int(i) for i in axes] == [-1] \
            and int(a.get("keepdims", 1)) == 1

    drop: set[int] = set()
    new: dict[int, onnx.NodeProto] = {}
    for k, n in enumerate(nodes):
        if n.op_type != "Pow" or consts.get(n.input[1]) != 2.0:
            continue
        x = n.input[0]
        mean = only_reader(n.output[0], "ReduceMean")
        if mean is None or not last_axis(mean):
            continue
        add = only_reader(nodes[mean].output[0], "Add")
        eps = consts.get(other(add, nodes[mean].output[0])) if add is not None else None
        if add is None or eps is None:
            continue
        sq = only_reader(nodes[add].output[0], "Sqrt")
        if sq is None:
            continue
        root = nodes[sq].output[0]
        chain = [k, mean, add, sq]
        div = only_reader(root, "Div")
        rec = only_reader(root, "Reciprocal")
        if div is not None and nodes[div].input[1] == root and nodes[div].input[0] == x:
            normed = div  # x / sqrt(...)
        else:
            inv = div if div is not None and nodes[div].input[1] == root \
                and consts.get(nodes[div].input[0]) == 1.0 else rec
            mul = only_reader(nodes[inv].output[0], "Mul") if inv is not None else None
            if inv is None or mul is None or other(mul, nodes[inv].output[0]) != x:
                continue
            chain.append(inv)
            normed = mul
        out = nodes[normed].output[0]
        cast = only_reader(out, "Cast")
        if cast is not None and int(node_attrs(nodes[cast]).get("to", 0)) == onnx.TensorProto.FLOAT:
            chain.append(normed)
            normed, out = cast, nodes[cast].output[0]
        scale = only_reader(out, "Mul")
        w = other(scale, out) if scale is not None else ""
        weight = _constant_array(nodes, w, inits)
        if scale is None or not isinstance(weight, np.ndarray) or weight.ndim != 1:
            continue
        chain.append(normed)
        new[scale] = helper.make_node("RMSNormalization", [x, w], [nodes[scale].output[0]],
                                      axis=-1, epsilon=float(eps),
                                      name=nodes[scale].name or n.name)
        drop.update(chain)
    return [new.get(k, n) for k, n in enumerate(nodes) if k not in drop]


# A fill this negative (float32's minimum, -inf) absorbs any term an
# attention's scores add to it: x + c rounds to c in float32 where |x| < 1e30.
_MASK_FILL = -1e30


def masked_fill_as_add(nodes: list[onnx.NodeProto], inits: Mapping[str, object],
                       outputs: set[str]) -> list[onnx.NodeProto]:
    """Where(m, x, c) of a scalar fill c <= -1e30 and a term x that only Adds
    read (an additive term of scores, never the scores themselves) as x +
    Where(m, 0, c): the same float32 values (x + c rounds to c), and the
    Where then depends on the mask alone, a mask value the importer maps
    (T5 masks its relative position bias so)."""
    consts = _scalars(nodes, inits)
    readers = _readers(nodes)
    producer = {o: k for k, n in enumerate(nodes) for o in n.output}
    new: dict[int, list[onnx.NodeProto]] = {}
    for k, n in enumerate(nodes):
        if n.op_type != "Where" or len(n.input) != 3 or n.output[0] in outputs:
            continue
        cond, x, fill = n.input
        if consts.get(fill, 0.0) > _MASK_FILL or x in consts:
            continue
        src = producer.get(x)
        if src is not None and nodes[src].op_type in ("MatMul", "Softmax"):
            continue
        if not readers.get(n.output[0]) or any(
                nodes[r].op_type != "Add" for r in readers[n.output[0]]):
            continue
        name = n.name or n.output[0]
        zero = helper.make_node("Constant", [], [f"{name}/zero"],
                                value=numpy_helper.from_array(np.zeros((), np.float32)),
                                name=f"{name}/zero")
        masked = helper.make_node("Where", [cond, zero.output[0], fill], [f"{name}/mask"],
                                  name=f"{name}/mask")
        add = helper.make_node("Add", [x, masked.output[0]], [n.output[0]], name=name)
        new[k] = [zero, masked, add]
    return [m for k, n in enumerate(nodes) for m in new.get(k, [n])]


def _constant_array(nodes: list[onnx.NodeProto], name: str, inits: Mapping[str, object]
                    ) -> Array | None:
    """The constant ``name``: a constant of the file, or what a Constant node
    or an Identity of a constant (an exporter's alias of a shared weight)
    writes; None where it is computed."""
    v = inits.get(name)
    if isinstance(v, np.ndarray):
        return v
    for n in nodes:
        if n.output and n.output[0] == name:
            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
                return numpy_helper.to_array(n.attribute[0].t)
            if n.op_type == "Identity":
                return _constant_array(nodes, n.input[0], inits)
    return None


# In this order: a Gelu's or a gate's pattern is whole before a Pad is looked at.
REWRITES: tuple[Rewrite, ...] = (erf_gelu, tanh_gelu, gated_by_itself, nan_guard_of_softmax,
                                 rms_norm, pad_into_conv, masked_fill_as_add,
                                 fuse_dynamic_quantization, dequantized_embeddings)
