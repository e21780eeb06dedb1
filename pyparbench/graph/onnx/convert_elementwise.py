"""Converters of elementwise ops: Add / Sub / Mul / Div by a constant (an
affine) or of two values broadcasting one way, Neg (an affine), the
activations (one eltwise kernel each; SiLU or GELU times another value of
its shape, a gated linear unit, one glu kernel), Clip as ReLU / ReLU6, HardSigmoid,
and the ops that pass their input through (Identity, Dropout, Cast to
float32)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from pyparbench.graph.onnx.attributes import as_text
from pyparbench.graph.onnx.importer import Converter, Importer
from pyparbench.graph.onnx.values import F32, Array, Unsupported, Value
from pyparbench.graph.opdefs import GLU_KINDS

__all__ = ["binary", "clip", "eltwise", "hard_sigmoid", "negate", "pass_through"]


def binary(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
           a: dict[str, Any]) -> list[Value]:
    op = n.op_type
    p, q = ins[0], ins[1]
    gate = next((i for i, name in enumerate(n.input[:2]) if name in im.glu_gates), None)
    if op == "Mul" and gate is not None:  # act(gate) * up: one glu node
        g, u = (p, q) if gate == 0 else (q, p)
        return [im.builder.glu(im.node_of(g, "a gate"), im.node_of(u, "an up projection"),
                               im.glu_gates[n.input[gate]], name=im.node_name)]
    if isinstance(p, np.ndarray) and isinstance(q, int) and _within(im, p, q):
        if op == "Add":
            return [im.affine(q, None, p)]
        if op == "Mul":
            return [im.affine(q, p, None)]
        if op == "Sub":
            return [im.affine(q, -np.ones(1), p)]
        raise Unsupported("a constant divided by a value (a reciprocal kernel is needed)")
    if isinstance(p, int) and isinstance(q, np.ndarray) and _within(im, q, p):
        c = q.astype(np.float64)
        if op == "Add":
            return [im.affine(p, None, c)]
        if op == "Sub":
            return [im.affine(p, None, -c)]
        if op == "Mul":
            return [im.affine(p, c, None)]
        return [im.affine(p, 1.0 / c, None)]
    x, y = im.node_of(p, f"{op}'s A"), im.node_of(q, f"{op}'s B")
    if op == "Div":
        raise Unsupported("a division of two values (a division kernel is needed)")
    if op == "Sub":
        y = im.affine(y, -np.ones(1), None, final=False)
    sx, sy = im.shape(x), im.shape(y)
    try:
        out = np.broadcast_shapes(sx, sy)
    except ValueError:
        raise Unsupported(f"shapes {sx} and {sy} do not broadcast") from None
    if out != sx:
        if out != sy:
            raise Unsupported(f"shapes {sx} and {sy} broadcast both ways (an expand is "
                              "needed)")
        x, y, sx, sy = y, x, sy, sx
    if len(sy) < len(sx):
        y = im.reshape(y, (1,) * (len(sx) - len(sy)) + sy)
    if op == "Mul":
        return [im.builder.mul(x, y, name=im.node_name)]
    return [im.builder.add(x, y, name=im.node_name)]


def _within(im: Importer, c: Array, x: int) -> bool:
    """Whether constant ``c`` broadcasts into node ``x``'s shape (an affine of
    x); a larger constant (T5's position bias beside a padding mask) is a
    constant node the binary op reads."""
    try:
        return np.broadcast_shapes(c.shape, im.shape(x)) == im.shape(x)
    except ValueError:
        return False


def negate(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
           a: dict[str, Any]) -> list[Value]:
    """-x: an affine of scale -1."""
    return [im.affine(im.node_of(ins[0], "Neg's input"), -np.ones(1), None)]


def eltwise(kind: str) -> Converter:
    def f(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
          a: dict[str, Any]) -> list[Value]:
        approximate = as_text(a.get("approximate", "none")) if kind == "gelu" else "none"
        if approximate not in ("none", "tanh"):
            raise Unsupported(f"approximate {approximate!r}")
        act = "gelu_tanh" if approximate == "tanh" else kind
        x = im.node_of(ins[0], n.op_type)
        if act in GLU_KINDS and _gates_a_product(im, n, im.shape(x)):
            # Its one reader multiplies it by another value of its shape:
            # that Mul makes act(x) * up as one glu node (SwiGLU, GeGLU).
            im.glu_gates[n.output[0]] = act
            return [x]
        return [im.builder.eltwise(x, act, name=im.node_name)]
    return f


def _gates_a_product(im: Importer, n: onnx.NodeProto, shape: tuple[int, ...]) -> bool:
    """Whether the one reader of ``n``'s output is a Mul by a computed value
    of the same shape (a gated linear unit's act(gate) * up)."""
    out = n.output[0]
    if im.consumers.get(out) != 1 or out in im.output_names:
        return False
    m = next((r for r in im.nodes if out in r.input), None)
    if m is None or m.op_type != "Mul" or len(m.input) != 2 or m.input[0] == m.input[1]:
        return False
    other = m.input[1] if m.input[0] == out else m.input[0]
    made_by = im.producer.get(other)
    return not isinstance(im.values.get(other), np.ndarray) and made_by is not None \
        and im.nodes[made_by].op_type != "Constant" and im.elem_shape(other) == shape \
        and im.elem_shape(m.output[0]) == shape


def clip(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
         a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Clip's input")
    lo = a.get("min", -np.inf)
    hi = a.get("max", np.inf)
    if len(ins) > 1 and ins[1] is not None:
        lo = float(im.const_of(ins[1], "Clip's min"))
    if len(ins) > 2 and ins[2] is not None:
        hi = float(im.const_of(ins[2], "Clip's max"))
    if lo == 0 and hi == 6:
        return [im.builder.eltwise(x, "relu6", name=im.node_name)]
    if lo == 0 and hi == np.inf:
        return [im.builder.eltwise(x, "relu", name=im.node_name)]
    raise Unsupported(f"Clip to [{lo}, {hi}] (only ReLU and ReLU6 map; a clip kernel is "
                      "needed)")


def _hard_sigmoid_of(im: Importer, x: int, alpha: float, beta: float, final: bool) -> int:
    """max(0, min(1, alpha x + beta)) = relu6(6 alpha x + 6 beta) / 6."""
    t = im.affine(x, np.array([6.0 * alpha]), np.array([6.0 * beta]), final=False)
    r = im.builder.eltwise(t, "relu6", name=im.fresh("relu6"))
    return im.affine(r, np.array([1.0 / 6.0]), None, final=final)


def hard_sigmoid(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                 a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "HardSigmoid's input")
    return [_hard_sigmoid_of(im, x, float(a.get("alpha", 0.2)), float(a.get("beta", 0.5)),
                             True)]


def pass_through(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                 a: dict[str, Any]) -> list[Value]:
    if n.op_type == "Cast" and int(a["to"]) != F32:
        raise Unsupported(f"a cast of a computed value to "
                          f"{onnx.TensorProto.DataType.Name(int(a['to'])).lower()} (compute "
                          "dtype must be float32)")
    if n.op_type == "Dropout" and len(n.output) > 1 and n.output[1]:
        raise Unsupported("the mask output")
    x = im.node_of(ins[0], f"{n.op_type}'s input")
    if n.output[0] in im.output_names:  # the output keeps its name
        return [im.builder.reshape(x, im.shape(x), name=im.node_name)]
    return [x]
