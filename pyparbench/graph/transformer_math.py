"""The transformer ops' meaning in numpy (``rms_norm``, ``rotary``,
``attention``, ``decode_attention``, ``glu``): the numpy reference computes them from here, in
whatever float dtype it is given, and the tests compare the native kernels
with them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["attention", "decode_attention", "glu", "rms_norm", "rope_tables", "rotary"]

Array = npt.NDArray[Any]
_erf = np.frompyfunc(math.erf, 1, 1)


def rms_norm(x: Array, scale: Array, eps: float) -> Array:
    """x / sqrt(mean(x^2) over the last axis + eps) * scale."""
    out: Array = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * scale
    return out


def rotary(x: Array, cos: Array, sin: Array) -> Array:
    """x * cos + rotate_half(x) * sin over x's last two axes (S, D), the
    tables (S, D); rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2])."""
    half = x.shape[-1] // 2
    turned = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    out: Array = x * cos + turned * sin
    return out


def rope_tables(positions: int, head_dim: int, theta: float) -> tuple[Array, Array]:
    """The (positions, head_dim) cos and sin tables of rotary positions 0 ..
    positions - 1 in the rotate-half layout (each angle in both halves), as
    Llama's: angle(p, i) = p / theta^(2i / head_dim), i < head_dim / 2;
    computed in float64."""
    if positions < 1 or head_dim < 2 or head_dim % 2 or not theta > 1:
        raise ValueError(f"rope tables need positions >= 1, an even head_dim >= 2 and "
                         f"theta > 1, got {positions}, {head_dim}, {theta}")
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(positions, dtype=np.float64), inv_freq)
    both = np.concatenate([angles, angles], axis=-1)
    return np.cos(both), np.sin(both)


def attention(q: Array, k: Array, v: Array, mask: Array | None, causal: bool,
              scale: float, causal_fill: float = -math.inf) -> Array:
    """softmax(scale q k^T + mask) v per (batch, head) of q (B, H, Sq, D), k
    (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv): head h reads key / value head
    h // (H / Hkv); causal gives keys j > i + Sk - Sq the score
    ``causal_fill``; a row whose scores are all -inf is zero."""
    group = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = scale * (q @ np.swapaxes(kk, -1, -2))
    if mask is not None:
        s = s + mask
    sq, sk = q.shape[2], k.shape[2]
    if causal:
        hidden = np.arange(sk)[None, :] > np.arange(sq)[:, None] + sk - sq
        s = np.where(hidden, causal_fill, s)
    top = np.max(s, axis=-1, keepdims=True)
    dead = ~np.isfinite(top) & (top < 0)
    e = np.exp(s - np.where(dead, 0, top))
    e = np.where(dead, 0, e)
    total = np.sum(e, axis=-1, keepdims=True)
    out: Array = (e / np.where(dead, 1, total)) @ vv
    return out


def decode_attention(q: Array, k_new: Array, v_new: Array, past_k: Array, past_v: Array,
                     mask: Array | None, scale: float,
                     causal_fill: float = -math.inf) -> Array:
    """:func:`attention` of q (B, H, S, D) over the past keys / values
    followed by the S new ones (query i sees keys j <= P + i)."""
    k = np.concatenate([past_k, k_new], axis=2)
    v = np.concatenate([past_v, v_new], axis=2)
    return attention(q, k, v, mask, True, scale, causal_fill)


def glu(gate: Array, up: Array, kind: str) -> Array:
    """act(gate) * up: act swish (SwiGLU), gelu (GeGLU, exact) or gelu_tanh."""
    if kind == "swish":
        a = gate / (1 + np.exp(-gate))
    elif kind == "gelu":
        a = 0.5 * gate * (1 + np.asarray(_erf(gate / math.sqrt(2)), dtype=gate.dtype))
    elif kind == "gelu_tanh":
        a = 0.5 * gate * (1 + np.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate ** 3)))
    else:
        raise ValueError(f"glu kind must be swish, gelu or gelu_tanh, got {kind!r}")
    out: Array = a * up
    return out
