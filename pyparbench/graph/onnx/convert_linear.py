"""Converters of matrix products: Gemm (alpha, beta, transA / transB) and
MatMul with a constant weight (`linear`, a following bias Add folded in),
MatMul of two values (2-D, batched, equal batch dims)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx

from pyparbench.graph.onnx.importer import Importer
from pyparbench.graph.onnx.values import Array, Unsupported, Value

__all__ = ["gemm", "matmul"]


def _bias_after(im: Importer, n: onnx.NodeProto, out_features: int
                ) -> tuple[Array | None, str | None]:
    """The constant bias of an Add that is the sole reader of ``n``'s output
    and adds along its last axis, and that Add's output, marked absorbed
    (its output becomes the linear's)."""
    out = n.output[0]
    if im.consumers.get(out) != 1 or out in im.output_names:
        return None, None
    k = next((j for j, m in enumerate(im.nodes) if out in m.input), None)
    if k is None or im.nodes[k].op_type != "Add":
        return None, None
    m = im.nodes[k]
    other = m.input[1] if m.input[0] == out else m.input[0]
    c = im.values.get(other)
    if not isinstance(c, np.ndarray) or c.dtype != np.float32 or c.size != out_features \
            or c.shape[-1:] != (out_features,):
        return None, None
    im.absorb(k)
    return c.reshape(out_features), m.output[0]


def _linear(im: Importer, x: int, weight: Array, n: onnx.NodeProto) -> int:
    """x · weightᵀ (+ a following Add's bias) over the last axis of any rank
    >= 2 (views around it)."""
    xs = im.shape(x)
    if len(xs) < 2:
        raise Unsupported(f"a matrix product of a {len(xs)}-D input")
    bias, alias = _bias_after(im, n, int(weight.shape[0]))
    if alias is not None and alias in im.output_names:
        im.rename_as_output(alias)
    final = len(xs) in (2, 3)
    x2 = x if final else im.reshape(x, (math.prod(xs[:-1]), xs[-1]))
    y = im.builder.linear(x2, int(weight.shape[0]), bias=bias is not None,
                          name=im.node_name if final else im.fresh("linear"))
    arrays = {"weight": weight}
    if bias is not None:
        arrays["bias"] = bias
    im.builder.set_weights(y, arrays)
    if not final:
        y = im.reshape(y, (*xs[:-1], int(weight.shape[0])), final=True)
    if alias is not None:
        im.values[alias] = y
    return y


def gemm(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
         a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Gemm's A")
    bmat = im.const_of(ins[1], "Gemm's B")
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    if a.get("transA", 0):
        x = im.builder.transpose(x, (1, 0), name=im.fresh("transpose"))
    w = ((bmat.T if a.get("transB", 0) else bmat) * np.float64(alpha)).T
    c = ins[2] if len(ins) > 2 else None
    if c is None or beta == 0:
        return [_linear(im, x, w, n)]
    cc = im.const_of(c, "Gemm's C") * np.float64(beta)
    full = np.broadcast_to(cc, (im.shape(x)[0], w.shape[0]))
    if not np.all(full == full[:1]):
        raise Unsupported("a C that differs between rows")
    bias = full[0]
    y = im.builder.linear(x, int(w.shape[0]), bias=True, name=im.node_name)
    im.builder.set_weights(y, {"weight": w, "bias": bias})
    return [y]


def matmul(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
           a: dict[str, Any]) -> list[Value]:
    if isinstance(ins[1], np.ndarray):
        w = ins[1]
        if w.ndim != 2:
            raise Unsupported(f"a constant right operand of {w.ndim} dims")
        x = im.node_of(ins[0], "MatMul's A")
        return [_linear(im, x, np.ascontiguousarray(w.T), n)]
    x, y = im.node_of(ins[0], "MatMul's A"), im.node_of(ins[1], "MatMul's B")
    sa, sb = im.shape(x), im.shape(y)
    if len(sa) < 2 or len(sb) < 2:
        raise Unsupported("a matrix product of 1-D operands")
    if len(sa) != len(sb) or sa[:-2] != sb[:-2]:
        raise Unsupported(f"batch dims that broadcast ({sa} by {sb})")
    if len(sa) <= 3:
        return [im.builder.matmul(x, y, name=im.node_name)]
    bt = math.prod(sa[:-2])
    x3 = im.reshape(x, (bt, *sa[-2:]))
    y3 = im.reshape(y, (bt, *sb[-2:]))
    z = im.builder.matmul(x3, y3, name=im.fresh("matmul"))
    return [im.reshape(z, (*sa[:-1], sb[-1]), final=True)]
