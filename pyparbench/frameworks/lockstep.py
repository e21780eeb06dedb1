"""Runtimes compared in lockstep: each in its own process, taking turns run
by run.

On a shared machine a process can run 1.3-1.7x slow for spells of a fraction
of a second to seconds. Runtimes measured one process after another then
differ by whichever caught a spell, and a 10 % difference needs many rounds
to show. Here every contender (a framework and mode, or native, under its
settings) is started and prepared in its own child, pinned as
:func:`~pyparbench.frameworks.launch.run_child` pins it; then the parent
has them run one timed run each in turn, the order rotating every step.
Before each run the parent waits a short idle gap and then until no thread
of another child runs (none in state R in /proc/PID/task/*/stat): a pool
spinning after its run (ONNX Runtime's threads stay runnable for about
40 ms) would otherwise share a CPU with the next contender's pinned thread,
which then waits for the scheduler, 4-12 ms at a time (MobileNet-v2 at
batch 1, native against ONNX Runtime on a 2-core VM: 0.58x with a fixed
10 ms gap, 1.09x [1.06, 1.21] with the wait, 1.07x with a 100 ms gap).
A pool that never stops spinning (``omp_wait=active``, GOMP_SPINCOUNT
infinite) never idles, so each child is stopped (SIGSTOP) once it has
answered and continued (SIGCONT) for its next run, as
:class:`~pyparbench.child_process.Session` pauses a child: with a torch child
spinning actively on both CPUs, torch's own defaults (threads that sleep
at barriers) read 24-172 ms against 0.5-28 ms alone, and the spinning
setting looked up to 2x faster than the others.
A spell longer than one step falls on neighbouring runs of every
contender, so the per-step ratio cancels it: the median of the paired
ratios, with its distribution-free confidence interval, is the comparison.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyparbench.child_process import ChildFailed
from pyparbench.frameworks.answer import FrameworkRun
from pyparbench.frameworks.child import STEP_MARK
from pyparbench.frameworks.launch import ChildPlan, Job, child_record, plan_child, start_child
from pyparbench.frameworks.proc_audit import read_task_stat
from pyparbench.frameworks.spec import GraphLike
from pyparbench.settings import Settings
from pyparbench.stats import estimate_paired_ratio, median_interval

__all__ = ["Contender", "LockstepResult", "PairedRatio", "median_interval", "run_lockstep"]


@dataclass(frozen=True)
class Contender:
    """One runtime: ``framework`` ("native", "onnxruntime", "torch",
    "tensorflow"), its ``mode`` (None: its default) and ``settings``;
    ``name`` labels it (default "framework/mode"), needed where two
    contenders of one framework differ; ``python``: the interpreter of
    another install to run it in (for example pyparbench built against
    another oneDNN), None for this one; ``defaults``: the framework as it
    comes, no knob set and every CPU (``settings`` ignored), or with
    ``preset`` one of OpenVINO's own presets (its hint); ``graph``: what
    this contender runs instead of the lockstep's graph (the same model in
    another file, such as its int8 quantisation), None for that graph."""

    framework: str
    mode: str | None = None
    settings: Settings | None = None
    name: str | None = None
    python: str | None = None
    defaults: bool = False
    preset: str | None = None
    graph: GraphLike | None = None

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        return f"{self.framework}/{self.mode}" if self.mode else self.framework


@dataclass(frozen=True)
class PairedRatio:
    """``a`` against ``b`` over paired steps: b's time over a's read in
    pairs (:func:`pyparbench.stats.estimate_paired_ratio`, the median of the
    per-step log ratios; above 1: a is faster), its distribution-free
    confidence interval, and in how many steps a was faster."""

    a: str
    b: str
    median: float
    low: float
    high: float
    a_faster: int
    steps: int

    def as_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "median": self.median, "low": self.low,
                "high": self.high, "a_faster": self.a_faster, "steps": self.steps}

    def __str__(self) -> str:
        return (f"{self.a} vs {self.b}: x{self.median:.3f} [{self.low:.3f}, {self.high:.3f}] "
                f"({self.a} faster in {self.a_faster} of {self.steps} steps)")


@dataclass
class LockstepResult:
    """Per contender (by label) its timed runs in ns, aligned step by step;
    ``errors``: a contender that failed, and why (the steps before the
    failure are kept); ``answers``: what became of each child (its answer read);
    ``settle_s``: per contender, the seconds waited before each of its runs,
    after the idle gap, until the other children were idle."""

    labels: list[str]
    ns: dict[str, list[float]]
    errors: dict[str, str] = field(default_factory=dict)
    answers: dict[str, FrameworkRun] = field(default_factory=dict)
    settle_s: dict[str, list[float]] = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return min((len(v) for v in self.ns.values()), default=0)

    def ratio(self, a: str, b: str, confidence: float = 0.95) -> PairedRatio:
        """``a`` against ``b`` over the steps both completed."""
        for name in (a, b):
            if name not in self.ns:
                raise KeyError(f"no contender {name!r}; have {', '.join(self.labels)}")
        n = self.steps
        if n == 0:
            raise ValueError(f"no completed steps to compare {a} with {b}")
        est = estimate_paired_ratio(list(zip(self.ns[a][:n], self.ns[b][:n], strict=True)),
                                    level=confidence)
        return PairedRatio(a, b, est.ratio, est.low, est.high, est.above, n)

    def as_dict(self) -> dict[str, Any]:
        return {"labels": self.labels, "ns": self.ns, "errors": self.errors,
                "steps": self.steps, "settle_s": self.settle_s}


def _step(line: str) -> dict[str, Any] | None:
    """A step line as an answer (``step``: "ready" or a run's ns); the
    child's other lines are not answers."""
    return {"step": line[len(STEP_MARK):]} if line.startswith(STEP_MARK) else None


class _Child:
    """One started contender: its request sent, a step line per ``go``.
    Paused between its runs (stopped once it has answered, continued for
    its next ``go``), so that its pool, spinning or not, is never runnable
    while another contender runs."""

    def __init__(self, label: str, plan: ChildPlan) -> None:
        self.label, self.plan = label, plan
        self.session = start_child(plan, pause=True, parse=_step)

    def finish(self, timeout: float) -> FrameworkRun:
        """Ends it and returns what became of it (its answer, or the error naming it)."""
        return child_record(self.plan, lambda: self.session.finish(timeout))


def running_threads(pid: int) -> int | None:
    """How many threads of process ``pid`` are running or ready to run
    (state R in /proc/PID/task/TID/stat: a pool spinning is, a pool asleep
    is not); None where unreadable (the process is gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    running = 0
    for tid in tids:
        stat = read_task_stat(pid, tid)  # None: a thread that ended meanwhile
        running += stat is not None and stat.state == "R"
    return running


# The others count as idle once no thread of theirs runs in _QUIET_CHECKS
# checks _POLL_S apart; the wait ends after _SETTLE_CAP_S in any case.
_POLL_S, _QUIET_CHECKS, _SETTLE_CAP_S = 0.001, 2, 1.0


def wait_until_idle(pids: Sequence[int]) -> float:
    """Waits until no thread of the processes ``pids`` runs (a pool still
    spinning after its run), at most _SETTLE_CAP_S; returns the seconds
    waited."""
    t0 = time.monotonic()
    quiet = 0
    while quiet < _QUIET_CHECKS and time.monotonic() - t0 < _SETTLE_CAP_S:
        quiet = quiet + 1 if not any(running_threads(p) for p in pids) else 0
        if quiet < _QUIET_CHECKS:
            time.sleep(_POLL_S)
    return time.monotonic() - t0


def run_lockstep(graph: GraphLike, contenders: Sequence[Contender], *, steps: int = 30,
                 warmup: int = 3, gap_s: float = 0.01, timeout: float = 600.0,
                 progress: Callable[[int, int], None] | None = None) -> LockstepResult:
    """Run ``graph`` (or a contender's own) in every contender's own child,
    one timed run each in turn for ``steps`` steps (after ``warmup``
    untimed runs each).

    ``gap_s``: idle seconds before each run, after which the parent waits
    (at most a second) until no thread of the other children, each stopped
    since its last answer, is runnable, so that no pool still spinning
    after its run meets the next; ``timeout``: seconds for the whole run,
    preparation included, after which what is unfinished is killed;
    ``progress``: called with (step, steps) after each step.

    A contender that fails (cannot start, crashes, hangs) is named in
    ``errors`` with its reason; the steps completed before are kept.

    Raises
    ------
    ValueError
        Fewer than two contenders, two with one label, an unknown framework
        or mode, or bad counts.
    """
    if len(contenders) < 2:
        raise ValueError(f"lockstep compares at least two contenders, got {len(contenders)}")
    labels = [c.label for c in contenders]
    if len(set(labels)) != len(labels):
        raise ValueError(f"contenders must differ, got {labels}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if not math.isfinite(gap_s) or gap_s < 0:
        raise ValueError(f"gap_s must be >= 0, got {gap_s!r}")
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0, got {timeout!r}")
    plans = [plan_child(c.framework, [Job(graph if c.graph is None else c.graph, repeats=0,
                                          warmup=warmup)], c.settings,
                        c.mode, python=c.python, defaults=c.defaults, preset=c.preset,
                        lockstep=True)
             for c in contenders]
    deadline = time.monotonic() + timeout
    result = LockstepResult(labels, {lab: [] for lab in labels},
                            settle_s={lab: [] for lab in labels})
    children: list[_Child] = []
    try:
        for lab, plan in zip(labels, plans, strict=True):
            try:
                children.append(_Child(lab, plan))
            except ChildFailed as e:
                result.errors[lab] = f"{plan.label}: {e.error}"
        live = _ready(children, deadline, result)
        for step in range(steps):
            if len(live) < len(contenders):
                break
            k = step % len(live)
            for ch in live[k:] + live[:k]:
                if gap_s:
                    time.sleep(gap_s)
                # The others are stopped since their last answer; until the
                # stops have taken (stopped threads are not runnable).
                result.settle_s[ch.label].append(
                    wait_until_idle([c.session.proc.pid for c in live if c is not ch]))
                if not _one_run(ch, deadline, result):
                    live = [c for c in live if c is not ch]
                    break
            if progress is not None:
                progress(step + 1, steps)
    finally:
        for ch in children:
            left = max(deadline - time.monotonic(), 1.0)
            run = ch.finish(left)
            result.answers[ch.label] = run
            # The child's own error, else its job's; an error seen earlier stands.
            failed = run.first_error()
            if ch.label not in result.errors and failed:
                result.errors[ch.label] = failed
    n = result.steps
    for lab in labels:
        del result.ns[lab][n:]
    return result


def _ready(children: list[_Child], deadline: float, result: LockstepResult) -> list[_Child]:
    """The children that came up (each prepared and warm)."""
    live = []
    for ch in children:
        try:
            got = ch.session.ask(None, deadline - time.monotonic())
        except ChildFailed as e:
            if e.status == "timeout":  # killed; one that died says how in its answer
                result.errors[ch.label] = (f"{ch.plan.label}: not ready before the time limit "
                                           f"(killed)")
            continue
        if got["step"] == "ready":
            live.append(ch)
    return live


def _one_run(ch: _Child, deadline: float, result: LockstepResult) -> bool:
    try:
        got = ch.session.ask("go", deadline - time.monotonic())
    except ChildFailed as e:
        if e.status == "timeout":  # killed; one that died says how in its answer
            result.errors[ch.label] = f"{ch.plan.label}: timed out mid-run (killed)"
        return False
    result.ns[ch.label].append(float(got["step"]))
    return True
