"""Argument checks shared by every module: one definition of what an int, a
positive count, a choice and a padding are, each raising an error that names
the bad value."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["MAX_RUN_THREADS", "MAX_THREADS", "as_int", "check_shapes", "choice", "int_tuple",
           "is_int", "pair", "padding4", "positive_int", "thread_count"]

# The most threads one kernel, pool or run may ask for (the native core's
# kMaxThreads): far above any machine's cores, far below what makes the
# OpenMP runtime abort the process when it cannot start them.
MAX_THREADS = 4096
# The most threads of one run, all workers' teams together (kMaxRunThreads):
# TensorFlow's defaults (inter_op = intra_op = logical CPUs) on 256 CPUs.
MAX_RUN_THREADS = 1 << 16


def is_int(v: object) -> bool:
    """Python or numpy integer, not bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def as_int(v: object, what: str) -> int:
    """``v`` as an int (any integer type, not bool); TypeError naming it otherwise."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{what} must be an int, got {v!r}")
    return int(v.__index__())


def positive_int(v: object, what: str) -> int:
    """``v`` as an int >= 1: TypeError for a non-int, ValueError below 1."""
    n = as_int(v, what)
    if n < 1:
        raise ValueError(f"{what} must be >= 1, got {n}")
    return n


def thread_count(v: object, what: str, most: int = MAX_THREADS) -> int:
    """``v`` as a thread count from 1 to ``most``."""
    n = positive_int(v, what)
    if n > most:
        raise ValueError(f"{what} must be at most {most}, got {n}")
    return n


def choice(what: str, value: object, choices: Sequence[str]) -> None:
    """ValueError naming ``value`` and the valid ``choices`` unless it is one."""
    if value not in choices:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, choices))}, "
                         f"got {value!r}")


def int_tuple(what: str, v: int | Sequence[int], n: int) -> tuple[int, ...]:
    """An int repeated n times, or a sequence of n ints, as a tuple."""
    if is_int(v):
        return (int(v),) * n  # type: ignore[arg-type]
    t = tuple(v) if isinstance(v, (Sequence, np.ndarray)) and not isinstance(v, str) else ()
    if len(t) != n or not all(is_int(e) for e in t):
        raise TypeError(f"{what} must be an int or {n} ints, got {v!r}")
    return tuple(int(e) for e in t)


def pair(what: str, v: int | Sequence[int]) -> tuple[int, int]:
    """An int or a pair of ints, as a pair."""
    if is_int(v):
        return (int(v), int(v))  # type: ignore[arg-type]
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(is_int(e) for e in v):
        return (int(v[0]), int(v[1]))
    raise TypeError(f"{what} must be an int or a pair of ints, got {v!r}")


def padding4(v: int | Sequence[int]) -> tuple[int, int, int, int]:
    """int, (pad_h, pad_w) or (top, bottom, left, right)."""
    if isinstance(v, (tuple, list)) and len(v) == 4:
        top, bottom, left, right = int_tuple("padding", v, 4)
        return (top, bottom, left, right)
    ph, pw = pair("padding", v)
    return (ph, ph, pw, pw)


def check_shapes(shapes: Mapping[str, int] | None) -> dict[str, int]:
    """``shapes`` (symbolic dimension name -> size) checked: names are
    non-empty strings without ``:``, ``,``, ``=`` or spaces (a file's model
    name carries them), sizes ints >= 1.

    Raises
    ------
    ValueError
        Not a mapping, or a bad name or size, naming it.
    """
    if shapes is not None and not isinstance(shapes, Mapping):
        raise ValueError(f"shapes must map dimension names to sizes, got {shapes!r}")
    out: dict[str, int] = {}
    for k, v in (shapes or {}).items():
        if not isinstance(k, str) or not k or any(c in k for c in ":,= \t"):
            raise ValueError(f"shapes: a dimension's name must be a non-empty string without "
                             f"':', ',', '=' or spaces, got {k!r}")
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"shapes: dimension {k!r} must be an int >= 1, got {v!r}")
        out[k] = v
    return out
