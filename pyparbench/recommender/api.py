""":func:`recommend`: the recommender's one public entry point, as its steps
(see the package docstring)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from pyparbench.graph import Graph
from pyparbench.choices import PRESETS, check_precision
from pyparbench.recommender.bandwidth import streaming
from pyparbench.recommender.costmodel import AnalyticCostModel, CostModel, MachineSpec
from pyparbench.recommender.decision import TOP as VERIFY_TOP
from pyparbench.recommender.modelchoice import choose_model, topology_of
from pyparbench.recommender.reasons import explain, topology_reasons
from pyparbench.recommender.search import (
    Executed,
    batch_of,
    candidates,
    instance_graphs,
    on_kind,
    predict_run,
)
from pyparbench.recommender.selection import choose, verified
from pyparbench.recommender.simulate import Resources
from pyparbench.recommender.types import OBJECTIVES, Prediction, Recommendation
from pyparbench.settings import Settings, instance_cpus, preset
from pyparbench.threading.topology import Topology, fastest_kind, kind_speed

__all__ = ["recommend"]


def recommend(graph: Graph, topology: Topology | str | os.PathLike[str] | None = None,
              objective: str = "latency", *, model: CostModel | None = None,
              calibrate: bool = True, allow_smt: bool = False,
              libraries: Sequence[str] = ("onednn",), instances: bool = True,
              recalibrate: bool = False, cache_dir: str | Path | None = None,
              verify: int = VERIFY_TOP, precision: str = "fp32") -> Recommendation:
    """Recommend the thread setting for ``graph``.

    Parameters
    ----------
    graph
        The model graph (``pyparbench.models.build(name, batch)``).
    topology
        None for this machine, an hwloc XML file (``lstopo --of xml >
        box.xml`` on the machine to plan), an hwloc synthetic string such as
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
        :func:`~pyparbench.recommender.calibrate.cache_dir`).
    verify
        With the calibrated model on this machine: how many of the best
        predicted settings (within 25 % of the best) are then measured whole,
        side by side, the measured best being taken when it is more than 3 %
        faster (:mod:`pyparbench.recommender.side_by_side`; a few seconds). 0: the
        prediction alone decides.
    precision
        The run's precision (``Settings.precision``): every candidate and
        preset is a setting at it, and verification measures it; the cost
        model itself is fp32's (its op times are measured in fp32).

    Raises
    ------
    ValueError
        An unknown objective, a bad topology string or file, verify < 0, an
        unknown precision, bf16 with a library other than onednn.
    TypeError
        ``graph`` is not a Graph.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a pyparbench Graph, got {type(graph).__name__}")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be 'latency' or 'throughput', got {objective!r}")
    if isinstance(verify, bool) or not isinstance(verify, int) or verify < 0:
        raise ValueError(f"verify must be an int >= 0, got {verify!r}")
    check_precision(precision)
    if precision != "fp32" and any(lib != "onednn" for lib in libraries):
        raise ValueError(f"precision={precision!r} runs on the onednn library only, got "
                         f"libraries {list(libraries)}")
    topo, where = topology_of(topology)
    res = Resources.from_topology(topo)
    # A hybrid machine's slower CPU kinds of known speed: candidates of their own.
    slower = [Resources.from_topology(topo, k) for k in slower_kinds(topo)]
    batch = batch_of(graph)

    # The graph each instance count runs, and the cost model of them all.
    per_instance = instance_graphs(graph, res, objective, instances)
    for r in slower:
        for k, g in instance_graphs(graph, r, objective, instances).items():
            per_instance.setdefault(k, g)
    # Calibrated for the kind with the most cores: a slower kind can have more
    # (and more instance counts) than the most powerful one.
    widest = max((res, *slower), key=lambda r: r.cores)
    choice = choose_model(per_instance, widest, topo, model=model, calibrate=calibrate,
                          libraries=libraries, recalibrate=recalibrate, cache_dir=cache_dir,
                          precision=precision)
    cost = choice.model
    calibration = dict(choice.calibration)

    # Every candidate predicted; the best chosen, then verified by measuring.
    executed = Executed(res)
    preds = [predict_run(executed(per_instance[s.instances], s), s, cost, r,
                         batch=batch_of(per_instance[s.instances]))
             for r in (res, *slower)
             for s in (c.with_(precision=precision) for c in
                       kind_candidates(graph, cost, r, sorted(per_instance), allow_smt))]
    # A graph that streams its weights from memory (a decoder's decode step)
    # gains nothing from threads past the bandwidth's saturation.
    streams = streaming(graph, topo, ridge=cost.executor.intensity_ridge,
                        cache_per_package=MachineSpec().cache_bytes, precision=precision)
    best = choose(preds, objective, fewest_threads=streams.memory_bound)
    preset_settings = {name: preset(name, topo, graph).with_(precision=precision)
                       for name in PRESETS}
    verified_reason = ""
    if verify and choice.measured_here:
        policies = (None, *cost.wait.policies) if cost.wait is not None else ()
        best, verified_reason = verified(best, preds, per_instance, objective, verify,
                                         calibration, presets=list(preset_settings.values()),
                                         policies=policies)
    chosen = best.settings.with_(name="recommended")
    best = Prediction(chosen, best.latency_ns, best.instance_batch, best.samples,
                      best.simulation)
    preds.sort(key=lambda p: p.value(objective), reverse=objective == "throughput")

    # The presets, predicted by the same model; then the reasons.
    presets = {name: predict_run(executed(graph, ps), ps, cost, res, batch=batch)
               for name, ps in preset_settings.items()}
    reasons = explain(graph, per_instance, best, preds, presets, model=cost,
                      why_model=choice.why, resources=resources_of(chosen, res, slower),
                      objective=objective,
                      executed=executed, verified=verified_reason)
    if streams.memory_bound:
        reasons.append(streams.reason(_saturation(cost)))
    reasons += topology_reasons(topo, res, preset_settings["intel"], slower, preds, best,
                                objective)
    return Recommendation(graph=graph.name, batch=batch, topology=where, settings=chosen,
                          objective=objective, predicted=best, presets=presets,
                          reasons=tuple(reasons), model=cost.kind,
                          model_description=cost.describe(), candidates=tuple(preds),
                          calibration=calibration, cpus=instance_cpus(chosen, topo))


def _saturation(cost: CostModel) -> int | None:
    """Threads per socket at which the analytic model's memory bandwidth
    stops growing (None for a measured model: its op times already hold
    where this machine's bandwidth saturates)."""
    if not isinstance(cost, AnalyticCostModel):
        return None
    spec = cost.spec
    return max(1, math.ceil(spec.socket_gbps / cost.numa_per_socket / spec.core_gbps))


def slower_kinds(topo: Topology) -> list[int]:
    """The CPU kinds other than the most powerful whose speed the topology
    gives and of which this process may use a CPU."""
    fast = fastest_kind(topo)
    allowed = set(topo.allowed_cpus)
    return [k.index for k in topo.cpu_kinds
            if fast is not None and k.index != fast and kind_speed(topo, k.index) is not None
            and allowed & set(k.pus)]


def resources_of(settings: Settings, fastest: Resources,
                 slower: Sequence[Resources]) -> Resources:
    """The resources ``settings`` runs on: a slower CPU kind's where it is
    pinned to that kind's CPUs alone, else the most powerful kind's."""
    if not isinstance(settings.affinity, str) and fastest.topology is not None:
        cpus = {c for pool in settings.affinity for c in pool}
        for r in slower:
            if r.kind is not None and cpus <= set(fastest.topology.cpu_kinds[r.kind].pus):
                return r
    return fastest


def kind_candidates(graph: Graph, cost: CostModel, resources: Resources,
                    instance_counts: Sequence[int], allow_smt: bool) -> list[Settings]:
    """:func:`candidates` on ``resources``; on a slower CPU kind, each pinned
    to that kind's CPUs."""
    found = candidates(graph, cost, resources, instances=instance_counts, allow_smt=allow_smt)
    if resources.kind is None or resources.topology is None:
        return found
    return [on_kind(s, resources.topology, resources.kind) for s in found]
