"""Padding-aware position ids (RoBERTa's), the meaning of the ``position_ids``
op in numpy: the numpy reference and the ONNX import's check of a file's
position computation both read it from here."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["padded_positions"]


def padded_positions(ids: npt.ArrayLike, pad_id: int, offset: int) -> npt.NDArray[np.int64]:
    """Per row of (batch, seq) ``ids``: ``offset`` + the running count of ids
    other than ``pad_id`` where the id is not ``pad_id``, else ``offset``."""
    a: npt.NDArray[Any] = np.asarray(ids)
    if a.ndim != 2:
        raise ValueError(f"position ids need (batch, seq) ids, got shape {a.shape}")
    token = (a != pad_id).astype(np.int64)
    out: npt.NDArray[np.int64] = np.cumsum(token, axis=1) * token + int(offset)
    return out
