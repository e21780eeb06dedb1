"""Converters of Gather: rows of a constant table by an int64 graph input (an
embedding lookup), and a value by constant indices that run in a row."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx

from pyparbench.graph.onnx.convert_shape import part
from pyparbench.graph.onnx.importer import Importer
from pyparbench.graph.onnx.values import Array, Unsupported, Value

__all__ = ["gather"]


def gather(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
           a: dict[str, Any]) -> list[Value]:
    idx_name = n.input[1]
    table = ins[0]
    if isinstance(table, int) and isinstance(ins[1], np.ndarray):
        return [_gather_range(im, table, ins[1], int(a.get("axis", 0)))]
    if isinstance(table, np.ndarray) and isinstance(ins[1], int) \
            and im.builder.dtype(ins[1]) == "int64":
        return [_lookup(im, table, ins[1], a)]
    if not (isinstance(table, np.ndarray) and table.ndim == 2 and table.dtype == np.float32
            and int(a.get("axis", 0)) == 0 and idx_name in im.input_shapes
            and im.input_dtypes[idx_name] == "int64"):
        raise Unsupported("only rows of a constant 2-D float table by an int64 graph input "
                          "map (embedding lookups)")
    shape = im.input_shapes[idx_name]
    numel = math.prod(shape)
    e = im.builder.embedding_bag(im.index_input(idx_name), int(table.shape[0]), int(table.shape[1]),
                                 mode="sum", name=im.fresh("embedding") if shape != (numel,)
                                 else im.node_name)
    im.builder.set_weights(e, {"table": table})
    if shape == (numel,):
        return [e]
    return [im.reshape(e, (*shape, int(table.shape[1])), final=True)]


def _lookup(im: Importer, table: Array, idx: int, a: dict[str, Any]) -> int:
    """Rows of a constant table by int64 ids computed from the file's inputs
    (position ids): an embedding lookup, reshaped to the ids' shape."""
    if table.ndim != 2 or table.dtype != np.float32 or int(a.get("axis", 0)) != 0:
        raise Unsupported("only rows of a constant 2-D float table by computed ids map")
    shape = im.shape(idx)
    rows, dim = int(table.shape[0]), int(table.shape[1])
    e = im.builder.embedding_bag(im.as_indices(idx, im.fresh("as_indices")), rows, dim,
                                 mode="sum", name=im.fresh("embedding"))
    im.builder.set_weights(e, {"table": table})
    return im.reshape(e, (*shape, dim), final=True)


def _gather_range(im: Importer, x: int, idx: Array, axis: int) -> int:
    """Gather of a value by constant indices that run in a row (``x[:, 0]``,
    an exporter's ``as_strided``): a part of ``x`` along ``axis``, reshaped."""
    xs = im.shape(x)
    axis %= len(xs)
    flat = np.asarray(idx, dtype=np.int64).reshape(-1)
    if flat.size == 0 or np.any((flat < -xs[axis]) | (flat >= xs[axis])):
        raise Unsupported(f"indices out of range for axis {axis} of {xs}")
    flat = flat % xs[axis]
    if np.any(np.diff(flat) != 1):
        raise Unsupported("indices that do not run in a row (a general gather of a value)")
    out = (*xs[:axis], *idx.shape, *xs[axis + 1:])
    if not out:
        raise Unsupported("a 0-D result")
    piece = part(im, x, axis, int(flat[0]), int(flat.size), im.fresh("part"))
    return im.reshape(piece, out, final=True)
