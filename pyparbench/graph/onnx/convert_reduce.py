"""Converters of reductions: ReduceMean over (H, W) of NCHW."""

from __future__ import annotations

from typing import Any

import onnx

from pyparbench.graph.onnx.importer import Importer
from pyparbench.graph.onnx.values import Unsupported, Value

__all__ = ["reduce_mean"]


def reduce_mean(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "ReduceMean's input")
    xs = im.shape(x)
    axes = a.get("axes")
    if len(ins) > 1 and ins[1] is not None:
        axes = [int(v) for v in im.const_of(ins[1], "ReduceMean's axes").reshape(-1)]
    if axes is None:
        raise Unsupported("a mean over every axis")
    ax = sorted(int(v) % len(xs) for v in axes)
    if len(xs) != 4 or ax != [2, 3]:
        raise Unsupported(f"a mean over axes {ax} of {xs} (only (H, W) of NCHW maps)")
    y = im.builder.global_avg_pool(x, name=im.fresh("gap"))
    keep = int(a.get("keepdims", 1))
    return [im.reshape(y, (*xs[:2], 1, 1) if keep else xs[:2], final=True)]
