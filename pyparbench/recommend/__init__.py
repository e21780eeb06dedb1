"""Thread-setting recommender: cost model + schedule simulation of the graph.

``recommend(graph)`` predicts the graph's latency (or throughput) under every
candidate setting of the knobs and returns the best, with the presets'
predictions beside it and the reasons::

    import pyparbench as ppb
    from pyparbench import models
    rec = ppb.recommend(models.build("googlenet", batch=1))   # the package is callable
    print(rec.format())          # settings, prediction, presets, reasons
    rec.settings                 # a Settings, name "recommended"

How (see the submodules):

* a cost model gives each op's time at each intra-op thread count and
  operator mode: measured on this machine and cached
  (:mod:`~pyparbench.recommend.calibrate`), or, for a machine that is not this
  one, a roofline with Amdahl-style scaling
  (:class:`~pyparbench.recommend.costmodel.AnalyticCostModel`);
* the schedule simulation (:mod:`~pyparbench.recommend.simulate`) replays
  the executor's scheduling of the graph under each candidate setting; the
  graph simulated (and calibrated) is the one the executor runs under that
  setting, rewritten by the graph passes its ``graph_opt`` asks for
  (:func:`pyparbench.graph.passes.executed_graph`: conv, batch norm and activation
  fused, channels-last);
* candidates: sync with one worker and async with 2 .. (graph width)
  workers; intra-op threads cores // workers, and every measured count
  below it (fewer threads than cores can win when ops stop scaling); library
  and framework operator modes, each framework pool; each calibrated math
  library; for the latency objective, instances that split the batch, for
  the throughput objective, instances that each serve a whole batch. No
  candidate oversubscribes the cores or uses SMT siblings (unless
  ``allow_smt``); threads are pinned compactly;
* framework operator mode is chosen only when predicted
  :data:`FRAMEWORK_MARGIN` better than the best library-mode setting (the
  study's guideline, and the mode whose blocks calibration times least
  well: a framework pool's dispatch between blocks is not in the op times);
* with the calibrated model on this machine, the few best predicted settings
  that may share a process with the chosen one are then measured whole,
  side by side, and the measured best is taken when it is clearly faster
  (:mod:`~pyparbench.recommend.verify`). Settings on Eigen's pool are
  measured only beside settings on Eigen's pool: its idle threads spin
  before they sleep and slow another pool's runs. OpenMP's (library mode)
  and the std pool's measure alike side by side and alone.

The study's tuner only counts heavy ops and divides the cores by the average
width; this recommender knows the ops' sizes, how each scales, what the
executor costs per node, and what running ops at once costs.
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyparbench._checks import positive_int
from pyparbench.graph import Graph
from pyparbench.graph.passes import executed_graph
from pyparbench.names import POOLS, PRESETS
from pyparbench.recommend.costmodel import (
    ALIAS_OPS,
    AnalyticCostModel,
    CalibratedCostModel,
    CostModel,
    ExecutorCosts,
    MachineSpec,
    TableCostModel,
    config_key,
)
from pyparbench.recommend.simulate import Resources, Simulation, simulate
from pyparbench.recommend.verify import MARGIN as VERIFY_MARGIN
from pyparbench.recommend.verify import SWITCH as VERIFY_SWITCH
from pyparbench.recommend.verify import TOP as VERIFY_TOP
from pyparbench.recommend.verify import Verified, measure_whole, verify_choice
from pyparbench.settings import Settings, preset
from pyparbench.threading.topology import Topology

__all__ = [
    "FRAMEWORK_MARGIN",
    "OBJECTIVES",
    "AnalyticCostModel",
    "CalibratedCostModel",
    "CostModel",
    "ExecutorCosts",
    "MachineSpec",
    "Prediction",
    "Recommendation",
    "Resources",
    "TableCostModel",
    "candidates",
    "predict",
    "recommend",
    "recommend_model",
    "recommended",
    "recommended_settings",
    "simulate",
]

OBJECTIVES = ("latency", "throughput")
# Candidates whose predictions are within this fraction of the best are
# ties. The one with the most intra-op threads wins (measured: dlrm-kaggle
# at batch 1 on 2 cores, 1x1 and 1x2 predicted 57.9 and 58.1 us, ran 1x2
# 10-14 % faster: small ops gain from a second thread more than calibration
# in place shows), then the simplest (sync, library mode, one instance, oneDNN).
TIE = 0.005
# Framework operator mode must be predicted this much better than library
# mode to be chosen (measured: the BERT layer at batch 1 on 2 cores, framework
# mode predicted within 0.1 % of library mode; on the Eigen pool it ran
# 12.1 ms against library mode's 10.0 ms, in processes of their own).
FRAMEWORK_MARGIN = 0.03


@dataclass(frozen=True)
class Prediction:
    """A setting's predicted performance.

    ``latency_ns`` is the time one instance takes for its ``instance_batch``
    samples (all instances run at once); ``samples`` is what all instances
    process in that time.
    """

    settings: Settings
    latency_ns: float
    instance_batch: int
    samples: int
    simulation: Simulation

    @property
    def throughput(self) -> float:
        """Samples per second."""
        return self.samples / (self.latency_ns * 1e-9) if self.latency_ns > 0 else math.inf

    def value(self, objective: str) -> float:
        """The figure the objective minimises (latency) or maximises (throughput)."""
        return self.latency_ns if objective == "latency" else self.throughput

    def better(self, other: Prediction, objective: str) -> float:
        """How many times better than ``other`` (> 1: this one is better)."""
        if objective == "latency":
            return other.latency_ns / self.latency_ns if self.latency_ns else math.inf
        return self.throughput / other.throughput if other.throughput else math.inf

    def as_dict(self) -> dict[str, Any]:
        return {"settings": self.settings.as_dict(), "label": self.settings.label(),
                "latency_ms": self.latency_ns / 1e6, "throughput": self.throughput,
                "instance_batch": self.instance_batch, "samples": self.samples}


@dataclass(frozen=True)
class Recommendation:
    """What :func:`recommend` found.

    Attributes
    ----------
    settings
        The recommended settings (``name="recommended"``).
    objective
        ``"latency"`` or ``"throughput"``.
    predicted
        The recommended settings' prediction.
    presets
        Each preset's prediction (tensorflow, intel, tftuner).
    reasons
        Why: the cost model, the graph's parallel branches, where ops stop
        scaling, what the runners-up and the presets lose.
    model
        The cost model's kind: ``"calibrated"``, ``"analytic"`` or ``"table"``.
    model_description
        One line on that model.
    candidates
        Every candidate's prediction, best first.
    calibration
        With the calibrated model: the cache file (``path``), what was
        measured now (``measured``, ``seconds``), the configs whose figures
        other processes disturbed (``disturbed``) and their CPU share while
        the executor was measured (``executor_load``); empty otherwise.
    """

    graph: str
    batch: int
    topology: str
    settings: Settings
    objective: str
    predicted: Prediction
    presets: dict[str, Prediction]
    reasons: tuple[str, ...]
    model: str
    model_description: str
    candidates: tuple[Prediction, ...] = field(repr=False)
    calibration: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able (the 20 best candidates only)."""
        return {"graph": self.graph, "batch": self.batch, "topology": self.topology,
                "objective": self.objective, "settings": self.settings.as_dict(),
                "label": self.settings.label(), "predicted": self.predicted.as_dict(),
                "presets": {k: v.as_dict() for k, v in self.presets.items()},
                "reasons": list(self.reasons), "model": self.model,
                "model_description": self.model_description,
                "candidates": [c.as_dict() for c in self.candidates[:20]],
                "calibration": self.calibration}

    def format(self) -> str:
        """Plain text for a terminal: settings, predictions, reasons."""
        s = self.settings
        unit = _fmt_value(self.predicted, self.objective)
        aff = s.affinity if isinstance(s.affinity, str) else "explicit"
        lines = [(f"{self.graph} (batch {self.batch}) on {self.topology}: "
                  f"recommended for {self.objective}"),
                 (f"  scheduler={s.scheduler} inter_op={s.inter_op} intra_op={s.intra_op} "
                  f"operator={s.operator} library={s.library} pool={s.pool} "
                  f"affinity={aff} smt={s.smt} instances={s.instances}"),
                 f"  predicted: {unit}  [{self.model} cost model]", "  presets (predicted):"]
        for name, p in self.presets.items():
            lines.append(f"    {name:10s} {p.settings.label():58s} {_fmt_value(p, self.objective)}"
                         f"  (ours {self.predicted.better(p, self.objective):.2f}x)")
        lines.append("  why:")
        lines += [f"    - {r}" for r in self.reasons]
        return "\n".join(lines)


def _fmt_value(p: Prediction, objective: str) -> str:
    if objective == "latency":
        return f"{p.latency_ns / 1e6:.4g} ms"
    return f"{p.throughput:.4g} samples/s ({p.latency_ns / 1e6:.4g} ms per instance batch)"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms" if ns >= 1e5 else f"{ns / 1e3:.3g} us"


# --------------------------------------------------------------- candidates


def _batch(graph: Graph) -> int:
    b = graph.meta.get("batch")
    if isinstance(b, int) and b >= 1:
        return b
    return int(graph[graph.inputs[0]].shape[0]) if graph.inputs else 1


def _graph_at(graph: Graph, batch: int) -> Graph | None:
    """The same model at another batch, when the graph says which model it is
    (and rebuilding it gives the same nodes)."""
    name = graph.meta.get("model")
    if not isinstance(name, str):
        return None
    from pyparbench.models import MODELS, build

    if name not in MODELS:
        return None
    other = build(name, batch)
    if [n.name for n in other] != [n.name for n in graph]:
        return None
    return other


def _workers_cap(graph: Graph) -> int:
    """More async workers than independent nodes can never all be busy:
    bound by the widest set of independent heavy ops (and 2, for the glue
    beside a lone heavy op)."""
    return max(2, graph.max_width)


def candidates(graph: Graph, model: CostModel, resources: Resources, *,
               instances: Sequence[int] = (1,), allow_smt: bool = False) -> list[Settings]:
    """Every candidate setting (see the module docstring); none oversubscribes."""
    out: list[Settings] = []
    cpus = resources.logical if allow_smt else resources.cores
    for k in instances:
        per = cpus // k
        if per < 1:
            continue
        for w in range(1, min(per, _workers_cap(graph)) + 1):
            counts = {per // w} | {t for t in model.thread_counts(per) if t <= per // w}
            for t in sorted(counts):
                smt = allow_smt and k * w * t > resources.cores
                for op in model.operators:
                    if op == "framework" and t == 1:
                        continue  # one block: the library kernel itself
                    for lib in model.libraries:
                        for pool in (model.pools if op == "framework" else ("openmp",)):
                            out.append(Settings(
                                scheduler="sync" if w == 1 else "async", inter_op=w,
                                intra_op=t, operator=op, library=lib, pool=pool,
                                affinity="compact" if resources.cores > 1 else "none",
                                smt=smt, instances=k))
    return out


class _Executed:
    """:func:`executed_graph`, once per graph and the settings that decide it."""

    def __init__(self) -> None:
        self._memo: dict[tuple[int, str, str, str], tuple[Graph, Graph]] = {}

    def __call__(self, graph: Graph, settings: Settings) -> Graph:
        key = (id(graph), settings.graph_opt, settings.library, settings.operator)
        hit = self._memo.get(key)
        if hit is None or hit[0] is not graph:
            hit = (graph, executed_graph(graph, settings))
            self._memo[key] = hit
        return hit[1]


def predict(graph: Graph, settings: Settings, model: CostModel, resources: Resources, *,
            batch: int | None = None) -> Prediction:
    """Predict ``settings`` for ``graph`` (one instance's graph when
    ``settings.instances`` > 1; the graph as built: the prediction is of the
    graph the executor runs, :func:`~pyparbench.graph.passes.executed_graph`); ``batch`` is the
    graph's batch."""
    return _predict_run(executed_graph(graph, settings), settings, model, resources,
                        batch=batch if batch is not None else _batch(graph))


def _predict_run(run: Graph, settings: Settings, model: CostModel, resources: Resources, *,
                 batch: int) -> Prediction:
    """:func:`predict` on the graph the executor runs."""
    sim = simulate(run, settings, model, resources)
    return Prediction(settings, sim.latency_ns, batch, batch * settings.instances, sim)


def _simplicity(s: Settings) -> tuple[int, ...]:
    return (-s.threads, int(s.scheduler == "async"), int(s.operator == "framework"),
            s.instances, int(s.library != "onednn"), ("openmp", "eigen", "std").index(s.pool))


# ----------------------------------------------------------------- reasons


def _op_times(graph: Graph, model: CostModel, threads: int, s: Settings) -> list[float]:
    return [0.0 if n.op in ALIAS_OPS else
            model.op_ns(graph, n, threads, s.operator, s.library, s.pool) for n in graph]


def _branch_reason(graph: Graph, times: list[float], threads: int) -> list[str]:
    """Where the graph forks into branches that can run at once, and what
    running them at once can save (op times at ``threads`` threads)."""
    n = len(graph)
    desc = [0] * n
    for node in reversed(graph.nodes):
        bits = 1 << node.id
        for c in graph.consumers[node.id]:
            bits |= desc[c]
        desc[node.id] = bits

    def cost(bits: int) -> float:
        total = 0.0
        while bits:
            low = bits & -bits
            total += times[low.bit_length() - 1]
            bits ^= low
        return total

    forks: list[tuple[float, str, list[float]]] = []
    sources = [i for i in graph.inputs]
    points: list[tuple[str, list[int]]] = [("the graph's inputs", sources)] if len(
        sources) > 1 else []
    points += [(node.name, sorted(set(graph.consumers[node.id]))) for node in graph
               if len(set(graph.consumers[node.id])) > 1]
    for name, cons in points:
        seen = 0
        shared = 0
        for c in cons:
            shared |= seen & desc[c]
            seen |= desc[c]
        costs = sorted((cost(desc[c] & ~shared) for c in cons), reverse=True)
        costs = [c for c in costs if c > 0]
        if len(costs) > 1:
            forks.append((sum(costs) - costs[0], name, costs))
    # Span: the longest path by op time; work: all op time.
    upto = [0.0] * n
    for node in graph.nodes:
        upto[node.id] = times[node.id] + max((upto[j] for j in node.inputs), default=0.0)
    span, work = max(upto, default=0.0), sum(times)
    out = []
    if not forks:
        out.append(f"no parallel branches: every op depends on the one before it (a chain "
                   f"of {_ms(work)} at {threads} thread{'s' * (threads > 1)} per op), so one "
                   f"worker suffices")
        return out
    forks.sort(reverse=True)
    best = forks[0]
    shown = ", ".join(_ms(c) for c in best[2][:6]) + (", ..." if len(best[2]) > 6 else "")
    out.append(f"parallel branches: {len(forks)} fork{'s' * (len(forks) > 1)}, up to "
               f"{max(len(f[2]) for f in forks)} branches wide; the largest at {best[1]} "
               f"({len(best[2])} branches of {shown} at {threads} thread"
               f"{'s' * (threads > 1)}): running them at once saves at most {_ms(best[0])}")
    out.append(f"with unlimited workers the critical path is {_ms(span)} of {_ms(work)} of op "
               f"time (at most {work / span if span else 1:.2f}x from inter-op parallelism, "
               f"before dispatch costs and ops slowing each other)")
    return out


def _scaling_reason(graph: Graph, model: CostModel, counts: Sequence[int],
                    s: Settings) -> list[str]:
    """Where ops stop scaling: per op, the last thread count reached with a
    gain of at least 15 % per step; grouped by that count, weighted by time."""
    if len(counts) < 2:
        return ["one core: no intra-op parallelism to choose"]
    ops = [n for n in graph if n.op not in ALIAS_OPS]
    times = {n.id: [model.op_ns(graph, n, t, "library", s.library, s.pool) for t in counts]
             for n in ops}
    total1 = sum(v[0] for v in times.values()) or 1.0
    stop: dict[int, list[int]] = {}
    for i, v in times.items():
        last = 0
        for j in range(1, len(counts)):
            if v[j] <= v[last] / 1.15:
                last = j
            else:
                break
        stop.setdefault(counts[last], []).append(i)
    parts = []
    for t in sorted(stop):
        ids = stop[t]
        share = sum(times[i][0] for i in ids) / total1
        parts.append(f"{t} thread{'s' * (t > 1)}: {len(ids)} ops ({share:.0%} of the "
                     f"1-thread time)")
    heavy = sorted(ops, key=lambda n: -times[n.id][0])[:3]
    eg = "; ".join(f"{n.name} {times[n.id][0] / max(min(times[n.id]), 1e-9):.2f}x at best "
                   f"({counts[times[n.id].index(min(times[n.id]))]} threads)" for n in heavy)
    whole = total1 / sum(min(v) for v in times.values())
    return ["where ops stop scaling (library mode; the last thread count reached with a "
            "gain of 15% or more per step): " + "; ".join(parts),
            f"heaviest ops: {eg}; all ops at their best count: {whole:.2f}x over 1 thread"]


def _best(preds: Sequence[Prediction], objective: str,
          keep: Callable[[Settings], bool]) -> Prediction | None:
    chosen = [p for p in preds if keep(p.settings)]
    if not chosen:
        return None
    return min(chosen, key=lambda p: p.latency_ns) if objective == "latency" else max(
        chosen, key=lambda p: p.throughput)


def _choice_reasons(best: Prediction, preds: Sequence[Prediction], objective: str) -> list[str]:
    s = best.settings
    out = []
    most = max(p.settings.threads for p in preds)
    rivals: list[tuple[str, Callable[[Settings], bool]]] = [
        ("one worker (sync)", lambda x: x.inter_op == 1),
        ("more workers (async)", lambda x: x.inter_op > 1),
        ("library operator mode", lambda x: x.operator == "library"),
        ("framework operator mode", lambda x: x.operator == "framework"),
        ("one instance", lambda x: x.instances == 1),
        ("several instances", lambda x: x.instances > 1),
        ("all cores", lambda x: x.threads == most),
    ]
    for what, keep in rivals:
        if keep(s):
            continue
        rival = _best(preds, objective, keep)
        if rival is None:
            continue
        out.append(f"best with {what}: {rival.settings.label()} predicted "
                   f"{_fmt_value(rival, objective)}, {best.better(rival, objective):.2f}x "
                   f"worse")
    return out


def _pool_of(s: Settings) -> str:
    """The thread pool that runs a setting's ops (library mode: OpenMP's)."""
    return "openmp" if s.operator == "library" else s.pool


def _may_share_a_process(a: Settings, b: Settings) -> bool:
    """Whether ``a`` and ``b`` measure in one process as each does alone.
    Eigen's pool spins its idle workers before they sleep, which slows any
    other pool's runs; OpenMP's and the std pool's do not measurably
    (transformer batch 1, sync 1x2, library/openmp and framework/std
    alternated: 11.8 and 17.2 ms, against 11.7 and 16.9 in processes of
    their own)."""
    pools = {_pool_of(a), _pool_of(b)}
    return len(pools) == 1 or "eigen" not in pools


def _verified(best: Prediction, preds: Sequence[Prediction], per_instance: dict[int, Graph],
              objective: str, top: int, calibration: dict[str, Any]) -> tuple[Prediction, str]:
    """The prediction of the setting measured best among the ``top`` best
    predicted (see :mod:`pyparbench.recommend.verify`), and a reason line;
    ``calibration["verified"]`` gets the figures."""
    latency = objective == "latency"
    ranked = sorted(preds, key=lambda p: p.value(objective), reverse=not latency)
    near = [p for p in ranked if p.settings != best.settings
            and _may_share_a_process(p.settings, best.settings) and (
        p.latency_ns <= best.latency_ns * (1 + VERIFY_MARGIN) if latency
        else p.throughput >= best.throughput * (1 - VERIFY_MARGIN))]
    chosen = [best, *near[:top - 1]]
    if len(chosen) < 2:
        return best, ""

    def graphs_of(s: Settings) -> list[Graph] | None:
        g = per_instance[s.instances]
        copies = [g, *(_graph_at(g, _batch(g)) for _ in range(s.instances - 1))]
        return None if any(c is None for c in copies) else [c for c in copies if c]

    measured = measure_whole([p.settings for p in chosen], graphs_of)
    samples = {p.settings: p.samples for p in chosen}

    def value(v: Verified) -> float:
        return v.ns if latency else samples[v.settings] / v.ns * 1e9

    pick = verify_choice(best.settings, measured, value, higher_is_better=not latency)
    calibration["verified"] = [{"label": v.settings.label(), "ns": v.ns, "rounds": v.rounds}
                               for v in measured]
    if not measured:
        return best, ""
    figures = ", ".join(f"{v.settings.label()} {v.ns / 1e6:.3f} ms" for v in measured)
    winner = next(p for p in chosen if p.settings == pick)
    verdict = ("the predicted choice is kept (no other is more than "
               f"{VERIFY_SWITCH:.0%} faster)" if pick == best.settings else
               f"{pick.label()} is taken: measured faster than the predicted "
               f"{best.settings.label()} by more than {VERIFY_SWITCH:.0%}")
    return winner, (f"measured whole, side by side in {measured[0].rounds} interleaved rounds "
                    f"(median over rounds; a switch needs the median of the per-round ratios "
                    f"above {VERIFY_SWITCH:.0%}): {figures}; {verdict}")


# --------------------------------------------------------------- recommend


def _topology(topology: Topology | str | None) -> tuple[Topology, str]:
    """The topology and how to name it."""
    from pyparbench.threading.topology import topology as load

    if topology is None:
        return load(), "this machine"
    if isinstance(topology, str):
        try:
            return load(topology), repr(topology)
        except ValueError as e:
            raise ValueError(f"bad topology {topology!r}: {e}") from None
    if isinstance(topology, Topology):
        return topology, repr(topology.source) if topology.synthetic else "this machine"
    raise TypeError(f"topology must be None, an hwloc synthetic string or a Topology, "
                    f"got {topology!r}")


def recommend(graph: Graph, topology: Topology | str | None = None,
              objective: str = "latency", *, model: CostModel | None = None,
              calibrate: bool = True, allow_smt: bool = False,
              libraries: Sequence[str] = ("onednn",), instances: bool = True,
              recalibrate: bool = False, cache_dir: str | Path | None = None,
              verify: int = VERIFY_TOP) -> Recommendation:
    """Recommend the thread setting for ``graph``.

    Parameters
    ----------
    graph
        The model graph (``pyparbench.models.build(name, batch)``).
    topology
        None for this machine, an hwloc synthetic string such as
        ``"package:2 core:28 pu:2"``, or a Topology.
    objective
        ``"latency"`` (one batch as fast as possible; instances split it) or
        ``"throughput"`` (samples per second; each instance serves a whole
        batch).
    model
        A cost model to use (e.g. a :class:`TableCostModel`); None: measured
        on this machine, or the analytic model (see ``calibrate``).
    calibrate
        Measure op times on this machine (cached). False, or a topology with
        more cores than this process may use, selects the analytic model.
    allow_smt
        Also try settings that use SMT siblings.
    libraries
        Math libraries to calibrate and try (default oneDNN only).
    instances
        Try data-parallel instances (needs a model graph it can rebuild at
        the instance's batch, for the latency objective).
    recalibrate
        Measure again what the cache already has.
    cache_dir
        Calibration cache directory (default: see
        :func:`~pyparbench.recommend.calibrate.cache_dir`).
    verify
        With the calibrated model on this machine: how many of the best
        predicted settings (within 25 % of the best) are then measured whole,
        side by side, the measured best being taken when it is more than 3 %
        faster (:mod:`pyparbench.recommend.verify`; a few seconds). 0: the
        prediction alone decides.

    Raises
    ------
    ValueError
        An unknown objective, a bad topology string, verify < 0.
    TypeError
        ``graph`` is not a Graph.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a pyparbench Graph, got {type(graph).__name__}")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be 'latency' or 'throughput', got {objective!r}")
    if isinstance(verify, bool) or not isinstance(verify, int) or verify < 0:
        raise ValueError(f"verify must be an int >= 0, got {verify!r}")
    topo, where = _topology(topology)
    res = Resources.from_topology(topo)
    batch = _batch(graph)
    why_model = ""
    calibration: dict[str, Any] = {}
    measured_here = False  # the calibrated model of this machine, whose settings can be run

    # Which instance counts, and each one's graph.
    per_instance: dict[int, Graph] = {1: graph}
    executed = _Executed()
    if instances and res.cores > 1:
        for k in range(2, res.cores + 1):
            if res.cores % k:
                continue
            if objective == "throughput":
                per_instance[k] = graph
            elif batch % k == 0:
                g = _graph_at(graph, batch // k)
                if g is not None:
                    per_instance[k] = g

    if model is None:
        from pyparbench.settings import allowed_cores
        from pyparbench.threading.topology import topology as load

        here = allowed_cores(load())
        if calibrate and res.cores <= here:
            from pyparbench.recommend.calibrate import EXECUTOR_BUSY, calibration_threads
            from pyparbench.recommend.calibrate import calibrate as measure

            cal = None
            used: list[tuple[Graph, list[str]]] = []
            measured: list[str] = []
            seconds = 0.0
            for k, g in per_instance.items():
                counts = calibration_threads(res.cores // k)
                ops = ("library", "framework") if k == 1 else ("library",)
                cal = measure(g, threads=counts, libraries=libraries, recalibrate=recalibrate,
                              directory=cache_dir, operators=ops, instances=k)
                measured += [f"{m} (batch {_batch(g)})" if m != "executor" else m
                             for m in cal.measured]
                seconds += cal.seconds
                used.append((g, [config_key(op, lib, pool, t) for t in counts
                                 for lib in libraries for op in ops
                                 for pool in (POOLS if op == "framework" else ("openmp",))]))
            assert cal is not None
            model = cal.model()
            measured_here = not topo.synthetic
            disturbed = sorted({c for g, cs in used for c in cal.disturbed(g, cs)})
            calibration = {"path": str(cal.path), "measured": measured, "seconds": seconds,
                           "disturbed": disturbed,
                           "executor_load": cal.load.get("executor", 0.0)}
            why_model = (f"{model.describe()}; "
                         + (f"measured now: {len(measured)} configuration(s) in "
                            f"{seconds:.1f} s" if measured else
                            "every op time came from the cache"))
            if disturbed or calibration["executor_load"] > EXECUTOR_BUSY:
                what = (f"while measuring {', '.join(disturbed)}" if disturbed else
                        "while measuring the executor's costs")
                why_model += (f"; other processes used the CPUs {what}: multi-threaded "
                              f"figures may be pessimistic; later calls measure them again, or "
                              f"use --recalibrate on a quiet machine")
        else:
            model = AnalyticCostModel(cores_per_socket=res.cores_per_socket)
            cause = ("calibration turned off" if not calibrate else
                     f"the topology has {res.cores} cores, this machine {here}")
            why_model = f"{model.describe()} ({cause})"
    else:
        why_model = model.describe()

    cands = candidates(graph, model, res, instances=sorted(per_instance),
                       allow_smt=allow_smt)
    preds = [_predict_run(executed(per_instance[s.instances], s), s, model, res,
                          batch=_batch(per_instance[s.instances])) for s in cands]
    if objective == "latency":
        top = min(p.latency_ns for p in preds)
        ties = [p for p in preds if p.latency_ns <= top * (1 + TIE)]
    else:
        top = max(p.throughput for p in preds)
        ties = [p for p in preds if p.throughput >= top * (1 - TIE)]
    best = min(ties, key=lambda p: _simplicity(p.settings))
    if best.settings.operator == "framework":
        lib = _best(preds, objective, lambda x: x.operator == "library")
        if lib is not None and best.better(lib, objective) < 1 + FRAMEWORK_MARGIN:
            best = lib
    verified_reason = ""
    if verify and measured_here:
        best, verified_reason = _verified(best, preds, per_instance, objective, verify,
                                          calibration)
    chosen = best.settings.with_(name="recommended")
    best = Prediction(chosen, best.latency_ns, best.instance_batch, best.samples,
                      best.simulation)
    preds.sort(key=lambda p: p.value(objective), reverse=objective == "throughput")

    presets: dict[str, Prediction] = {}
    for name in PRESETS:
        ps = preset(name, topo, graph)
        presets[name] = _predict_run(executed(graph, ps), ps, model, res, batch=batch)

    reasons = [f"cost model: {why_model}"]
    reasons.append(f"graph: {len(graph)} nodes, {graph.heavy_ops} heavy ops, heavy depth "
                   f"{graph.depth}, average width {graph.avg_width:.2f} (the study's tuner "
                   f"uses {presets['tftuner'].settings.inter_op} worker"
                   f"{'s' * (presets['tftuner'].settings.inter_op > 1)}), widest set of "
                   f"independent heavy ops {graph.max_width}")
    g1 = executed(per_instance[chosen.instances], chosen)
    if len(g1) != len(per_instance[chosen.instances]):
        reasons.append(f"as run: the graph passes ({chosen.graph_opt}) leave {len(g1)} of "
                       f"{len(per_instance[chosen.instances])} nodes, and op times are "
                       f"those of the optimised nodes")
    reasons += _branch_reason(g1, _op_times(g1, model, chosen.intra_op, chosen),
                              chosen.intra_op)
    reasons += _scaling_reason(g1, model, model.thread_counts(res.cores // chosen.instances),
                               chosen)
    sim = best.simulation
    busy = (f"; {sim.concurrency():.2f} of its {chosen.inter_op} workers busy on average"
            if chosen.inter_op > 1 else "")
    reasons.append(f"chosen: {chosen.label()}: predicted {_fmt_value(best, objective)}{busy}")
    if verified_reason:
        reasons.append(verified_reason)
    for k in sorted(per_instance):
        factor = model.instance_factor(executed(per_instance[k], chosen.with_(instances=k)), k)
        if k > 1 and factor is not None:
            reasons.append(f"{k} instances side by side: each measured {factor:.2f}x slower "
                           f"than one alone (shared caches and memory bandwidth)")
    reasons += _choice_reasons(best, preds, objective)
    over = [f"{name} ({p.settings.threads} threads on {res.cores} cores)"
            for name, p in presets.items() if p.settings.threads > res.cores]
    if over:
        reasons.append("oversubscribed presets: " + ", ".join(over) + ": teams whose threads "
                       "outnumber the cores wait at every barrier for a descheduled thread")
    for name, p in presets.items():
        ratio = best.better(p, objective)
        if ratio > 1 + TIE:
            reasons.append(f"vs {name} ({p.settings.label()}): {ratio:.2f}x better predicted")
    if any(p.settings.omp_wait is not None for p in presets.values()):
        reasons.append("the OpenMP spin policy (omp_wait, the intel preset's) is not "
                       "modelled: its prediction is that of the default policy")
    return Recommendation(graph=graph.name, batch=batch, topology=where, settings=chosen,
                          objective=objective, predicted=best, presets=presets,
                          reasons=tuple(reasons), model=model.kind,
                          model_description=model.describe(), candidates=tuple(preds),
                          calibration=calibration)


def recommend_model(name: str, batch: int | None = None, **kw: Any) -> Recommendation:
    """:func:`recommend` for a registered model (``pyparbench models``) at ``batch``.

    Raises
    ------
    ValueError
        An unknown model, or ``batch`` < 1 (naming it); the errors of
        :func:`recommend`.
    TypeError
        ``batch`` is not an integer.
    """
    from pyparbench.models import build

    return recommend(build(name, None if batch is None else positive_int(batch, "batch")),
                     **kw)


def recommended_settings(graph: Graph, topology: Topology | str | None = None) -> Settings:
    """The recommended settings for ``graph`` (latency), named ``"recommended"``:
    what a suite adds to each model's configurations beside the presets."""
    return recommend(graph, topology).settings


recommended = recommended_settings


class _CallableModule(types.ModuleType):
    """``pyparbench.recommend`` is this package and, called, :func:`recommend`:
    ``ppb.recommend(graph)`` reads as the rest of the top-level API, while
    ``pyparbench.recommend.calibrate`` and the other submodules stay importable
    under the package's own name."""

    def __call__(self, graph: Graph, topology: Topology | str | None = None,
                 objective: str = "latency", **kw: Any) -> Recommendation:
        return recommend(graph, topology, objective, **kw)


sys.modules[__name__].__class__ = _CallableModule
