"""The audit: which threads really ran, where, and whether that is what was asked.

A run is audited by attaching one native recorder to every kernel and pool
taking part (each as its own team), running, and reading back one record per
thread that did work: its OS thread id, its index in its team, the OpenMP
team size it saw, the CPUs it was allowed on and seen on, and its context
switches while it worked. The records are then compared with what was
requested (threads per team, the CPUs each team was pinned to); a
difference is a ``ThreadingMismatch`` warning, or a
``ThreadingMismatchError`` with ``strict=True``.

Kernels report their whole OpenMP team at the start and at the end of each
run (the threads that oneDNN's regions of that size run on); pools report on
every task.

A graph run's audit also carries each node's thread count under the
per-node thread rule (``NodeThreads``): a node whose work is below what a
team costs to start and join runs alone, on its worker's thread, and the
audit says which nodes did and why (``ThreadAudit.alone``); a worker whose
nodes all ran alone reports a team of one.

Example
-------
>>> with ppb.threading.audit(kernel) as report:  # doctest: +SKIP
...     kernel.run(a, b)
>>> report.audit.cpus_seen  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Union

from pyparbench._core import ops as _ops
from pyparbench._core import threading as _t
from pyparbench.threading.pools import Pool
from pyparbench.cpulist import cpu_str

Target = Union[Pool, "_ops.Kernel"]


class ThreadingMismatch(RuntimeWarning):
    """What ran differs from the threading that was requested."""


class ThreadingMismatchError(RuntimeError):
    """What ran differs from the threading that was requested (``strict=True``).

    ``mismatches`` lists each difference.
    """

    def __init__(self, mismatches: list[str]) -> None:
        super().__init__(_message(mismatches))
        self.mismatches = mismatches


@dataclass(frozen=True)
class ThreadRecord:
    """One thread that did work for one team."""

    team: int
    tid: int
    worker: int  # index in the team; -1 for a thread outside it
    omp_team_size: int  # 0 outside OpenMP
    affinity: tuple[int, ...]
    cpus_seen: tuple[int, ...]
    reports: int
    voluntary_switches: int
    involuntary_switches: int


@dataclass(frozen=True)
class NodeThreads:
    """The per-node thread rule's decision for one node of a compiled graph."""

    node: int
    name: str
    op: str
    threads: int  # the node's team; 1: on its worker's thread, no team started; 0: no kernel
    requested: int  # intra_op
    work_ns: float  # the estimate of its work on one core
    team_ns: float  # what a team of `requested` costs to start and join (0: not measured)
    threshold_ns: float  # below it the node runs alone (0: the rule did not apply)
    reason: str

    @property
    def alone(self) -> bool:
        """Ran alone though more threads were requested."""
        return self.threads == 1 and self.requested > 1

    @classmethod
    def from_native(cls, node: int, name: str, op: str, d: dict[str, Any]) -> NodeThreads:
        return cls(node, name, op, int(d["threads"]), int(d["requested"]), float(d["work_ns"]),
                   float(d["team_ns"]), float(d["threshold_ns"]), str(d["reason"]))


@dataclass(frozen=True)
class ThreadAudit:
    """Every thread that did work, sorted by team, worker and thread id;
    for a graph run, ``nodes``: each node's threads under the per-node rule."""

    threads: tuple[ThreadRecord, ...]
    nodes: tuple[NodeThreads, ...] = ()

    @property
    def alone(self) -> tuple[NodeThreads, ...]:
        """The nodes that ran alone though more threads were requested, and why."""
        return tuple(n for n in self.nodes if n.alone)

    def describe_alone(self) -> list[str]:
        """One line per node that ran alone: which, and why."""
        return [f"node {n.node} {n.name!r} ({n.op}) ran alone: {n.reason}" for n in self.alone]

    @classmethod
    def from_native(cls, records: list[dict[str, Any]],
                    nodes: tuple[NodeThreads, ...] = ()) -> ThreadAudit:
        return cls(tuple(
            ThreadRecord(
                team=int(r["team"]), tid=int(r["tid"]), worker=int(r["worker"]),
                omp_team_size=int(r["omp_team_size"]), affinity=tuple(r["affinity"]),
                cpus_seen=tuple(r["cpus_seen"]), reports=int(r["reports"]),
                voluntary_switches=int(r["voluntary_switches"]),
                involuntary_switches=int(r["involuntary_switches"]))
            for r in records), nodes)

    @property
    def teams(self) -> list[int]:
        return sorted({r.team for r in self.threads})

    def team(self, team: int) -> tuple[ThreadRecord, ...]:
        """The records of one team."""
        return tuple(r for r in self.threads if r.team == team)

    @property
    def tids(self) -> set[int]:
        return {r.tid for r in self.threads}

    @property
    def cpus_seen(self) -> set[int]:
        return {c for r in self.threads for c in r.cpus_seen}

    def to_list(self) -> list[dict[str, Any]]:
        """JSON-serialisable records."""
        return [asdict(r) for r in self.threads]


@dataclass(frozen=True)
class TeamRequest:
    """What one team (a kernel's OpenMP team, or a pool) was asked to be."""

    team: int
    threads: int
    cpus: tuple[int, ...] | None  # None: not pinned
    openmp: bool  # its threads run in OpenMP regions of `threads`
    name: str = ""

    @classmethod
    def of(cls, target: Target, team: int) -> TeamRequest:
        if isinstance(target, Pool):
            return cls(team, target.threads, target.cpus, target.kind == "openmp",
                       repr(target))
        if isinstance(target, _ops.Kernel):
            cpus = tuple(target.pinned_cpus)
            return cls(team, int(target.threads), cpus or None, True,
                       f"{type(target).__name__}(threads={target.threads})")
        raise TypeError(f"can only audit pyparbench kernels and pools, got {target!r}")


def compare(requested: list[TeamRequest], audit: ThreadAudit) -> list[str]:
    """Every difference between the requested teams and the audited threads."""
    out: list[str] = []
    for req in requested:
        recs = audit.team(req.team)
        who = f"team {req.team} ({req.name})" if req.name else f"team {req.team}"
        if not recs:
            out.append(f"{who}: no thread reported work")
            continue
        outside = [r for r in recs if r.worker < 0]
        for r in outside:
            out.append(f"{who}: thread {r.tid}, not one of the team's, did work "
                       f"(on CPUs {cpu_str(r.cpus_seen)})")
        tids = {r.tid for r in recs}
        if len(tids) > req.threads:
            out.append(f"{who}: {len(tids)} threads did work, {req.threads} requested")
        if req.openmp:
            sizes = sorted({r.omp_team_size for r in recs if r.worker >= 0})
            if sizes != [req.threads]:
                out.append(f"{who}: OpenMP team of {'/'.join(map(str, sizes))} threads, "
                           f"{req.threads} requested")
        if req.cpus is None:
            continue
        for r in recs:
            if r.worker < 0:
                continue
            want = req.cpus[r.worker % len(req.cpus)]
            if set(r.affinity) != {want}:
                out.append(f"{who}: thread {r.tid} (worker {r.worker}) may run on CPUs "
                           f"{cpu_str(r.affinity)}, requested CPU {want}")
            stray = set(r.cpus_seen) - set(req.cpus)
            if stray:
                out.append(f"{who}: thread {r.tid} (worker {r.worker}) was seen on CPUs "
                           f"{cpu_str(stray)}, outside the requested {cpu_str(req.cpus)}")
    pinned = [r for r in requested if r.cpus is not None]
    for i, a in enumerate(pinned):
        for b in pinned[i + 1:]:
            if set(a.cpus or ()) & set(b.cpus or ()):
                continue  # asked to share CPUs: nothing to hold them to
            seen_a = {c for r in audit.team(a.team) for c in r.cpus_seen}
            seen_b = {c for r in audit.team(b.team) for c in r.cpus_seen}
            if seen_a & seen_b:
                out.append(f"teams {a.team} and {b.team} were asked for disjoint CPUs but "
                           f"both ran on CPUs {cpu_str(seen_a & seen_b)}")
    return out


@dataclass
class AuditReport:
    """Filled in when the ``audit`` block ends."""

    requested: list[TeamRequest]
    audit: ThreadAudit | None = None
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.audit is not None and not self.mismatches


def check(report: AuditReport, *, strict: bool = False, stacklevel: int = 2) -> None:
    """Warn (``ThreadingMismatch``) or raise (``ThreadingMismatchError`` when
    ``strict``) if the report holds mismatches."""
    if not report.mismatches:
        return
    if strict:
        raise ThreadingMismatchError(report.mismatches)
    warnings.warn(_message(report.mismatches), ThreadingMismatch, stacklevel=stacklevel + 1)


@contextmanager
def audit(*targets: Target, strict: bool = False) -> Iterator[AuditReport]:
    """Audit the kernels and pools run inside the block.

    Parameters
    ----------
    *targets
        Prepared kernels (``pyparbench.ops.*``) and ``Pool`` objects; target
        ``i`` reports as team ``i``.
    strict
        Raise ``ThreadingMismatchError`` on a mismatch instead of warning
        ``ThreadingMismatch``.

    Yields
    ------
    AuditReport
        Its ``audit`` (a ``ThreadAudit``) and ``mismatches`` are filled in
        when the block ends without an exception.
    """
    if not targets:
        raise ValueError("audit() needs at least one kernel or pool")
    requested = [TeamRequest.of(t, i) for i, t in enumerate(targets)]
    recorder = _t.Audit()
    natives = [t._pool() if isinstance(t, Pool) else t for t in targets]
    attached = []
    try:
        for i, n in enumerate(natives):
            n._attach_audit(recorder, i)
            attached.append(n)
        report = AuditReport(requested)
        yield report
    finally:
        for n in attached:
            n._detach_audit()
    report.audit = ThreadAudit.from_native(recorder.threads())
    report.mismatches = compare(requested, report.audit)
    check(report, strict=strict, stacklevel=3)


def _message(mismatches: list[str]) -> str:
    return "threading differs from the request:\n  " + "\n  ".join(mismatches)
