"""numpy's bfloat16 (``ml_dtypes.bfloat16``), imported when bf16 is first
used: pyparbench itself imports without ml_dtypes (an environment built from
Debian 12's packages, which have none, runs everything but bf16)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["bfloat16", "is_bfloat16", "to_bfloat16"]


def bfloat16() -> np.dtype[Any]:
    """The bfloat16 dtype; ImportError saying what to install without ml_dtypes."""
    try:
        import ml_dtypes  # noqa: PLC0415 (optional until bf16 is asked for)
    except ImportError as e:
        raise ImportError("precision 'bf16' needs the ml_dtypes package (numpy's bfloat16): "
                          "pip install ml_dtypes") from e
    dtype: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
    return dtype


def is_bfloat16(dtype: npt.DTypeLike) -> bool:
    """Whether ``dtype`` is bfloat16 (asked by name: no import needed)."""
    return np.dtype(dtype).name == "bfloat16"


def to_bfloat16(x: npt.ArrayLike) -> npt.NDArray[Any]:
    """x as a C-contiguous bfloat16 array: bfloat16 as it is (copied only
    when not contiguous), anything else through float32, rounded to nearest
    (ties to even)."""
    arr = np.asarray(x)
    if is_bfloat16(arr.dtype):
        return np.ascontiguousarray(arr)
    return np.ascontiguousarray(np.asarray(arr, dtype=np.float32).astype(bfloat16()))
