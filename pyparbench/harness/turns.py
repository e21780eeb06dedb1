"""Configurations measured in turns: one process each, all alive together.

A regret compares two settings measured in different processes. Run one
after the other, the two meet different states of a shared machine: on a
2-core VM one process of GoogLeNet b1 read 7.1-7.2 ms (median of each 100
runs) over its first 300 runs and 7.9-8.3 ms over the next 2,100, nothing
else changed. A ratio of two such processes is then
as much the machine's drift as the settings' difference.

So the configurations a regret rests on are measured in turns: each in a
fresh process of its own, exactly as :func:`pyparbench.harness.runner.run_config`
would start it (its pinning, its OpenMP wait policy, since those are
process-wide), all started and loaded first (one at a time, so that no
model is built while another loads), then :data:`TURNS` turns in which
each process in turn runs its share of the timed runs after one untimed
run. Every process's runs thus spread over the same stretch of time,
and a slow spell is shared among them. While one process measures, the
others are stopped (SIGSTOP): a spinning OpenMP team of an idle process
would take the CPUs of the one measuring.

Each process still ends as one record, with every timed run of its turns:
the summary and the merge of processes read it as any other process's.

A child runs ``python -m pyparbench.harness.turns``; it reads its
configuration as one JSON line and answers ``{"loaded_ns": ...}`` (one warm
run) once it is loaded, then one ``{"ns": [...], "per_instance": [...],
"window": [start, end]}`` line per ``{"repeats": n, "min_s": s}`` line (n
timed runs after an untimed one, more until they last s), then, when its
stdin closes,
``{"resolved": {...}}``; or ``{"error": "..."}``. The record's ``resolved``
keeps each turn's window (``turns``, wall-clock seconds). The parent talks
to it through a :class:`pyparbench.child_process.Session` (stopped between
its turns).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyparbench import child_process
from pyparbench.executor import RunRecord, model_runner
from pyparbench.harness.resumable import run_resumable
from pyparbench.harness.runner import MIN_MEASURE_S, Config, apply_test_fault, run_config
from pyparbench.harness.store import ResultStore
from pyparbench.resultfiles import Result, read_result
from pyparbench.timing import summarize

__all__ = ["TURNS", "TurnTaker", "measure_in_turns", "run_configs_in_turns", "turn_groups"]

MODULE = "pyparbench.harness.turns"
# Turns each process measures in; its runs are split evenly among them.
TURNS = 5


@dataclass
class _Child:
    config: Config
    session: child_process.Session
    started: float
    ns: list[float] = field(default_factory=list)
    per_instance: list[list[float]] = field(default_factory=list)
    windows: list[list[float]] = field(default_factory=list)  # each turn's [start, end] (s)
    failed: tuple[str, str] | None = None  # (status, error)


def measure_in_turns(configs: Sequence[Config], *, turns: int = TURNS, timeout: float = 600.0,
                     machine: dict[str, Any]) -> list[Result]:
    """Each configuration's result (in order), measured in turns (see the
    module docstring). A configuration that cannot run here, or a framework
    run, is run as :func:`~pyparbench.harness.runner.run_config` runs it; a
    process that fails, hangs past ``timeout`` seconds or cannot start gets
    its error record, and the others go on.

    Raises
    ------
    ValueError
        ``turns`` below 1.
    """
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise ValueError(f"turns must be an int >= 1, got {turns!r}")
    out: dict[int, Result] = {}
    children: dict[int, _Child] = {}
    try:
        for i, c in enumerate(configs):
            try:
                cpus = child_process.child_cpus(c.settings)
            except ValueError:  # run_config records why it is skipped
                out[i] = run_config(c, timeout=timeout, machine=machine)
                continue
            if c.framework is not None:
                out[i] = run_config(c, timeout=timeout, machine=machine)
                continue
            try:
                children[i] = _load(c, cpus, timeout)
            except child_process.ChildFailed as e:  # it could not start
                out[i] = Result(c.key, c, e.status, time.time(), machine, error=e.error)
        order = list(children)
        for t in range(turns if order else 0):
            # Each turn starts one process later: none is always first after a pause.
            for k in order[t % len(order):] + order[:t % len(order)]:
                ch = children[k]
                if ch.failed is not None:
                    continue
                # A turn's share of the repeats and of MIN_MEASURE_S, as
                # a one-process run's timed runs would add up.
                share = max(1, math.ceil(ch.config.repeats / turns))
                try:
                    got = ch.session.ask({"repeats": share, "min_s": MIN_MEASURE_S / turns},
                                         timeout)
                except child_process.ChildFailed as e:
                    ch.failed = (e.status, e.error)
                    continue
                ch.ns += [float(v) for v in got["ns"]]
                ch.windows.append([float(v) for v in got["window"]])
                each = [[float(v) for v in e] for e in got.get("per_instance") or []]
                ch.per_instance = ([a + b for a, b in zip(ch.per_instance, each, strict=True)]
                                   if ch.per_instance else each)
        for k, ch in children.items():
            out[k] = _result(ch, timeout, machine)
    finally:
        for ch in children.values():
            ch.session.end()
    return [out[i] for i in range(len(configs))]


def _load(config: Config, cpus: list[int] | None, timeout: float) -> _Child:
    """Start ``config``'s child and let it build and compile its model.

    Raises
    ------
    ChildFailed
        The child could not be started.
    """
    started = time.time()
    ch = _Child(config, child_process.Session.start(
        MODULE, cpus=cpus, env=child_process.child_env(config.settings)), started)
    try:
        ch.session.ask(config.as_dict(), timeout)
    except child_process.ChildFailed as e:
        ch.failed = (e.status, e.error)
    return ch


def _result(ch: _Child, timeout: float, machine: dict[str, Any]) -> Result:
    """The child's record: its runs, and its resolved setting asked last."""
    c = ch.config
    resolved: dict[str, Any] = {}
    if ch.failed is None:
        try:
            resolved = {**ch.session.finish(timeout)["resolved"], "turns": ch.windows}
        except child_process.ChildFailed as e:
            ch.failed = (e.status, e.error)
    if ch.failed is not None:
        return Result(c.key, c, ch.failed[0], ch.started, machine, error=ch.failed[1])
    return Result(c.key, c, "ok", ch.started, machine, ns=ch.ns, summary=summarize(ch.ns),
                  resolved=resolved, per_instance=ch.per_instance or None)


def turn_groups(configs: Sequence[Config]) -> list[list[Config]]:
    """``configs`` cut where the model, batch or round changes: a
    confirmation round's settings of one model and batch, measured together."""
    groups: list[list[Config]] = []
    for c in configs:
        if groups and (groups[-1][0].model, groups[-1][0].batch,
                       groups[-1][0].round) == (c.model, c.batch, c.round):
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


class TurnTaker:
    """``run_one`` and ``on_pending`` for
    :func:`~pyparbench.harness.resumable.run_resumable`: told which
    configurations will run, it groups them (:func:`turn_groups`); the
    first of a group asked for measures the whole group in turns
    (:func:`measure_in_turns`), and the others' records are kept until
    asked for."""

    def __init__(self, *, turns: int = TURNS, timeout: float = 600.0) -> None:
        self._group_of: dict[str, list[Config]] = {}
        self._turns, self._timeout = turns, timeout
        self._kept: dict[str, Result] = {}

    def pending(self, configs: list[Config]) -> None:
        self._group_of = {c.key: g for g in turn_groups(configs) for c in g}

    def __call__(self, config: Config, machine: dict[str, Any]) -> Result:
        if config.key in self._kept:
            return self._kept.pop(config.key)
        group = self._group_of.get(config.key, [config])
        for c, r in zip(group, measure_in_turns(group, turns=self._turns, timeout=self._timeout,
                                                machine=machine), strict=True):
            self._kept[c.key] = r
        return self._kept.pop(config.key)


def run_configs_in_turns(configs: Iterable[Config], store: ResultStore, *, resume: bool = True,
                         retry_failed: bool = False, turns: int = TURNS, timeout: float = 600.0,
                         on_result: Callable[[Config, Result | None], None] | None = None
                         ) -> Iterator[Result]:
    """:func:`~pyparbench.harness.runner.run_configs`, with each run of
    consecutive configurations of one model, batch and round measured in
    turns (:func:`turn_groups`, :func:`measure_in_turns`); each record is
    stored as soon as its group is done.

    Raises
    ------
    ValueError
        As :func:`~pyparbench.harness.runner.run_configs`; ``turns`` below 1.
    """
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise ValueError(f"turns must be an int >= 1, got {turns!r}")
    taker = TurnTaker(turns=turns, timeout=timeout)
    return run_resumable(configs, store, taker, read_result, resume=resume,
                         retry_failed=retry_failed, on_result=on_result, on_pending=taker.pending)


# ------------------------------------------------------------------ the child


def _child_main() -> int:
    """In the fresh process: load the configuration of the first line, then
    answer each request line (see the module docstring)."""
    last: RunRecord | None = None
    run = None
    for n, line in enumerate(sys.stdin):
        try:
            if n == 0:
                config = Config.from_dict(json.loads(line))
                apply_test_fault(config)
                run = model_runner(config.model, config.batch, config.settings)
                last = run(1, max(config.warmup, 1), 0.0)
                answer: dict[str, Any] = {"loaded_ns": min(last.ns)}
            else:
                assert run is not None
                req = json.loads(line)
                start = time.time()
                last = run(int(req["repeats"]), 1, float(req["min_s"]))
                answer = {"ns": last.ns, "per_instance": last.per_instance,
                          "window": [start, time.time()]}
        except Exception as e:  # the parent records which configuration failed, and how
            answer = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)
    if last is not None:
        resolved = {**last.resolved, "process_cpus": sorted(os.sched_getaffinity(0))}
        print(json.dumps({"resolved": resolved}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
