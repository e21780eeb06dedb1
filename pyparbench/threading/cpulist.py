"""CPU lists written the way Linux writes them ("0-3,8")."""

from __future__ import annotations

from collections.abc import Iterable


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
