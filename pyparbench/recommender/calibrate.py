"""Calibration: op times and executor costs measured on this machine, cached.

**Op times.** A graph is run by the native executor, synchronously, once per
configuration (operator mode, math library, framework pool, intra-op
threads), with its per-node trace on: every node is timed in place, with the
cache state it has inside the model (weights streamed from memory, inputs
just written by the node before), by the C++ clock around its kernel. Each
configuration runs ``rounds`` times after a warm-up; a node's figure is the
median over the rounds and over every node of the graph with the same
:func:`~pyparbench.recommender.costmodel.op_key` (the same op on the same
shapes). Thread counts are 1, the powers of two below the core count, and the
core count; framework mode at one thread runs the library kernel and shares
its figures.

**Executor costs.** Probe graphs of tiny nodes (a chain, a fan of
independent nodes) under the sync and async schedulers give the per-node
cost of each scheduler, the serialised part of an async dispatch and the
cost of an oversubscribed node; two or more large independent ops run at
once give the co-run slowdown of compute-bound and memory-bound ops.

**Wait policies.** What an OpenMP parallel region costs under each wait
policy (passive, Intel's spin count, libgomp's default, active), at each
team size and after serial gaps, each policy in a process of its own
(:func:`~pyparbench.recommender.waitpolicy.measure_wait`), measured again
like the executor's costs when other processes disturbed it.

**Cache.** Everything is kept in one JSON file per machine fingerprint (CPU
model, cores, oneDNN version and ISA, OpenMP runtime, pyparbench version):
``$PYPARBENCH_CACHE/recommend-<hash>.json``, by default under
``$XDG_CACHE_HOME/pyparbench`` or ``~/.cache/pyparbench``. Op figures are kept
per op shape, so a second call for the same model, or a model sharing its
layers, measures nothing it already has.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import resource
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyparbench.machine.cpuload import ForeignLoad
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.executor import compile_graph, run_instances, team_budget_bytes
from pyparbench.graph.passes import executed_graph
from pyparbench.machine.fingerprint import identity, machine_fingerprint
from pyparbench.choices import LIBRARIES, OPERATORS, POOLS
from pyparbench.recommender.costmodel import (
    ALIAS_OPS,
    CalibratedCostModel,
    ExecutorCosts,
    WaitCosts,
    calibration_threads,
    config_key,
    instance_key,
    op_key,
)
from pyparbench.recommender.children import ChildFailed
from pyparbench.recommender.waitpolicy import measure_wait, wait_teams
from pyparbench.resultfiles import ResultFileError, read_json_object
from pyparbench.resultfiles.atomic import write_atomic
from pyparbench.settings import Settings, allowed_cores
from pyparbench.threading.topology import topology

__all__ = [
    "CACHE_VERSION",
    "Calibration",
    "cache_dir",
    "calibrate",
    "calibration_threads",
    "fingerprint",
    "load_calibration",
    "measure_executor",
    "measure_graph",
    "measure_wait",
]

# Raised whenever a kernel changes speed, so that older figures are measured
# again (2: linear layers pack their weights once; 3: channels-last pooling
# runs pyparbench's own kernel; 4: strided 1x1 convs run at stride 1 after a
# subsampling copy, node outputs share buffers).
CACHE_VERSION = 4
# A configuration's round runs the graph at least twice and for at least
# this long (repeats of a small graph in one C++ loop) before the traced run.
MIN_ROUND_NS = 2e6
# A graph that runs this long is traced without an untimed run before it:
# the first run's cold start (a team just pinned, cold caches) is a small
# share of it, and the untimed runs were a third of a cold calibration of
# the default suite (ResNet-50 and GoogLeNet at batch 8).
WARM_RUN_NS = 50e6
Sample = tuple[float, list[float]]
# A round in which this process's threads were preempted (involuntary
# context switches) more often than CLEAN_SWITCHES plus one per
# CLEAN_SWITCH_MS of the round is a worse sample than a cleaner one:
# spinning OpenMP barriers wait for a descheduled thread, so a
# multi-threaded round can take many times its undisturbed time.
CLEAN_SWITCHES = 2
CLEAN_SWITCH_MS = 5.0
# Rounds per configuration at most, as a multiple of the rounds asked for,
# while looking for clean ones.
MAX_ROUNDS_FACTOR = 4
# Figures measured while other processes used more than this share of the
# CPUs count as disturbed.
BUSY = 0.10
# Shortest window over which that share is read (see measure_graph).
LOAD_WINDOW_S = 0.3
# Figures that other processes disturbed are measured again by later calls,
# up to this many times in all (each time keeping the lower figure); after
# that, only by a call that finds the machine quiet.
MAX_ATTEMPTS = 3
# The executor's costs are measured again when other processes used more
# than this share of the CPUs meanwhile.
EXECUTOR_BUSY = 0.25


def cache_dir() -> Path:
    """Where calibrations are kept: ``$PYPARBENCH_CACHE``, else
    ``$XDG_CACHE_HOME/pyparbench``, else ``~/.cache/pyparbench``."""
    env = os.environ.get("PYPARBENCH_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "pyparbench"


def fingerprint() -> dict[str, Any]:
    """What decides op times on this machine: the fields that make results
    another machine's (:func:`pyparbench.machine.fingerprint.identity`: host,
    CPU model, CPU and core counts, oneDNN version and ISA), plus the CPUs
    this process may use, the OpenMP runtime and the pyparbench version."""
    fp = machine_fingerprint()
    out: dict[str, Any] = identity(fp)
    out["allowed"] = list(fp["cpus"]["allowed"])
    out["openmp"] = fp["openmp"]["library"]
    out["pyparbench"] = fp["pyparbench"]
    out["cache_version"] = CACHE_VERSION
    return out


def _fingerprint_hash(fp: Mapping[str, Any]) -> str:
    return hashlib.sha1(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:12]




# Entry of a calibration table: [ns, samples, disturbed, attempts].
Entry = list[float]


def _retry(entries: Iterable[Entry], quiet: Callable[[], bool] | None) -> bool:
    """Whether disturbed figures among ``entries`` are measured again: one
    measured fewer than ``MAX_ATTEMPTS`` times, or any if ``quiet()`` (asked
    only then) says the machine is quiet now."""
    stale = [e[3] for e in entries if e[2] > 0]
    return bool(stale) and (min(stale) < MAX_ATTEMPTS or (quiet is not None and quiet()))


def _merge(old: Entry | None, new: Entry) -> Entry:
    """A new measurement of an op merged into the cached one: the lower time
    (each is an estimate of the undisturbed time, which preemption only
    lengthens), disturbed only if both were, one more attempt."""
    if old is None:
        return [new[0], new[1], new[2], 1.0]
    kept = new if new[0] <= old[0] else old
    return [kept[0], old[1] + new[1], min(old[2], new[2]), old[3] + 1.0]


@dataclass
class Calibration:
    """Measured op times and executor costs of one machine.

    Attributes
    ----------
    fingerprint
        The machine (see :func:`fingerprint`).
    tables
        ``config_key`` -> {``op_key``: [ns, samples, disturbed, attempts]}:
        ``disturbed`` is 1 when other processes used more than ``BUSY`` of the
        CPUs while it was measured, ``attempts`` how many times it was.
    executor
        The executor's costs, once measured.
    path
        The cache file (None: not cached).
    load
        Per measured config (and ``"executor"``): the share of the CPUs
        other processes used while it was last measured.
    executor_attempts
        How many times the executor's costs were measured.
    instances
        :func:`~pyparbench.recommender.costmodel.instance_key` -> [factor,
        samples, disturbed, attempts]: how much slower an instance of a
        graph runs beside its copies than alone (:func:`measure_instances`).
    wait
        Region costs per OpenMP wait policy, once measured.
    wait_attempts
        How many times they were measured.
    wait_error
        Why this process could not measure them (empty: it could, or did not try).
    measured
        What this process measured (config keys, ``"executor"`` and
        ``"wait policies"``); empty when everything came from the cache.
    seconds
        Time spent measuring in this process.
    """

    fingerprint: dict[str, Any]
    tables: dict[str, dict[str, Entry]] = field(default_factory=dict)
    executor: ExecutorCosts | None = None
    path: Path | None = None
    load: dict[str, float] = field(default_factory=dict)
    executor_attempts: int = 0
    instances: dict[str, Entry] = field(default_factory=dict)
    wait: WaitCosts | None = None
    wait_attempts: int = 0
    wait_error: str = ""
    measured: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def model(self) -> CalibratedCostModel:
        """The cost model of these figures."""
        if self.executor is None:
            raise ValueError("this calibration has no executor costs: run calibrate() first")
        tables = {k: {op: v[0] for op, v in t.items()} for k, t in self.tables.items()}
        return CalibratedCostModel(tables, self.executor,
                                   source=str(self.path) if self.path else "",
                                   instances={k: v[0] for k, v in self.instances.items()},
                                   wait=self.wait)

    def missing(self, graph: Graph, configs: Iterable[str], *,
                retry_disturbed: bool = True, graph_opt: str = "full",
                quiet: Callable[[], bool] | None = None,
                precision: str = "fp32") -> list[str]:
        """The configs lacking a figure for some computing node that the
        executor runs for ``graph`` (optimised as ``graph_opt`` asks), or
        (``retry_disturbed``) holding one that other processes disturbed and
        that has been measured fewer than ``MAX_ATTEMPTS`` times, or any
        number of times if ``quiet()`` (asked only then) says the machine
        is quiet now."""
        out = []
        for c in configs:
            keys = _op_keys(graph, c, graph_opt, precision)
            table = self.tables.get(c, {})
            if not keys <= table.keys():
                out.append(c)
                continue
            if not retry_disturbed:
                continue
            if _retry([table[k] for k in keys], quiet):
                out.append(c)
        return out

    def disturbed(self, graph: Graph, configs: Iterable[str], *,
                  graph_opt: str = "full", precision: str = "fp32") -> list[str]:
        """The configs whose figures for ``graph`` were disturbed by other
        processes however often they were measured."""
        return [c for c in configs
                if any(self.tables.get(c, {}).get(k, [0, 0, 0, 0])[2] > 0
                       for k in _op_keys(graph, c, graph_opt, precision))]

    def update(self, config: str, table: Mapping[str, Entry], *, replace: bool = False) -> None:
        """Merge new measurements of ``config`` (see :func:`_merge`), or
        replace what was there (``replace``)."""
        mine = self.tables.setdefault(config, {})
        for k, v in table.items():
            mine[k] = _merge(None if replace else mine.get(k), v)

    def as_dict(self) -> dict[str, Any]:
        return {"version": CACHE_VERSION, "fingerprint": self.fingerprint,
                "executor": None if self.executor is None else self.executor.as_dict(),
                "executor_attempts": self.executor_attempts, "tables": self.tables,
                "instances": self.instances, "load": self.load,
                "wait": None if self.wait is None else self.wait.as_dict(),
                "wait_attempts": self.wait_attempts}

    def save(self) -> None:
        """Merge into the cache file (another process may have added to it: of
        two entries the one measured more often wins) and replace it
        atomically."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        on_disk = _read(self.path)
        if on_disk is not None and on_disk.fingerprint == self.fingerprint:
            for k, table in [*on_disk.tables.items(), ("", on_disk.instances)]:
                mine = self.tables.setdefault(k, {}) if k else self.instances
                for op, v in table.items():
                    if op not in mine or v[3] > mine[op][3]:
                        mine[op] = v
            if on_disk.executor is not None and (
                    self.executor is None or on_disk.executor_attempts > self.executor_attempts):
                self.executor = on_disk.executor
                self.executor_attempts = on_disk.executor_attempts
            if on_disk.wait is not None and (
                    self.wait is None or on_disk.wait_attempts > self.wait_attempts):
                self.wait = on_disk.wait
                self.wait_attempts = on_disk.wait_attempts
            for label, share in on_disk.load.items():
                self.load.setdefault(label, share)
        write_atomic(self.path, json.dumps(self.as_dict()))


def _read(path: Path) -> Calibration | None:
    try:
        d = read_json_object(path)
    except ResultFileError:  # missing, cut short or not ours: measured again
        return None
    if d.get("version") != CACHE_VERSION:
        return None
    ex, wait = d.get("executor"), d.get("wait")
    try:
        return Calibration(
            fingerprint=d.get("fingerprint", {}),
            tables={k: {op: [float(x) for x in v] for op, v in t.items() if len(v) == 4}
                    for k, t in d.get("tables", {}).items()},
            executor=None if ex is None else ExecutorCosts.from_dict(ex), path=path,
            instances={k: [float(x) for x in v] for k, v in d.get("instances", {}).items()
                       if len(v) == 4},
            load={k: float(v) for k, v in d.get("load", {}).items()},
            executor_attempts=int(d.get("executor_attempts", 1)),
            wait=None if wait is None else WaitCosts.from_dict(wait),
            wait_attempts=int(d.get("wait_attempts", 1)))
    except (TypeError, ValueError, AttributeError, KeyError):
        return None  # a damaged file: measure again


def load_calibration(directory: str | Path | None = None) -> Calibration:
    """This machine's cached calibration (empty when there is none yet)."""
    fp = fingerprint()
    path = Path(directory if directory is not None else cache_dir()) / (
        f"recommend-{_fingerprint_hash(fp)}.json")
    cached = _read(path)
    if cached is not None and cached.fingerprint == fp:
        return cached
    return Calibration(fingerprint=fp, path=path)


# ---------------------------------------------------------------- measuring


def _settings(operator: str, library: str, pool: str, threads: int, pin: bool,
              graph_opt: str = "full", precision: str = "fp32") -> Settings:
    return Settings(intra_op=threads, operator=operator, library=library, pool=pool,
                    affinity="compact" if pin else "none", graph_opt=graph_opt,
                    precision=precision)


def _config_settings(config: str, pin: bool = True, graph_opt: str = "full",
                     precision: str = "fp32") -> Settings:
    operator, library, pool, t = config.split("/")
    return _settings(operator, library, "openmp" if pool == "-" else pool, int(t), pin,
                     graph_opt, precision)


def _op_keys(graph: Graph, config: str, graph_opt: str, precision: str = "fp32") -> set[str]:
    """The op keys of the nodes the executor runs for ``graph`` under
    ``config``: those of its optimised graph, whose nodes are what calibration
    times (a fused conv costs what it costs, not the sum of its parts; at
    bf16 the matrix nodes read bf16 inputs, so their keys are bf16's, and
    the conversions are nodes of their own)."""
    settings = _config_settings(config, graph_opt=graph_opt, precision=precision)
    run = executed_graph(graph, settings, budget_bytes=team_budget_bytes(settings))
    return {op_key(run, n) for n in run if n.op not in ALIAS_OPS}


def _preemptions() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw


def _sample(run: Callable[[], Sample], rounds: int, est_ns: float) -> list[Sample]:
    """``rounds`` samples of ``run()``, the least preempted that can be had.

    A round is clean when this process's threads were preempted at most
    ``CLEAN_SWITCHES`` times, plus one per ``CLEAN_SWITCH_MS`` of the round.
    Rounds go on until ``rounds`` clean ones are in, or ``MAX_ROUNDS_FACTOR``
    x ``rounds`` were run, or (with at least ``rounds``) the time budget
    (0.3 s, or 1.5 x the rounds' expected time) is spent; then the ``rounds``
    with the fewest preemptions per millisecond are kept. (Pools that wake
    their threads are preempted by their own threads too, so this ranks
    rounds; whether other processes disturbed them is judged from the CPU
    time they used, see :class:`~pyparbench.machine.cpuload.ForeignLoad`.)
    """
    t0 = time.monotonic()
    budget = max(0.3, 1.5 * rounds * est_ns * 1e-9)
    got: list[tuple[bool, float, Sample]] = []  # (not clean, preemptions per ms, sample)
    while True:
        before, start = _preemptions(), time.monotonic()
        sample = run()
        ms = max((time.monotonic() - start) * 1e3, 1e-3)
        switches = _preemptions() - before
        got.append((switches > CLEAN_SWITCHES + ms / CLEAN_SWITCH_MS, switches / ms, sample))
        if sum(not g[0] for g in got) >= rounds:
            break
        if len(got) >= MAX_ROUNDS_FACTOR * rounds or (
                len(got) >= rounds and time.monotonic() - t0 > budget):
            break
    got.sort(key=lambda g: (g[0], g[1]))
    return [g[2] for g in got[:rounds]]


def measure_graph(graph: Graph, configs: Sequence[str], *, rounds: int = 3,
                  pin: bool = True, loads: dict[str, float] | None = None,
                  graph_opt: str = "full",
                  precision: str = "fp32") -> dict[str, dict[str, list[float]]]:
    """Time every computing node that the executor runs for ``graph`` (the
    graph optimised as ``graph_opt`` asks, per config) in place under each
    config.

    Parameters
    ----------
    graph
        The graph to run (compiled once).
    configs
        :func:`~pyparbench.recommender.costmodel.config_key` strings.
    rounds
        Traced runs kept per config (see :func:`_sample`).
    pin
        Pin the threads (compact placement), as the recommended settings do.
    loads
        Filled, per config, with the share of the CPUs other processes used
        while it was measured.
    graph_opt
        The graph passes (Settings.graph_opt) the executor runs the graph with.
    precision
        The run's precision (Settings.precision): bf16 times the bf16 plan's
        nodes.

    Returns
    -------
    dict
        config -> {op_key: [ns, samples, disturbed]}, ns being the minimum
        over the samples (every kept round, every node of that key): the
        time of an undisturbed run, which preemption by other processes can
        only lengthen; ``disturbed`` 1 when other processes used more than
        ``BUSY`` of the CPUs meanwhile, else 0.
    """
    compiled = compile_graph(graph)
    out: dict[str, dict[str, list[float]]] = {}
    seen: dict[str, float] = {} if loads is None else loads
    windows: dict[str, float] = {}
    with ForeignLoad() as whole:
        for config in configs:
            settings = _config_settings(config, pin, graph_opt, precision)
            # Trace node ids are those of the graph the plan runs.
            run = compiled.optimized(settings)
            keys = [None if n.op in ALIAS_OPS else op_key(run, n) for n in run]
            first = compiled.run(settings, repeats=1, warmup=1)
            est = first.ns[0]
            # The traced run follows an untimed one in the same call (but for
            # graphs of WARM_RUN_NS and more): the first run after a call from
            # Python (its team just pinned, caches and predictors cold) is
            # slower than the model runs in a loop.
            repeats = max(1, min(20, int(MIN_ROUND_NS / max(est, 1.0))))
            warmup = 0 if est >= WARM_RUN_NS else 1

            def one(settings: Settings = settings, repeats: int = repeats,
                    warmup: int = warmup, nodes: int = len(run)) -> Sample:
                rec = compiled.run(settings, repeats=repeats, warmup=warmup, trace=True)
                d = [0.0] * nodes
                for e in rec.trace:
                    d[e.node] = max(0.0, e.end_ns - e.start_ns)
                return rec.ns[-1], d

            t0 = time.monotonic()
            with ForeignLoad() as load:
                samples = _sample(one, rounds, est * (repeats + warmup))
            seen[config] = load.foreign
            windows[config] = time.monotonic() - t0
            by_key: dict[str, list[float]] = {}
            for _, d in samples:
                for i, k in enumerate(keys):
                    if k is not None:
                        by_key.setdefault(k, []).append(d[i])
            out[config] = {k: [min(v), float(len(v)), 0.0] for k, v in by_key.items()}
    for config, table in out.items():
        # /proc/stat counts in ticks (10 ms): over a short window the share
        # is too coarse, and the whole call's is used instead.
        if windows[config] < LOAD_WINDOW_S:
            seen[config] = whole.foreign
        for entry in table.values():
            entry[2] = float(seen[config] > BUSY)
    return out


def _chain(n: int) -> Graph:
    b = GraphBuilder("probe-chain")
    x = b.input("x", (1, 16))
    for _ in range(n):
        x = b.eltwise(x, "relu")
    return b.build(x)


def _fan(n: int) -> Graph:
    b = GraphBuilder("probe-fan")
    x = b.input("x", (1, 16))
    return b.build(b.concat([b.eltwise(x, "relu") for _ in range(n)]))


def _parallel(branches: int, kind: str) -> Graph:
    """``branches`` independent large ops: 3x3 convolutions (compute-bound) or
    element-wise adds of 8 MiB tensors (memory-bound)."""
    b = GraphBuilder(f"probe-{kind}")
    if kind == "compute":
        x = b.input("x", (1, 64, 28, 28))
        ys = [b.conv2d(x, 64, 3, padding=1) for _ in range(branches)]
    else:
        x = b.input("x", (1, 2 << 20))
        ys = [b.add(b.input(f"y{i}", (1, 2 << 20)), x) for i in range(branches)]
    return b.build(ys)


def _probe(graph: Graph, settings: Settings, rounds: int) -> Sample:
    """Median total ns of ``graph`` under ``settings`` and each node's median ns."""
    compiled = compile_graph(graph)
    settings = settings.with_(graph_opt="none")  # trace node ids are the graph's
    compiled.run(settings, repeats=5, warmup=5)

    def one() -> Sample:
        rec = compiled.run(settings, repeats=10, warmup=2, trace=True)
        d = [0.0] * len(graph)
        for e in rec.trace:
            d[e.node] = max(0.0, e.end_ns - e.start_ns)
        return statistics.median(rec.ns), d

    samples = _sample(one, rounds, 0.0)
    total = statistics.median(s[0] for s in samples)
    per = [statistics.median(s[1][i] for s in samples) for i in range(len(graph))]
    return total, per


def measure_executor(cores: int, *, rounds: int = 5, nodes: int = 64) -> ExecutorCosts:
    """Measure the executor's per-node costs and the co-run slowdowns.

    * ``sync_node_ns``: a chain of ``nodes`` tiny nodes, sync: total less
      the nodes' own times, per node.
    * ``async_node_ns`` / ``async_serial_ns`` for 1, 2, 4, ... workers (at
      most ``cores``, at most 16): the chain gives the dispatch cost on the
      critical path, the fan of independent nodes the part of it that
      workers cannot overlap (when the fan runs no faster than the dispatch
      lock allows, that part is the fan's time per node).
    * ``oversub_node_ns``: the chain with twice as many threads as cores.
    * ``corun_*``: independent large ops, alone and all at once (one worker
      per core, at most 16).
    """
    n = nodes
    chain, fan = _chain(n), _fan(n)
    total, per = _probe(chain, Settings(), rounds)
    sync_node = max(0.0, (total - sum(per)) / len(chain))
    async_node: list[tuple[int, float]] = []
    async_serial: list[tuple[int, float]] = []
    workers = 1
    while workers <= min(cores, 16):
        s = Settings(scheduler="async", inter_op=workers)
        c_total, c_per = _probe(chain, s, rounds)
        critical = max(0.0, (c_total - sum(c_per)) / len(chain))
        serial = 0.0
        if workers > 1:
            f_total, f_per = _probe(fan, s, rounds)
            per_node = f_total / len(fan)
            overlapped = (sum(f_per) / len(fan) + critical) / workers
            if per_node > 1.05 * overlapped:
                serial = min(critical, per_node)
        async_node.append((workers, max(0.0, critical - serial)))
        async_serial.append((workers, serial))
        workers *= 2
    # Oversubscribed: twice the threads the cores hold, in teams of two;
    # the per-node excess over the same chain run sync, less the dispatch.
    over = Settings(scheduler="async", inter_op=max(2, cores), intra_op=2)
    o_total, _ = _probe(chain, over, rounds)
    dispatch = ExecutorCosts(async_node_ns=tuple(async_node),
                             async_serial_ns=tuple(async_serial))
    excess = (o_total - total) / len(chain) - dispatch.async_node(over.inter_op) \
        - dispatch.async_serial(over.inter_op)
    oversub = max(0.0, excess) / (over.threads / cores - 1.0)
    corun: dict[str, float] = {}
    branches = min(cores, 16)
    for kind in ("compute", "memory"):
        if branches < 2:
            corun[kind] = 0.0
            continue
        g = _parallel(branches, kind)
        _, alone = _probe(g, Settings(), rounds)
        _, together = _probe(g, Settings(scheduler="async", inter_op=branches,
                                         affinity="compact"), rounds)
        ops = [i for i, node in enumerate(g) if node.op not in ALIAS_OPS]
        ratio = statistics.median(together[i] / max(alone[i], 1.0) for i in ops)
        busy = (branches - 1) / max(1, cores - 1)
        corun[kind] = max(0.0, ratio - 1.0) / busy
    return ExecutorCosts(sync_node_ns=sync_node, async_node_ns=tuple(async_node),
                         async_serial_ns=tuple(async_serial), corun_compute=corun["compute"],
                         corun_memory=corun["memory"], oversub_node_ns=oversub)


def measure_instances(graph: Graph, instances: int, threads: int, *,
                      graph_opt: str = "full", precision: str = "fp32") -> float:
    """How much slower one of ``instances`` copies of ``graph`` runs beside
    the others than alone: the median repeat (until the slowest copy is
    done) of all copies side by side, each with its own weights on its own
    ``threads`` cores (compact), over the median of the first copy alone on
    the same cores. This is what a simulation of op times measured one
    instance at a time misses: copies streaming their weights at once
    share the caches and the memory bandwidth."""
    copies = [graph, *(copy.deepcopy(graph) for _ in range(instances - 1))]
    settings = Settings(intra_op=threads, affinity="compact", graph_opt=graph_opt,
                        precision=precision)
    est, _, _ = run_instances(copies[:1], settings, repeats=1, warmup=1)
    # About 0.2 s of repeats each way.
    repeats = max(5, min(200, math.ceil(2e8 / max(est[0], 1.0))))
    alone, _, _ = run_instances(copies[:1], settings, repeats=repeats, warmup=1)
    together, _, _ = run_instances(copies, settings, repeats=repeats, warmup=1)
    return statistics.median(together) / statistics.median(alone)


def _calibrate_wait(cal: Calibration, teams: tuple[int, ...], *, recalibrate: bool,
                    retry_disturbed: bool) -> None:
    """The wait policies' region costs at ``teams``, when the cache lacks
    them (or they were disturbed, as the executor's costs): a measuring
    child that fails leaves them out and says why in ``cal.wait_error``."""
    if len(teams) < 2:
        return  # a team of one has no thread that waits
    have = cal.wait is not None and set(teams) <= set(cal.wait.teams)
    again = (retry_disturbed and cal.wait is not None and cal.wait.load > EXECUTOR_BUSY
             and cal.wait_attempts < MAX_ATTEMPTS)
    if have and not recalibrate and not again:
        return
    try:
        costs = measure_wait(teams)
    except (ChildFailed, OSError) as e:
        cal.wait_error = str(e)
        return
    # A re-measurement replaces the figures only if it was quieter.
    if not have or recalibrate or cal.wait is None or costs.load < cal.wait.load:
        cal.wait = costs
    cal.wait_attempts = 1 if recalibrate or not have else cal.wait_attempts + 1
    cal.measured.append("wait policies")


def calibrate(graph: Graph | Sequence[Graph], *, threads: Sequence[int] | None = None,
              operators: Sequence[str] = ("library", "framework"),
              libraries: Sequence[str] = ("onednn",), pools: Sequence[str] = POOLS,
              rounds: int = 3, recalibrate: bool = False, retry_disturbed: bool = True,
              directory: str | Path | None = None, cache: bool = True,
              graph_opt: str = "full", instances: int = 1, wait: bool = True,
              precision: str = "fp32") -> Calibration:
    """Measure what the graph(s) need and the cache lacks; return the calibration.

    Parameters
    ----------
    graph
        One graph or several (e.g. a model at the batch of each instance count).
    threads
        Intra-op thread counts (default: :func:`calibration_threads` of the
        cores this process may use).
    operators, libraries, pools
        Which operator modes, math libraries and framework pools to measure.
    rounds
        Traced runs per configuration.
    recalibrate
        Measure again even what the cache has (and replace it). Without it,
        figures that other processes disturbed are measured again (up to
        ``MAX_ATTEMPTS`` times in all), keeping the lower figure.
    retry_disturbed
        False: take disturbed figures from the cache as they are.
    directory
        The cache directory (default :func:`cache_dir`).
    cache
        Read and write the cache file (False: measure everything, keep nothing).
    graph_opt
        The graph passes the measured nodes come from (Settings.graph_opt;
        default the executor's, the full pipeline).
    instances
        With k > 1, each graph is one instance's and the co-run factor of k
        copies on ``cores // k`` cores each is measured too
        (:func:`measure_instances`).
    precision
        The precision the graph runs at (Settings.precision): its op times
        are those of that precision's plan.
    wait
        Also measure what a parallel region costs under each OpenMP wait
        policy (:func:`~pyparbench.recommender.waitpolicy.measure_wait`), when
        a team of more than one thread is calibrated and the cache lacks it.

    Raises
    ------
    ValueError
        Unknown operator mode, library or pool; a thread count < 1 or above
        the cores this process may use; rounds < 1.
    """
    graphs = [graph] if isinstance(graph, Graph) else list(graph)
    for name, values, valid in (("operator", operators, OPERATORS),
                                ("library", libraries, LIBRARIES), ("pool", pools, POOLS)):
        bad = [v for v in values if v not in valid]
        if bad:
            raise ValueError(f"unknown {name} {bad[0]!r}; valid: {', '.join(valid)}")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if not isinstance(instances, int) or instances < 1:
        raise ValueError(f"instances must be an int >= 1, got {instances!r}")
    cores = allowed_cores(topology())
    counts = tuple(sorted(set(threads))) if threads is not None else calibration_threads(cores)
    bad_t = [t for t in counts if not isinstance(t, int) or not 1 <= t <= cores]
    if bad_t:
        raise ValueError(f"thread counts must be 1..{cores} (the cores this process may use), "
                         f"got {bad_t[0]!r}")
    if cache:
        cal = load_calibration(directory)
    else:
        cal = Calibration(fingerprint=fingerprint())
    configs: list[str] = []
    for t in counts:
        for lib in libraries:
            for op in operators:
                for pool in (pools if op == "framework" else ("-",)):
                    k = config_key(op, lib, pool if pool != "-" else "openmp", t)
                    if k not in configs:
                        configs.append(k)
    t0 = time.perf_counter()
    again = (retry_disturbed and cal.executor is not None
             and cal.load.get("executor", 0.0) > EXECUTOR_BUSY
             and cal.executor_attempts < MAX_ATTEMPTS)
    if cal.executor is None or recalibrate or again:
        with ForeignLoad() as load:
            costs = measure_executor(cores)
        # A re-measurement replaces the figures only if it was quieter.
        if cal.executor is None or recalibrate or load.foreign < cal.load.get("executor", 1.0):
            cal.executor = costs
            cal.load["executor"] = load.foreign
        cal.executor_attempts = 1 if recalibrate else cal.executor_attempts + 1
        cal.measured.append("executor")
    if wait:
        _calibrate_wait(cal, wait_teams(counts), recalibrate=recalibrate,
                        retry_disturbed=retry_disturbed)
    quiet_now: list[bool] = []

    def quiet() -> bool:
        """Whether other processes leave the CPUs alone now (probed once)."""
        if not quiet_now:
            with ForeignLoad() as probe:
                time.sleep(LOAD_WINDOW_S)
            quiet_now.append(probe.foreign <= BUSY)
        return quiet_now[0]

    for g in graphs:
        todo = configs if recalibrate else cal.missing(g, configs,
                                                       retry_disturbed=retry_disturbed,
                                                       graph_opt=graph_opt, quiet=quiet,
                                                       precision=precision)
        if todo:
            for k, table in measure_graph(g, todo, rounds=rounds, pin=cores > 1,
                                          graph_opt=graph_opt, precision=precision,
                                          loads=cal.load).items():
                cal.update(k, table, replace=recalibrate)
                if k not in cal.measured:
                    cal.measured.append(k)
        if instances > 1 and cores // instances >= 1:
            # Keyed by the graph the simulation sees: the executed one.
            # The setting measure_instances runs each copy under.
            one = Settings(intra_op=cores // instances, affinity="compact", graph_opt=graph_opt,
                           precision=precision)
            key = instance_key(executed_graph(g, one, budget_bytes=team_budget_bytes(one)),
                               instances)
            old = cal.instances.get(key)
            if recalibrate or old is None or (retry_disturbed and _retry([old], quiet)):
                with ForeignLoad() as load:
                    factor = measure_instances(g, instances, cores // instances,
                                               graph_opt=graph_opt, precision=precision)
                new = [factor, 1.0, float(load.foreign > BUSY), 1.0]
                cal.instances[key] = new if recalibrate else _merge(old, new)
                cal.measured.append(f"instances x{instances}")
    cal.seconds = time.perf_counter() - t0
    if cache and cal.measured:
        cal.save()
    return cal
