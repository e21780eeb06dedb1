"""/proc/cpuinfo, read in one place. Imports nothing of the package: the
threading layer (below the machine's), and a framework's child (which must
not load the native core), read it too."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CPUINFO", "cpuinfo_value", "read_cpuinfo"]

CPUINFO = Path("/proc/cpuinfo")


def read_cpuinfo() -> str:
    """This machine's /proc/cpuinfo text; "" where it has none (not Linux)
    or it cannot be read."""
    try:
        return CPUINFO.read_text(errors="replace")
    except OSError:
        return ""


def cpuinfo_value(text: str, key: str) -> str | None:
    """The value of the first ``key : value`` line of a /proc/cpuinfo text
    ("model name", "cpu MHz", "flags"), stripped; None when no line has it."""
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        if colon and name.strip() == key:
            return value.strip()
    return None
