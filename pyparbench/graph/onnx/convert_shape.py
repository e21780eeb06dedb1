"""Converters of shape ops: Concat, Reshape / Flatten / Squeeze / Unsqueeze
(views), Transpose, Split along one axis, Slice along any axes with any
positive step, Pad in constant mode; and :func:`part`, a range of a value
along one axis, which Gather uses too."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx

from pyparbench.graph.onnx.attributes import as_text
from pyparbench.graph.onnx.importer import Importer
from pyparbench.graph.onnx.values import MAX_FOLD_ELEMENTS, Unsupported, Value

__all__ = ["concat", "pad", "part", "slice_", "split", "transpose", "view"]


def concat(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
           a: dict[str, Any]) -> list[Value]:
    xs = [im.node_of(v, "a Concat input") for v in ins if v is not None]
    rank = len(im.shape(xs[0]))
    return [im.builder.concat(xs, axis=int(a["axis"]) % rank, name=im.node_name)]


def view(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
         a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], f"{n.op_type}'s input")
    want = im.elem_shape(n.output[0])
    xs = im.shape(x)
    if n.op_type == "Reshape":
        shape = [int(v) for v in im.const_of(ins[1], "Reshape's shape").reshape(-1)]
        if not a.get("allowzero", 0):
            shape = [xs[i] if d == 0 else d for i, d in enumerate(shape)]
        out: tuple[int, ...] = tuple(shape)
        if -1 in out:
            rest = -math.prod(out)
            out = tuple(math.prod(xs) // rest if d == -1 else d for d in out)
    elif n.op_type == "Flatten":
        ax = int(a.get("axis", 1)) % (len(xs) + 1) if xs else 0
        out = (math.prod(xs[:ax]), math.prod(xs[ax:]))
    else:
        axes = a.get("axes")
        if len(ins) > 1 and ins[1] is not None:
            axes = [int(v) for v in im.const_of(ins[1], "the axes").reshape(-1)]
        if n.op_type == "Squeeze":
            drop = ({int(v) % len(xs) for v in axes} if axes is not None
                    else {i for i, d in enumerate(xs) if d == 1})
            out = tuple(d for i, d in enumerate(xs) if i not in drop)
        else:
            r = len(xs) + len(axes or [])
            add = {int(v) % r for v in axes or []}
            it = iter(xs)
            out = tuple(1 if i in add else next(it) for i in range(r))
    if want is not None and want != out:
        raise Unsupported(f"output shape {out} differs from ONNX's {want}")
    if not out:
        raise Unsupported("a 0-D result")
    return [im.builder.reshape(x, out, name=im.node_name)]


def part(im: Importer, x: int, axis: int, start: int, length: int, name: str) -> int:
    """Elements ``start .. start + length - 1`` of ``x`` along ``axis``: a
    view (reshape, rows, reshape) where every axis before it has size 1, else
    moved to the front by a transpose, taken as rows, and moved back."""
    xs = im.shape(x)
    out = (*xs[:axis], length, *xs[axis + 1:])
    if start == 0 and length == xs[axis]:
        return im.builder.reshape(x, out, name=name)
    if math.prod(xs[:axis]) == 1:
        rows = im.builder.slice(im.reshape(x, xs[axis:]), start, length, name=im.fresh("rows"))
        return im.builder.reshape(rows, out, name=name)
    perm = [axis, *(i for i in range(len(xs)) if i != axis)]
    front = im.builder.transpose(x, perm, name=im.fresh("to_front"))
    rows = im.builder.slice(front, start, length, name=im.fresh("rows"))
    return im.builder.transpose(rows, [perm.index(i) for i in range(len(xs))], name=name)


def split(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
          a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Split's input")
    xs = im.shape(x)
    axis = int(a.get("axis", 0)) % len(xs)
    if len(ins) > 1 and ins[1] is not None:
        sizes = [int(v) for v in im.const_of(ins[1], "Split's sizes").reshape(-1)]
    elif "split" in a:
        sizes = [int(v) for v in a["split"]]
    else:
        parts = int(a.get("num_outputs", len(n.output)))
        each = -(-xs[axis] // parts)
        sizes = [min(each, xs[axis] - i * each) for i in range(parts)]
    if len(sizes) != len(n.output) or sum(sizes) != xs[axis] or min(sizes) < 1:
        raise Unsupported(f"sizes {sizes} do not split axis {axis} of {xs} into "
                          f"{len(n.output)} parts")
    out: list[Value] = []
    start = 0
    for i, (o, size) in enumerate(zip(n.output, sizes, strict=True)):
        out.append(part(im, x, axis, start, size, im.node_name_for(o, f"{im.node_name}/{i}")))
        start += size
    return out


def slice_(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
           a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Slice's input")
    xs = im.shape(x)
    starts, ends = (im.const_of(v, f"Slice's {w}").reshape(-1).tolist()
                    for v, w in ((ins[1], "starts"), (ins[2], "ends")))
    axes = (im.const_of(ins[3], "Slice's axes").reshape(-1).tolist()
            if len(ins) > 3 and ins[3] is not None else list(range(len(starts))))
    steps = (im.const_of(ins[4], "Slice's steps").reshape(-1).tolist()
             if len(ins) > 4 and ins[4] is not None else [1] * len(starts))
    cuts: list[tuple[int, int, int, int]] = []
    for s0, e0, ax0, st in zip(starts, ends, axes, steps, strict=True):
        ax = int(ax0) % len(xs)
        if int(st) < 1:
            raise Unsupported(f"a step of {st} on axis {ax} (positive steps map)")
        begin, end, step = slice(int(s0), int(e0), int(st)).indices(xs[ax])
        count = len(range(begin, end, step))
        if count < 1:
            raise Unsupported("an empty slice")
        if count != xs[ax]:
            cuts.append((ax, begin, step, count))
    if not cuts:
        return [im.reshape(x, xs, final=True)]
    y = x
    for i, (ax, begin, step, count) in enumerate(cuts):
        y = _strided_part(im, y, ax, begin, step, count,
                          im.node_name if i == len(cuts) - 1 else im.fresh("slice"))
    return [y]


def _strided_part(im: Importer, x: int, axis: int, start: int, step: int, count: int,
                  name: str) -> int:
    """Elements start, start + step, ... (``count`` of them) of ``x`` along
    ``axis``: with step 1 a part; else a part of ``count * step`` elements
    seen as (count, step), of which one column is taken (a patch merge's
    ``x[:, 0::2, 1::2]``); where the axis holds fewer, it is first lengthened
    by a constant block."""
    if step == 1:
        return part(im, x, axis, start, count, name)
    xs = im.shape(x)
    span = count * step
    if span > xs[axis]:
        extra = (*xs[:axis], start + span - xs[axis], *xs[axis + 1:])
        x = im.builder.concat([x, im.node_of(np.zeros(extra, np.float32), "a step's end")],
                              axis=axis, name=im.fresh("lengthen"))
        xs = im.shape(x)
    column = max(0, start + span - xs[axis])  # the part ends within the axis
    whole = part(im, x, axis, start - column, span, im.fresh("span"))
    grid = im.reshape(whole, (*xs[:axis], count, step, *xs[axis + 1:]))
    picked = part(im, grid, axis + 1, column, 1, im.fresh("every"))
    return im.builder.reshape(picked, (*xs[:axis], count, *xs[axis + 1:]), name=name)


def pad(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
        a: dict[str, Any]) -> list[Value]:
    """A constant-mode Pad of a value: per padded axis, a concat of constant
    blocks of the pad value around it (zero pads, as a window's padding to a
    multiple of its size often is, make a view)."""
    if as_text(a.get("mode", "constant")) != "constant":
        raise Unsupported(f"mode {as_text(a['mode'])!r} (only 'constant' maps)")
    x = im.node_of(ins[0], "Pad's input")
    xs = im.shape(x)
    if len(ins) > 1:  # opset 11 on: pads, value and axes are inputs
        pads = im.const_of(ins[1], "Pad's pads").reshape(-1).tolist()
        value = (float(im.const_of(ins[2], "Pad's value").reshape(-1)[0])
                 if len(ins) > 2 and ins[2] is not None else 0.0)
        axes = (im.const_of(ins[3], "Pad's axes").reshape(-1).tolist()
                if len(ins) > 3 and ins[3] is not None else list(range(len(xs))))
    else:
        pads, value, axes = list(a.get("pads", [])), float(a.get("value", 0.0)), \
            list(range(len(xs)))
    if len(pads) != 2 * len(axes):
        raise Unsupported(f"{len(pads)} pads for {len(axes)} axes")
    y = x
    padded = [(int(ax) % len(xs), int(b), int(e))
              for ax, b, e in zip(axes, pads[:len(axes)], pads[len(axes):], strict=True)
              if b or e]
    grown = list(xs)
    for ax, before, after in padded:
        if before < 0 or after < 0:
            raise Unsupported(f"a negative pad (a crop) on axis {ax}")
        grown[ax] += before + after
    if math.prod(grown) > MAX_FOLD_ELEMENTS:  # a hostile file's pads
        raise Unsupported(f"a pad to {tuple(grown)} (at most {MAX_FOLD_ELEMENTS} elements)")
    for ax, before, after in padded:
        ys = im.shape(y)

        def block(size: int) -> int:
            shape = ys[:ax] + (size,) + ys[ax + 1:]
            return im.node_of(np.full(shape, value, np.float32), "Pad's value")

        parts = ([block(before)] if before else []) + [y] + ([block(after)] if after else [])
        last = ax == padded[-1][0]
        y = im.builder.concat(parts, axis=ax, name=im.node_name if last else im.fresh("pad"))
    if not padded:
        return [im.reshape(x, xs, final=True)]
    return [y]


def transpose(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
              a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Transpose's input")
    r = len(im.shape(x))
    perm = a.get("perm", list(range(r))[::-1])
    return [im.builder.transpose(x, [int(p) % r for p in perm], name=im.node_name)]
