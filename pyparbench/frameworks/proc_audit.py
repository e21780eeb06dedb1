"""A threading audit any process can run on itself, from /proc (Linux).

A framework's threads are not pyparbench's, so the native audit cannot
attach to them; what the kernel reports still tells which threads worked
during a measurement (their CPU time grew), on which CPUs they may run, and
where each last ran. :func:`snapshot` before and after, then :func:`compare`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["TaskSample", "compare", "parse_cpu_list", "snapshot"]


@dataclass(frozen=True)
class TaskSample:
    """One thread of this process at one moment."""

    tid: int
    name: str
    ticks: int  # user + system CPU time, in clock ticks
    last_cpu: int
    allowed: tuple[int, ...]


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """'0-2,5' -> (0, 1, 2, 5)."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def _sample(task: Path) -> TaskSample | None:
    try:
        stat = (task / "stat").read_text()
        status = (task / "status").read_text()
    except OSError:  # the thread ended meanwhile
        return None
    # The name sits in parentheses and may hold spaces or parentheses itself.
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    allowed: tuple[int, ...] = ()
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            allowed = parse_cpu_list(line.split(":", 1)[1])
    # fields[0] is field 3 of proc(5): utime 14, stime 15, processor 39.
    return TaskSample(int(task.name), name, int(fields[11]) + int(fields[12]), int(fields[36]),
                      allowed)


def snapshot() -> dict[int, TaskSample]:
    """Every thread of this process, by thread id."""
    out: dict[int, TaskSample] = {}
    for task in Path("/proc/self/task").iterdir():
        s = _sample(task)
        if s is not None:
            out[s.tid] = s
    return out


def compare(before: dict[int, TaskSample], after: dict[int, TaskSample], *,
            threads: int, cpus: Sequence[int] | None) -> dict[str, Any]:
    """What ran between two snapshots.

    Parameters
    ----------
    threads
        Threads the settings asked for (the caller's included), to flag more.
    cpus
        The CPUs the process was confined to (None: not pinned), to flag a
        thread allowed elsewhere.

    Returns
    -------
    dict
        ``threads`` (all threads alive), ``working`` (the threads whose CPU
        time grew: tid, name, ticks, last CPU, allowed CPUs), ``cpus_allowed``
        (the union over working threads), ``cpus_last_seen`` and ``notes``
        (differences from the request).
    """
    grown = [(s, s.ticks - (before[tid].ticks if tid in before else 0))
             for tid, s in sorted(after.items())]
    busy = [(s, ticks) for s, ticks in grown if ticks > 0]
    notes = []
    if len(busy) > threads:
        notes.append(f"{len(busy)} threads used CPU time, {threads} requested "
                     f"({', '.join(sorted({s.name for s, _ in busy}))})")
    if cpus is not None:
        want = set(cpus)
        for s, _ in busy:
            stray = set(s.allowed) - want
            if stray:
                notes.append(f"thread {s.tid} ({s.name}) may run on CPUs "
                             f"{sorted(stray)}, outside the requested {sorted(want)}")
    return {
        "threads": len(after),
        "working": [{"tid": s.tid, "name": s.name, "ticks": ticks, "last_cpu": s.last_cpu,
                     "allowed": list(s.allowed)} for s, ticks in busy],
        "cpus_allowed": sorted({c for s, _ in busy for c in s.allowed}),
        "cpus_last_seen": sorted({s.last_cpu for s, _ in busy}),
        "process_cpus": sorted(os.sched_getaffinity(0)),
        "notes": notes,
    }
