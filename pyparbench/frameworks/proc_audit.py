"""A threading audit any process can run on itself, from /proc (Linux).

A framework's threads are not pyparbench's, so the native audit cannot
attach to them; what the kernel reports still tells which threads worked
during a measurement (their CPU time grew: each thread's CPU clock, read
from this process), on which CPUs they may run, and where each last ran. :func:`snapshot` before and after, then :func:`compare`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyparbench.cpulist import parse_cpu_list

__all__ = ["TaskSample", "TaskStat", "compare", "parse_task_stat", "read_task_stat", "snapshot"]


@dataclass(frozen=True)
class TaskSample:
    """One thread of this process at one moment."""

    tid: int
    name: str
    cpu_ns: int  # CPU time so far (the thread's CPU clock; else clock ticks)
    last_cpu: int
    allowed: tuple[int, ...]


@dataclass(frozen=True)
class TaskStat:
    """One thread's /proc/PID/task/TID/stat line, split: its name and the
    fields after it (``fields[0]`` is the state, field 3 of proc(5))."""

    name: str
    fields: tuple[str, ...]

    @property
    def state(self) -> str:
        """"R" running or ready to run, "S" asleep, ... (proc(5))."""
        return self.fields[0]


def parse_task_stat(text: str) -> TaskStat:
    """A thread's stat line as :class:`TaskStat`.

    Raises
    ------
    ValueError
        A text with no "(name)" followed by fields, naming the text.
    """
    # "tid (name) S ...": the name may hold spaces and parentheses itself.
    open_, close = text.find("("), text.rfind(")")
    fields = tuple(text[close + 1:].split()) if close > open_ >= 0 else ()
    if not fields:
        raise ValueError(f"not a /proc task stat line: {text[:200]!r}")
    return TaskStat(text[open_ + 1:close], fields)


def read_task_stat(pid: int | str, tid: int | str) -> TaskStat | None:
    """Thread ``tid`` of process ``pid`` ("self": this one) as its stat file
    says now; None where it cannot be read (the thread ended meanwhile)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            return parse_task_stat(f.read())
    except OSError:
        return None


def _thread_clock(tid: int) -> int:
    """The clock id of another thread's CPU time (Linux: CPUCLOCK_SCHED of a
    thread, MAKE_THREAD_CPUCLOCK), as a signed 32-bit clockid_t."""
    v = (((~tid) << 3) | 6) & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


_TICK_NS = 10**9 // os.sysconf("SC_CLK_TCK")


def _sample(task: Path) -> TaskSample | None:
    stat = read_task_stat("self", task.name)
    try:
        status = (task / "status").read_text()
    except OSError:  # the thread ended meanwhile
        return None
    if stat is None:
        return None
    allowed: tuple[int, ...] = ()
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            allowed = parse_cpu_list(line.split(":", 1)[1])
    tid = int(task.name)
    try:
        cpu_ns = time.clock_gettime_ns(_thread_clock(tid))
    except OSError:  # no per-thread clock: /proc's clock ticks
        # fields[0] is field 3 of proc(5): utime 14, stime 15.
        cpu_ns = (int(stat.fields[11]) + int(stat.fields[12])) * _TICK_NS
    # processor: field 39 of proc(5).
    return TaskSample(tid, stat.name, cpu_ns, int(stat.fields[36]), allowed)


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
        time grew: tid, name, CPU ns, last CPU, allowed CPUs), ``cpus_allowed``
        (the union over working threads), ``cpus_last_seen`` and ``notes``
        (differences from the request).
    """
    grown = [(s, s.cpu_ns - (before[tid].cpu_ns if tid in before else 0))
             for tid, s in sorted(after.items())]
    busy = [(s, ns) for s, ns in grown if ns > 0]
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
        "working": [{"tid": s.tid, "name": s.name, "cpu_ns": ns, "last_cpu": s.last_cpu,
                     "allowed": list(s.allowed)} for s, ns in busy],
        "cpus_allowed": sorted({c for s, _ in busy for c in s.allowed}),
        "cpus_last_seen": sorted({s.last_cpu for s, _ in busy}),
        "process_cpus": sorted(os.sched_getaffinity(0)),
        "notes": notes,
    }
