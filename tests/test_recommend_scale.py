"""The calibrated recommender on machines of every size, without the machine.

This machine's topology is replaced by a synthetic one (so ``recommend()``
takes the calibrated branch, as it does on a real machine of that size), and
the calibration's measuring functions by stubs that answer, from the analytic
model, exactly the op times the calibration planning asks for: a figure the
simulation then needs but the planning never asked for is a KeyError here,
as it was on a real 16-core machine.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from pyparbench.graph import Graph
from pyparbench.graph.passes import executed_graph
from pyparbench.models import build
from pyparbench.recommender import AnalyticCostModel, ExecutorCosts, recommend
from pyparbench.recommender import calibrate as cal_mod
from pyparbench.recommender import modelchoice
from pyparbench.recommender.costmodel import ALIAS_OPS, WaitCosts, op_key
from pyparbench.settings import allowed_cores
from pyparbench.harness.levels import DEFAULT_MODELS

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

# The module (pyparbench.threading's `topology` attribute is the function).
topology_mod = importlib.import_module("pyparbench.threading.topology")

# 1 to 384 CPUs, 1 to 8 sockets, SMT on and off.
TOPOLOGIES = (
    "package:1 core:1 pu:1",
    "package:1 core:2 pu:2",
    "package:1 core:16 pu:1",
    "package:2 core:14 pu:2",
    "package:2 core:28 pu:2",
    "package:8 core:24 pu:2",
)


class Stubs:
    """The measuring functions of :mod:`pyparbench.recommender.calibrate`,
    answering from the analytic model, and what they were asked."""

    def __init__(self, cores_per_socket: int) -> None:
        self.model = AnalyticCostModel(cores_per_socket=cores_per_socket)
        self.asked: set[str] = set()

    def measure_graph(self, graph: Graph, configs: Sequence[str], *, rounds: int = 3,
                      pin: bool = True, loads: dict[str, float] | None = None,
                      graph_opt: str = "full",
                      precision: str = "fp32") -> dict[str, dict[str, list[float]]]:
        out: dict[str, dict[str, list[float]]] = {}
        for config in configs:
            self.asked.add(config)
            settings = cal_mod._config_settings(config, pin, graph_opt, precision)
            run = executed_graph(graph, settings)
            out[config] = {
                op_key(run, n): [self.model.op_ns(run, n, settings.intra_op, settings.operator,
                                                  settings.library, settings.pool), 1.0, 0.0]
                for n in run if n.op not in ALIAS_OPS}
            if loads is not None:
                loads[config] = 0.0
        return out

    def measure_executor(self, cores: int, **kw: object) -> ExecutorCosts:
        return ExecutorCosts()

    def measure_instances(self, graph: Graph, instances: int, threads: int,
                          **kw: object) -> float:
        return 1.1

    def measure_wait(self, teams: Sequence[int], **kw: object) -> WaitCosts:
        """Every policy at every team size: a region costs more the larger
        the team (a tree barrier), and more after a gap."""
        self.asked.add("wait")
        regions = {k: {t: (base * math.log2(2 * t), 10 * base * math.log2(2 * t))
                       for t in teams}
                   for k, base in (("default", 500.0), ("passive", 5000.0),
                                   ("20000", 600.0), ("active", 400.0))}
        return WaitCosts(gaps=(0.0, 1e6), regions=regions)


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Make this machine the synthetic topology given; returns the stubs."""

    def become(description: str) -> Stubs:
        topo = topology_mod.topology(description)
        real = topology_mod.topology

        def fake(synthetic: str | None = None):  # type: ignore[no-untyped-def]
            return topo if synthetic is None else real(synthetic)

        # The function, and where the recommender holds it under its names.
        monkeypatch.setattr(topology_mod, "topology", fake)
        monkeypatch.setattr(cal_mod, "topology", fake)
        monkeypatch.setattr(modelchoice, "load", fake)
        monkeypatch.setenv("PYPARBENCH_CACHE", str(tmp_path / description.replace(" ", "_")))
        sockets = max(1, len(topo.packages))
        stubs = Stubs(max(1, allowed_cores(topo) // sockets))
        for name in ("measure_graph", "measure_executor", "measure_instances", "measure_wait"):
            monkeypatch.setattr(cal_mod, name, getattr(stubs, name))
        return stubs

    return become


@pytest.mark.parametrize("description", TOPOLOGIES)
def test_calibrated_recommendations_on_every_machine_size(machine, description: str) -> None:  # type: ignore[no-untyped-def]
    stubs = machine(description)
    cores = allowed_cores(topology_mod.topology())
    for name in DEFAULT_MODELS:
        for batch in (1, 8, 16):
            rec = recommend(build(name, batch), verify=0)
            assert rec.model == "calibrated", rec.model_description
            assert rec.topology == "this machine"
            # Every candidate and preset was predicted.
            assert rec.candidates and all(p.latency_ns > 0 for p in rec.candidates)
            assert set(rec.presets) == {"tensorflow", "intel", "tftuner"}
            assert all(p.latency_ns > 0 for p in rec.presets.values())
            assert rec.settings.threads <= cores
    assert stubs.asked, "the stubs were never asked: the calibrated branch was not taken"
