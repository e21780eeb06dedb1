"""CPU lists the way Linux writes them ("0-3,8"): read and written here
only. Imports nothing of the package, so a framework's child (which must
not load the native core) parses its allowed CPUs with it too."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["cpu_str", "parse_cpu_list"]


def cpu_str(cpus: Iterable[int]) -> str:
    """CPU numbers as "0-3,8" ("none" for no CPU)."""
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


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """"0-2,5" -> (0, 1, 2, 5), as /proc and /sys write them (surrounding
    space and an empty list allowed: "" -> ()).

    Raises
    ------
    ValueError
        A part that is not a CPU number or a rising range, naming the text.
    """
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or (dash and int(hi) < int(lo)):
            raise ValueError(f"not a CPU list: {text!r} (part {part!r}; want e.g. '0-3,8')")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)
