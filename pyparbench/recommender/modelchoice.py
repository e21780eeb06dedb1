"""Which cost model the recommender uses, and why.

* the caller's model, when given;
* on this machine (or a synthetic topology no bigger than the cores this
  process may use), op times and executor costs measured here and cached
  (:mod:`~pyparbench.recommender.calibrate`), for the graph of every
  instance count;
* otherwise (calibration off, or a topology bigger than this machine) the
  roofline model (:class:`~pyparbench.recommender.costmodel.AnalyticCostModel`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyparbench.graph import Graph
from pyparbench.choices import POOLS
from pyparbench.recommender.calibrate import EXECUTOR_BUSY, calibration_threads
from pyparbench.recommender.calibrate import calibrate as measure
from pyparbench.recommender.costmodel import AnalyticCostModel, CostModel, config_key
from pyparbench.recommender.search import batch_of, instance_operators
from pyparbench.recommender.simulate import Resources
from pyparbench.settings import allowed_cores
from pyparbench.threading.topology import Topology, is_topology_file
from pyparbench.threading.topology import topology as load

__all__ = ["ModelChoice", "choose_model", "topology_name", "topology_of"]


@dataclass(frozen=True)
class ModelChoice:
    """The cost model, the line saying why, and with the calibrated model
    what calibration measured (``Recommendation.calibration``).
    ``measured_here``: the model was measured on this machine, whose
    settings can then be run (verified) here."""

    model: CostModel
    why: str
    calibration: dict[str, Any] = field(default_factory=dict)
    measured_here: bool = False


def topology_of(topology: Topology | str | os.PathLike[str] | None) -> tuple[Topology, str]:
    """The topology and how to name it: ``this machine``, the synthetic
    string quoted, or the file's path.

    Raises
    ------
    ValueError
        A bad hwloc synthetic string or topology file (naming it).
    TypeError
        Neither None, a string, a path nor a Topology.
    """
    if topology is None:
        return load(), "this machine"
    if isinstance(topology, (str, os.PathLike)):
        if is_topology_file(topology):
            topo = load(topology)  # its errors name the file
            return topo, topo.source
        try:
            return load(topology), repr(topology)
        except ValueError as e:
            raise ValueError(f"bad topology {topology!r}: {e}") from None
    if isinstance(topology, Topology):
        return topology, topology_name(topology)
    raise TypeError(f"topology must be None, an hwloc synthetic string, an hwloc XML file "
                    f"or a Topology, got {topology!r}")


def topology_name(topo: Topology) -> str:
    """How a topology is named in a recommendation."""
    if topo.kind == "synthetic":
        return repr(topo.source)
    return topo.source


def _calibrated(per_instance: dict[int, Graph], resources: Resources, topo: Topology, *,
                libraries: Sequence[str], recalibrate: bool,
                cache_dir: str | Path | None, precision: str = "fp32") -> ModelChoice:
    """Op times of every instance count's graph, measured here (cached)."""
    cal = None
    used: list[tuple[Graph, list[str]]] = []
    measured: list[str] = []
    wait_errors: list[str] = []
    seconds = 0.0
    for k, g in per_instance.items():
        counts = calibration_threads(resources.cores // k)
        ops = instance_operators(k)
        cal = measure(g, threads=counts, libraries=libraries, recalibrate=recalibrate,
                      directory=cache_dir, operators=ops, instances=k, precision=precision)
        measured += [m if m in ("executor", "wait policies") else f"{m} (batch {batch_of(g)})"
                     for m in cal.measured]
        wait_errors += [cal.wait_error] if cal.wait_error else []
        seconds += cal.seconds
        used.append((g, [config_key(op, lib, pool, t) for t in counts
                         for lib in libraries for op in ops
                         for pool in (POOLS if op == "framework" else ("openmp",))]))
    assert cal is not None  # per_instance always holds the graph itself
    model = cal.model()
    disturbed = sorted({c for g, cs in used for c in cal.disturbed(g, cs, precision=precision)})
    calibration: dict[str, Any] = {
        "path": str(cal.path), "measured": measured, "seconds": seconds,
        "disturbed": disturbed, "executor_load": cal.load.get("executor", 0.0)}
    why = (f"{model.describe()}; "
           + (f"measured now: {len(measured)} configuration(s) in {seconds:.1f} s"
              if measured else "every op time came from the cache"))
    if disturbed or calibration["executor_load"] > EXECUTOR_BUSY:
        what = (f"while measuring {', '.join(disturbed)}" if disturbed else
                "while measuring the executor's costs")
        why += (f"; other processes used the CPUs {what}: multi-threaded figures may be "
                f"pessimistic; later calls measure them again, or use --recalibrate on a "
                f"quiet machine")
    if wait_errors:
        calibration["wait_error"] = wait_errors[0]
        why += f"; the OpenMP wait policies could not be measured: {wait_errors[0]}"
    return ModelChoice(model, why, calibration, measured_here=topo.kind == "machine")


def choose_model(per_instance: dict[int, Graph], resources: Resources, topo: Topology, *,
                 model: CostModel | None, calibrate: bool, libraries: Sequence[str],
                 recalibrate: bool, cache_dir: str | Path | None,
                 precision: str = "fp32") -> ModelChoice:
    """The cost model for ``per_instance`` (instance count -> graph) on
    ``topo`` (see the module docstring)."""
    if model is not None:
        return ModelChoice(model, model.describe())

    here = allowed_cores(load())
    if calibrate and resources.cores <= here:
        return _calibrated(per_instance, resources, topo, libraries=libraries,
                           recalibrate=recalibrate, cache_dir=cache_dir, precision=precision)
    analytic = AnalyticCostModel(cores_per_socket=resources.cores_per_socket,
                                  numa_per_socket=resources.numa_per_socket,
                                  sockets=resources.sockets)
    cause = ("calibration turned off" if not calibrate else
             f"the topology has {resources.cores} cores, this machine {here}")
    return ModelChoice(analytic, f"{analytic.describe()} ({cause})")
