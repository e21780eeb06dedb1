"""Converter of ONNX's Attention (opset 23; also what
:mod:`~pyparbench.graph.onnx.attention` makes of the exporters' pattern):
4-D q, k, v with grouped-query heads, an optional additive float mask,
causal masking of equal query and key lengths, and a scale; one native
``attention`` node."""

from __future__ import annotations

from typing import Any

import onnx

from pyparbench.graph.onnx.importer import Importer
from pyparbench.graph.onnx.values import Unsupported, Value

__all__ = ["attention"]


def attention(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
              a: dict[str, Any]) -> list[Value]:
    if len(ins) > 4 and any(v is not None for v in ins[4:]) or any(n.output[1:]):
        raise Unsupported("past keys / values or the extra outputs (a prefill maps)")
    if float(a.get("softcap", 0.0)) != 0.0 or int(a.get("qk_matmul_output_mode", 0)) != 0:
        raise Unsupported("softcap or a qk output mode")
    q, kk, v = (im.node_of(x, f"Attention's {w}") for x, w in zip(ins[:3], "QKV", strict=True))
    qs, ks = im.shape(q), im.shape(kk)
    if len(qs) != 4:
        raise Unsupported(f"3-D Q, K, V (4-D (batch, heads, sequence, head size) map), got "
                          f"{qs}")
    causal = bool(int(a.get("is_causal", 0)))
    if causal and qs[2] != ks[2]:
        raise Unsupported("causal masking of fewer queries than keys (ONNX aligns it top-left)")
    mask = None
    fill = None
    if len(ins) > 3 and ins[3] is not None:
        mask = im.node_of(ins[3], "Attention's mask")
        fill = im.causal_masks.get(mask)
        if im.builder.dtype(mask) != "float32":
            raise Unsupported("a boolean mask (an additive float mask maps)")
        ms = im.shape(mask)
        if len(ms) < 4:
            mask = im.reshape(mask, (1,) * (4 - len(ms)) + ms)
    scale = a.get("scale")
    if fill is not None:  # a decoder's mask: its padding here, its causal part the kernel's
        if causal or qs[2] != ks[2]:
            raise Unsupported("a causal mask beside is_causal, or of fewer queries than keys")
        return [im.builder.attention(q, kk, v, mask, causal=True, causal_fill=fill,
                                     scale=None if scale is None else float(scale),
                                     name=im.node_name)]
    return [im.builder.attention(q, kk, v, mask, causal=causal,
                                 scale=None if scale is None else float(scale),
                                 name=im.node_name)]
