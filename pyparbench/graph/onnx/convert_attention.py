"""Converters of ONNX's Attention and RotaryEmbedding (opset 23; also what
:mod:`~pyparbench.graph.onnx.attention` and :mod:`~pyparbench.graph.onnx.rotary`
make of the exporters' patterns). Attention: 4-D q, k, v with grouped-query
heads, an optional additive float mask, causal masking of equal query and
key lengths, and a scale; one native ``attention`` node. A decoder's step,
whose keys and values are the past concatenated with the new rows (the
present keys / values a file outputs), is one native ``decode_attention``
node reading the past and the new rows where they are: the present's copy
is then the concat alone, once per step."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from pyparbench.graph.onnx.importer import Importer
from pyparbench.graph.onnx.values import Unsupported, Value

__all__ = ["attention", "rotary_embedding", "rotary_positions"]


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
    s = None if scale is None else float(scale)
    step = _past_and_new(im, kk, v)
    # A step's new queries are the last positions: causal masking (the
    # decoder's mask) hides keys past each one's, as decode_attention does;
    # a single query hides nothing.
    if step is not None and not causal and (fill is not None or qs[2] == 1):
        (past_k, new_k), (past_v, new_v) = step
        return [im.builder.decode_attention(q, new_k, new_v, past_k, past_v, mask, scale=s,
                                            **({} if fill is None else {"causal_fill": fill}),
                                            name=im.node_name)]
    if step is not None and not causal and fill is None and _folded_heads(im, q, step, mask):
        # One new token whose query heads the exporter folded into the rows
        # of their shared key / value head (B, Hkv, H / Hkv, D): the same
        # memory as (B, H, 1, D), head h reading key / value head h // g.
        (past_k, new_k), (past_v, new_v) = step
        b, hkv, g, d = qs
        heads = im.builder.reshape(q, (b, hkv * g, 1, d), name=im.fresh("heads"))
        y = im.builder.decode_attention(heads, new_k, new_v, past_k, past_v, mask, scale=s,
                                        name=im.fresh("step"))
        return [im.builder.reshape(y, (b, hkv, g, im.shape(new_v)[3]), name=im.node_name)]
    if fill is not None:  # a decoder's mask: its padding here, its causal part the kernel's
        if causal or qs[2] != ks[2]:
            raise Unsupported("a causal mask beside is_causal, or of fewer queries than keys")
        return [im.builder.attention(q, kk, v, mask, causal=True, causal_fill=fill,
                                     scale=s, name=im.node_name)]
    return [im.builder.attention(q, kk, v, mask, causal=causal, scale=s, name=im.node_name)]


def _folded_heads(im: Importer, q: int, step: tuple[tuple[int, int], tuple[int, int]],
                  mask: int | None) -> bool:
    """Whether q (B, Hkv, rows, D) holds one new token's query heads, rows
    per key / value head: a single new key / value row (a decoder's query
    positions are its new rows), q's heads the keys' and a mask the same
    for every row."""
    (_, new_k), _ = step
    qs, ks = im.shape(q), im.shape(new_k)
    return ks[2] == 1 and qs[1] == ks[1] and qs[2] > 1 and (
        mask is None or im.shape(mask)[1:3] == (1, 1))


def _past_and_new(im: Importer, k: int, v: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """((past k, new k), (past v, new v)) where the keys and the values are
    each a concat of two parts along the sequence axis (a decoder's past and
    its new rows) that the file outputs (its present keys / values: the
    concat then has a reader besides the attention), else None."""
    outputs = {x for name, x in im.values.items() if name in im.output_names}
    parts = []
    for x in (k, v):
        if x not in outputs:
            return None
        op, attrs, ins = im.builder.op_and_inputs(x)
        if op != "concat" or len(ins) != 2 or attrs["axis"] % 4 != 2:
            return None
        parts.append((ins[0], ins[1]))
    (pk, nk), (pv, nv) = parts
    if im.shape(pk)[2] != im.shape(pv)[2]:
        return None
    return (pk, nk), (pv, nv)


def rotary_embedding(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                     a: dict[str, Any]) -> list[Value]:
    """RotaryEmbedding (opset 23; also what
    :mod:`~pyparbench.graph.onnx.rotary` makes of the exporters' pattern):
    rotate-half of a 4-D (B, H, S, D) x over its whole head by constant
    caches (B or 1, S, D / 2) that agree across the batch; one native
    ``rotary`` node with the (S, D) tables. With position_ids (an int64
    (B, S) input of the file) the caches are (C, D / 2), one row per
    position: one ``rotary`` node reading the (C, D) tables at them."""
    if int(a.get("interleaved", 0)) or int(a.get("rotary_embedding_dim", 0)):
        raise Unsupported("interleaved or partial rotation (rotate-half of the whole head "
                          "maps)")
    x = im.node_of(ins[0], "RotaryEmbedding's input")
    xs = im.shape(x)
    if len(xs) != 4:
        raise Unsupported(f"a {len(xs)}-D input (4-D (batch, heads, sequence, head size) "
                          "maps)")
    if len(n.input) > 3 and n.input[3]:
        return [_rotary_at_positions(im, n, ins, x, xs)]
    tables = []
    for v, w in ((ins[1], "cos"), (ins[2], "sin")):
        c = np.asarray(im.const_of(v, f"RotaryEmbedding's {w} cache"), np.float32)
        if c.ndim != 3 or c.shape[1:] != (xs[2], xs[3] // 2) or c.shape[0] not in (1, xs[0]) \
                or not np.all(c == c[:1]):
            raise Unsupported(f"a {w} cache of shape {c.shape} (one (S, D / 2) table for "
                              f"{xs} maps)")
        tables.append(np.concatenate([c[0], c[0]], axis=-1))
    y = im.builder.rotary(x, name=im.node_name)
    im.builder.set_weights(y, {"cos": tables[0], "sin": tables[1]})
    return [y]


def rotary_positions(im: Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                     a: dict[str, Any]) -> list[Value]:
    """The exporters' rotary of x (B, H, S, D) whose tables are computed
    from an int64 (B, S) input of positions (what
    :mod:`~pyparbench.graph.onnx.rotary` makes of it: x, the input's name,
    inv_freq and the scaling): one native ``rotary`` node with positions."""
    x = im.node_of(ins[0], "the rotary's input")
    positions = im.int_input(n.input[1])
    inv_freq = np.asarray(im.const_of(ins[2], "the rotary's inv_freq"), np.float32)
    scaling = np.asarray(im.const_of(ins[3], "the rotary's scaling"), np.float32).reshape(1)
    y = im.builder.rotary(x, positions=positions, name=im.node_name)
    im.builder.set_weights(y, {"inv_freq": inv_freq, "scaling": scaling})
    return [y]


def _rotary_at_positions(im: Importer, n: onnx.NodeProto, ins: list[Value | None], x: int,
                         xs: tuple[int, ...]) -> int:
    """RotaryEmbedding's caches (C, D / 2) read at its position_ids."""
    name = n.input[3]
    if im.input_dtypes.get(name) != "int64" or im.input_shapes[name] != (xs[0], xs[2]):
        raise Unsupported(f"position_ids {name!r} other than an int64 (batch, sequence) "
                          f"{(xs[0], xs[2])} input of the file")
    tables = []
    for v, w in ((ins[1], "cos"), (ins[2], "sin")):
        c = np.asarray(im.const_of(v, f"RotaryEmbedding's {w} cache"), np.float32)
        if c.ndim != 2 or c.shape[1] != xs[3] // 2:
            raise Unsupported(f"a {w} cache of shape {c.shape} with position ids ((max "
                              f"position, {xs[3] // 2}) maps)")
        tables.append(np.concatenate([c, c], axis=-1))
    y = im.builder.rotary(x, positions=im.int_input(name), context=tables[0].shape[0],
                          name=im.node_name)
    im.builder.set_weights(y, {"cos": tables[0], "sin": tables[1]})
    return y
