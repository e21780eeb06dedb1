"""Argument helpers shared by the threading modules."""

from __future__ import annotations

from collections.abc import Iterable


def as_int(v: object, what: str) -> int:
    """``v`` as an int (any integer type, not bool); TypeError naming it otherwise."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{what} must be an int, got {v!r}")
    return int(v.__index__())


def cpu_str(cpus: Iterable[int]) -> str:
    """CPU numbers as "0-3,8"."""
    v = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[j + 1] == v[j] + 1:
            j += 1
        parts.append(str(v[i]) if i == j else f"{v[i]}-{v[j]}")
        i = j + 1
    return ",".join(parts) if parts else "none"
