"""Arrays laid out for the kernels: numpy aligns data to 16 bytes only."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["aligned_copy", "aligned_empty", "available_bytes", "check_fits"]


def aligned_empty(shape: int | Sequence[int], dtype: npt.DTypeLike = np.float32,
                  align: int = 64) -> npt.NDArray[Any]:
    """An uninitialised C-contiguous array whose data starts on an
    ``align``-byte boundary (a cache line by default).

    An embedding table whose rows are a multiple of 64 bytes then has every
    row on whole cache lines: on a numpy-allocated table (16-byte aligned) a
    256-byte row spans five lines instead of four and every vector load
    splits, which made ``embedding_bag`` about 1.3x slower here.

    Raises
    ------
    ValueError
        ``align`` not a positive power of two, or a negative dimension.
    """
    if align < 1 or align & (align - 1):
        raise ValueError(f"align must be a positive power of two, got {align}")
    dims = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"shape must not have negative dimensions, got {dims}")
    dt = np.dtype(dtype)
    nbytes = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
    buf = np.empty(nbytes + align, np.uint8)
    start = (-buf.ctypes.data) % align
    return buf[start:start + nbytes].view(dt).reshape(dims)


def aligned_copy(a: npt.ArrayLike, align: int = 64) -> npt.NDArray[Any]:
    """A C-contiguous copy of ``a`` in :func:`aligned_empty` memory."""
    arr = np.asarray(a)
    out = aligned_empty(arr.shape, arr.dtype, align)
    out[...] = arr
    return out


def available_bytes(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """The memory the kernel says is available for new work (MemAvailable),
    or None where it does not say (not Linux, an old kernel)."""
    try:
        text = Path(meminfo).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) * 1024
    return None


def check_fits(what: str, nbytes: int, available: int | None = None) -> None:
    """MemoryError naming ``what``, its bytes and the available memory when
    ``nbytes`` exceeds what is available (``available``: MemAvailable by
    default), before anything is allocated: a server-sized model on a small
    machine fails in one line instead of swapping or being killed."""
    free = available_bytes() if available is None else available
    if free is not None and nbytes > free:
        raise MemoryError(f"{what} needs {nbytes / 1e9:.1f} GB of weights; this machine has "
                          f"{free / 1e9:.1f} GB available")
