"""How much of the machine's CPU time other processes use, measured now.

The 1-minute load average lags: right after a build it still says "busy"
for a minute although nothing runs any more. :class:`ForeignLoad` reads
/proc/stat around a block of code instead and leaves out this process's own
CPU time; :func:`busy_cpus` samples it over a short window.
"""

from __future__ import annotations

import os
import time

__all__ = ["ForeignLoad", "busy_cpus"]


class ForeignLoad:
    """The share of the machine's CPU time that other processes used while
    the ``with`` block ran (from /proc/stat less this process's own CPU time;
    0 where /proc/stat cannot be read)."""

    def __init__(self) -> None:
        self.foreign = 0.0

    @staticmethod
    def _busy() -> tuple[float, int] | None:
        try:
            with open("/proc/stat") as fh:
                fields = [float(v) for v in fh.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
        return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1

    def __enter__(self) -> ForeignLoad:
        self._t0, self._p0, self._b0 = time.monotonic(), time.process_time(), self._busy()
        return self

    def __exit__(self, *exc: object) -> None:
        b1 = self._busy()
        wall = time.monotonic() - self._t0
        if self._b0 is None or b1 is None or wall <= 0:
            return
        mine = time.process_time() - self._p0
        self.foreign = max(0.0, (b1[0] - self._b0[0] - mine) / (wall * b1[1]))


def busy_cpus(seconds: float = 1.0) -> float:
    """How many CPUs' worth of time other processes used over the next
    ``seconds`` (this process sleeps meanwhile)."""
    if seconds <= 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    with ForeignLoad() as load:
        time.sleep(seconds)
    return load.foreign * (os.cpu_count() or 1)
