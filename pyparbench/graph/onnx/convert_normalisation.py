"""Converters of normalisations: BatchNormalization (inference),
LayerNormalization and RMSNormalization (last axis), Softmax (any axis)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx

from pyparbench.graph.onnx.importer import Importer
from pyparbench.graph.onnx.values import Unsupported, Value

__all__ = ["batch_norm", "layer_norm", "rms_norm", "softmax"]


def batch_norm(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
               a: dict[str, Any]) -> list[Value]:
    if a.get("training_mode", 0) or (len(n.output) > 1 and any(n.output[1:])):
        raise Unsupported("training mode")
    x = im.node_of(ins[0], "BatchNormalization's input")
    sc, sh, mean, var = (im.const_of(v, "BatchNormalization's statistics") for v in ins[1:5])
    y = im.builder.batch_norm(x, eps=float(a.get("epsilon", 1e-5)), name=im.node_name)
    im.builder.set_weights(y, {"mean": mean, "var": var, "scale": sc, "shift": sh})
    return [y]


def layer_norm(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
               a: dict[str, Any]) -> list[Value]:
    if len(n.output) > 1 and any(n.output[1:]):
        raise Unsupported("the mean / inverse std outputs")
    x = im.node_of(ins[0], "LayerNormalization's input")
    xs = im.shape(x)
    if int(a.get("axis", -1)) % len(xs) != len(xs) - 1:
        raise Unsupported("normalisation over more than the last axis (a kernel is needed)")
    d = xs[-1]
    scale = np.broadcast_to(im.const_of(ins[1], "LayerNormalization's scale"), (d,))
    shift = (np.broadcast_to(im.const_of(ins[2], "LayerNormalization's bias"), (d,))
             if len(ins) > 2 and ins[2] is not None else np.zeros(d, np.float32))
    y = im.builder.layer_norm(x, eps=float(a.get("epsilon", 1e-5)), name=im.node_name)
    im.builder.set_weights(y, {"scale": scale, "shift": shift})
    return [y]


def rms_norm(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
             a: dict[str, Any]) -> list[Value]:
    """RMSNormalization over the last axis (ONNX's, opset 23; exporters' own
    pattern rewritten as one, :mod:`~pyparbench.graph.onnx.rewrites`)."""
    x = im.node_of(ins[0], "RMSNormalization's input")
    xs = im.shape(x)
    if int(a.get("axis", -1)) % len(xs) != len(xs) - 1:
        raise Unsupported("normalisation over more than the last axis (a kernel is needed)")
    scale = np.broadcast_to(im.const_of(ins[1], "RMSNormalization's scale"), (xs[-1],))
    y = im.builder.rms_norm(x, eps=float(a.get("epsilon", 1e-5)), name=im.node_name)
    im.builder.set_weights(y, {"scale": scale})
    return [y]


def softmax(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
            a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Softmax's input")
    xs = im.shape(x)
    default = -1 if im.opset >= 13 else 1
    ax = int(a.get("axis", default)) % len(xs)
    if im.opset >= 13 or ax == len(xs) - 1:
        return [im.builder.softmax(x, axis=ax, name=im.node_name)]
    # Before opset 13: softmax of the input flattened to 2-D at the axis.
    x2 = im.reshape(x, (math.prod(xs[:ax]), math.prod(xs[ax:])))
    y = im.builder.softmax(x2, axis=1, name=im.fresh("softmax"))
    return [im.reshape(y, xs, final=True)]
