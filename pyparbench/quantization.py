"""Linear 8-bit quantisation with numpy, as the int8 kernels take it, and the
8-bit rowwise embedding tables of FBGEMM / PyTorch.

``q = saturate(round_half_even(x / scale) + zero_point)`` and
``x ≈ (q - zero_point) · scale``, per tensor (scalar scale and zero point) or
per channel (one scale per slice along ``axis``). The scales are float32, as
the kernels hold them; :func:`dequantize` returns float64, in which
``(q - zero_point) · scale`` is exact, so the reference computes on exactly
the values the kernels see.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = ["QuantDtype", "byte_rowwise_dequantize", "byte_rowwise_prepack", "channel_scales",
           "dequantize", "quantize", "tensor_params"]

QuantDtype = Literal["uint8", "int8"]
_RANGES: dict[str, tuple[int, int]] = {"uint8": (0, 255), "int8": (-128, 127)}


def _range(dtype: str) -> tuple[int, int]:
    if dtype not in _RANGES:
        raise ValueError(f"dtype must be 'uint8' or 'int8', got {dtype!r}")
    return _RANGES[dtype]


def _per_axis(values: npt.ArrayLike, ndim: int, axis: int | None, name: str) -> npt.NDArray[Any]:
    """A scale or zero point shaped to broadcast along `axis` of an ndim array
    (a scalar broadcasts as it is)."""
    v = np.asarray(values)
    if v.ndim == 0:
        return v
    if axis is None:
        raise ValueError(f"{name} must be a scalar without axis, got shape {v.shape}")
    if v.ndim != 1:
        raise ValueError(f"{name} must be a scalar or 1-D with axis={axis}, got shape {v.shape}")
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return v.reshape(shape)


def quantize(x: npt.ArrayLike, scale: npt.ArrayLike, zero_point: npt.ArrayLike = 0,
             dtype: QuantDtype = "uint8", *, axis: int | None = None) -> npt.NDArray[Any]:
    """x / scale rounded half to even, plus zero_point, saturated to dtype's range.

    ``scale`` (> 0, taken as float32) and ``zero_point`` are scalars, or 1-D
    with one value per index of ``axis``.
    """
    lo, hi = _range(dtype)
    xs = np.asarray(x, dtype=np.float64)
    s = _per_axis(np.asarray(scale, dtype=np.float32), xs.ndim, axis, "scale").astype(np.float64)
    if not np.all(np.isfinite(s) & (s > 0)):
        raise ValueError(f"scale must be finite and > 0, got {np.asarray(scale)!r}")
    zp = _per_axis(zero_point, xs.ndim, axis, "zero_point")
    if np.any((zp < lo) | (zp > hi)):
        raise ValueError(f"zero_point must lie in [{lo}, {hi}] for {dtype}, got {zero_point!r}")
    q = np.clip(np.rint(xs / s) + zp, lo, hi)
    return np.ascontiguousarray(q.astype(dtype))


def dequantize(q: npt.ArrayLike, scale: npt.ArrayLike, zero_point: npt.ArrayLike = 0, *,
               axis: int | None = None) -> npt.NDArray[np.float64]:
    """(q - zero_point) · scale in float64 (exact for 8-bit q and float32 scales)."""
    qs = np.asarray(q)
    if qs.dtype not in (np.uint8, np.int8):
        raise TypeError(f"q must be uint8 or int8, got dtype {qs.dtype}")
    s = _per_axis(np.asarray(scale, dtype=np.float32), qs.ndim, axis, "scale")
    zp = _per_axis(zero_point, qs.ndim, axis, "zero_point")
    return np.asarray((qs.astype(np.float64) - zp) * s.astype(np.float64), dtype=np.float64)


def tensor_params(x: npt.ArrayLike, dtype: QuantDtype = "uint8") -> tuple[float, int]:
    """A per-tensor (scale, zero_point) covering x's range (min/max, widened to
    hold 0): asymmetric for uint8, symmetric (zero point 0) for int8."""
    lo, hi = _range(dtype)
    xs = np.asarray(x, dtype=np.float64)
    if xs.size == 0:
        raise ValueError("x is empty: no range to quantise")
    xmin, xmax = min(float(xs.min()), 0.0), max(float(xs.max()), 0.0)
    if dtype == "int8":
        bound = max(-xmin, xmax)
        return (float(np.float32(bound / hi)) if bound > 0 else 1.0), 0
    if xmax == xmin:
        return 1.0, 0
    scale = float(np.float32((xmax - xmin) / (hi - lo)))
    return scale, int(np.clip(round(lo - xmin / scale), lo, hi))


def channel_scales(w: npt.ArrayLike, axis: int = 0, *, bits: int = 8) -> npt.NDArray[np.float32]:
    """Symmetric int8 scales, one per index of `axis`: max |w| of the slice /
    (2^(bits-1) - 1), 1 for an all-zero slice. bits=7 keeps |q| <= 63: what
    int8 kernels without VNNI need to be exact (their vpmaddubsw sums two
    u8·s8 products in int16 and saturates past 32767)."""
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be 2 to 8, got {bits!r}")
    ws = np.abs(np.asarray(w, dtype=np.float64))
    others = tuple(i for i in range(ws.ndim) if i != axis % ws.ndim)
    bound = ws.max(axis=others) if others else ws
    return np.where(bound > 0, bound / (2 ** (bits - 1) - 1), 1.0).astype(np.float32)


def byte_rowwise_prepack(table: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """A float table (rows, dim) as an 8-bit rowwise one (rows, dim + 8), the
    layout of PyTorch's ``torch.ops.quantized.embedding_bag_byte_prepack``
    (and its values): per row, scale = (max - min) / 255 and bias = min as
    float32, values round((x - bias) / scale) as uint8, then the scale and the
    bias's bytes."""
    t = np.asarray(table, dtype=np.float32)
    if t.ndim != 2 or t.shape[1] < 1:
        raise ValueError(f"table must be 2-D (rows, dim) with dim >= 1, got shape {t.shape}")
    lo, hi = t.min(axis=1), t.max(axis=1)
    scale = ((hi - lo) / np.float32(255)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1))
    q = np.clip(np.rint((t - lo[:, None]) / safe[:, None]), 0, 255).astype(np.uint8)
    packed = np.empty((t.shape[0], t.shape[1] + 8), dtype=np.uint8)
    packed[:, :-8] = q
    packed[:, -8:-4] = scale.astype("<f4").view(np.uint8).reshape(-1, 4)
    packed[:, -4:] = lo.astype("<f4").view(np.uint8).reshape(-1, 4)
    return packed


def byte_rowwise_dequantize(packed: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """An 8-bit rowwise table's values, value · scale + bias per row, in float64
    (the product exact; the sum rounded once in float64)."""
    p = np.ascontiguousarray(packed)
    if p.dtype != np.uint8 or p.ndim != 2 or p.shape[1] < 9:
        raise ValueError(f"packed must be a uint8 (rows, dim + 8) table, got {p.dtype} "
                         f"{p.shape}")
    scale = p[:, -8:-4].copy().view("<f4")[:, 0].astype(np.float64)
    bias = p[:, -4:].copy().view("<f4")[:, 0].astype(np.float64)
    return np.asarray(p[:, :-8].astype(np.float64) * scale[:, None] + bias[:, None],
                      dtype=np.float64)
