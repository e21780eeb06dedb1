"""How much of the CPU time of this process's CPUs other processes use, measured now.

The 1-minute load average lags: right after a build it still says "busy"
for a minute although nothing runs any more. :class:`ForeignLoad` reads
/proc/stat around a block of code instead and leaves out this process's own
CPU time; :func:`busy_cpus` samples it over a short window.

Only the CPUs this process may use count (its affinity: ``taskset``, or
the CPUs a Slurm task was given): a job sharing a node with another job on
other CPUs is not busy for that.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection

__all__ = ["ForeignLoad", "busy_cpus", "cpu_seconds"]


def cpu_seconds(stat: str, cpus: Collection[int]) -> float | None:
    """Busy seconds (all but idle and I/O wait) of ``cpus`` since boot, from
    the text of /proc/stat (its ``cpuN`` lines); None when a CPU has no line."""
    busy, found = 0.0, set()
    for line in stat.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or not name[3:].isdigit() or int(name[3:]) not in cpus:
            continue
        try:
            fields = [float(v) for v in rest.split()]
        except ValueError:
            return None
        if len(fields) < 4:
            return None
        busy += sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0.0)
        found.add(int(name[3:]))
    if found != set(cpus):
        return None
    return busy / os.sysconf("SC_CLK_TCK")


class ForeignLoad:
    """The share of the CPU time of this process's CPUs that other processes
    used while the ``with`` block ran (from /proc/stat less this process's
    own CPU time; 0 where /proc/stat cannot be read)."""

    def __init__(self) -> None:
        self.foreign = 0.0

    @staticmethod
    def _busy() -> tuple[float, int] | None:
        cpus = os.sched_getaffinity(0)
        try:
            with open("/proc/stat") as fh:
                seconds = cpu_seconds(fh.read(), cpus)
        except OSError:
            return None
        return None if seconds is None else (seconds, len(cpus))

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
    """How many CPUs' worth of time other processes used, on the CPUs this
    process may use, over the next ``seconds`` (this process sleeps meanwhile)."""
    if seconds <= 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    with ForeignLoad() as load:
        time.sleep(seconds)
    return load.foreign * len(os.sched_getaffinity(0))
