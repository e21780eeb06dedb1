"""Converters of convolutions and pooling: Conv (2-D, groups incl. depthwise,
dilation, asymmetric pads, auto_pad; 1-D as a 2-D one of width 1),
MaxPool / AveragePool (2-D, pads, ceil_mode, count_include_pad),
GlobalAveragePool, GlobalMaxPool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx

from pyparbench.graph.onnx.attributes import as_text
from pyparbench.graph.onnx.importer import Importer
from pyparbench.graph.onnx.values import Array, Unsupported, Value

__all__ = ["conv", "conv_pads", "global_pool", "pool", "spatial"]


def spatial(a: dict[str, Any], name: str, nd: int, default: int) -> tuple[int, ...]:
    """A per-spatial-axis attribute (strides, dilations), ``nd`` values."""
    v = tuple(int(x) for x in a.get(name, [default] * nd))
    if len(v) != nd:
        raise Unsupported(f"{name} {list(v)} for {nd} spatial axes")
    return v


def conv_pads(auto_pad: str, size: Sequence[int], k: Sequence[int], s: Sequence[int],
               d: Sequence[int], pads: Sequence[int]) -> list[tuple[int, int]]:
    nd = len(size)
    if pads and len(pads) != 2 * nd:
        raise Unsupported(f"pads {list(pads)} for {nd} spatial axes (2 x {nd} values)")
    if auto_pad in ("", "NOTSET"):
        p = list(pads) or [0] * (2 * nd)
        return [(p[a], p[a + nd]) for a in range(nd)]
    if auto_pad == "VALID":
        return [(0, 0)] * nd
    out = []
    for a in range(nd):
        o = -(-size[a] // s[a])
        total = max(0, (o - 1) * s[a] + (k[a] - 1) * d[a] + 1 - size[a])
        lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        out.append((lo, total - lo))
    return out


def conv(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
         a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Conv's input")
    w = im.const_of(ins[1], "Conv's weight")
    kernel = a.get("kernel_shape")
    if kernel is not None and [int(v) for v in kernel] != list(w.shape[2:]):
        raise Unsupported(f"kernel_shape {list(kernel)} contradicts the weights' shape "
                          f"{w.shape}")
    bias = im.const_of(ins[2], "Conv's bias") if len(ins) > 2 and ins[2] is not None else None
    xs = im.shape(x)
    if w.ndim == 3 and len(xs) == 3:  # 1-D: a 2-D conv of width 1
        x4 = im.reshape(x, (*xs, 1))
        w4 = w[..., None]
        a = dict(a)
        for key in ("strides", "dilations"):
            if key in a:
                a[key] = [*a[key], 1]
        if "pads" in a:
            a["pads"] = [a["pads"][0], 0, a["pads"][1], 0]
        if "kernel_shape" in a:
            a["kernel_shape"] = [*a["kernel_shape"], 1]
        y = _conv2d(im, x4, w4, bias, a, final=False)
        return [im.reshape(y, im.shape(y)[:3], final=True)]
    if w.ndim != 4 or len(xs) != 4:
        raise Unsupported(f"a {w.ndim - 2}-D convolution (only 1-D and 2-D map)")
    return [_conv2d(im, x, w, bias, a, final=True)]


def _conv2d(im: Importer, x: int, w: Array, bias: Array | None, a: dict[str, Any],
            final: bool) -> int:
    xs = im.shape(x)
    k = tuple(int(d) for d in w.shape[2:])
    s = spatial(a, "strides", 2, 1)
    d = spatial(a, "dilations", 2, 1)
    pads = conv_pads(as_text(a.get("auto_pad", "NOTSET")), xs[2:], k, s, d, a.get("pads", []))
    pad = (pads[0][0], pads[0][1], pads[1][0], pads[1][1])
    y = im.builder.conv2d(x, int(w.shape[0]), k, stride=s, padding=pad, dilation=d,
                          groups=int(a.get("group", 1)), bias=bias is not None,
                          name=im.node_name if final else im.fresh("conv"))
    arrays = {"weight": w}
    if bias is not None:
        arrays["bias"] = bias
    im.builder.set_weights(y, arrays)
    return y


def pool(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
         a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], f"{n.op_type}'s input")
    if len(n.output) > 1 and n.output[1]:
        raise Unsupported("the indices output")
    xs = im.shape(x)
    ks = tuple(a.get("kernel_shape", []))
    if len(xs) != 4 or len(ks) != 2:
        raise Unsupported(f"a {len(ks)}-D pooling (only 2-D maps)")
    if any(d != 1 for d in spatial(a, "dilations", 2, 1)):
        raise Unsupported("dilated pooling (a kernel is needed)")
    s = spatial(a, "strides", 2, 1)
    pads = conv_pads(as_text(a.get("auto_pad", "NOTSET")), xs[2:], ks, s, (1, 1),
                      a.get("pads", []))
    pad = (pads[0][0], pads[0][1], pads[1][0], pads[1][1])
    kind = "max" if n.op_type == "MaxPool" else "avg"
    ceil = bool(a.get("ceil_mode", 0))
    y = im.builder.pool2d(x, kind, ks, stride=s, padding=pad, ceil_mode=ceil,
                          count_include_pad=bool(a.get("count_include_pad", 0)), name=im.node_name)
    want = im.elem_shape(n.output[0])
    if want is not None and want != im.shape(y):
        raise Unsupported(f"output shape {im.shape(y)} differs from ONNX's {want} "
                          "(ceil_mode rule)")
    return [y]


def global_pool(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], f"{n.op_type}'s input")
    xs = im.shape(x)
    if len(xs) != 4:
        raise Unsupported(f"a {len(xs) - 2}-D global pooling (only 2-D maps)")
    if n.op_type == "GlobalMaxPool":
        return [im.builder.pool2d(x, "max", xs[2:], stride=1, name=im.node_name)]
    y = im.builder.global_avg_pool(x, name=im.fresh("gap"))
    return [im.reshape(y, (*xs[:2], 1, 1), final=True)]
