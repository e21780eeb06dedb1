"""The built-in default suite of ``pyparbench run``: a few models of each
kind, each at a small and a larger batch, under the presets (the study's
guidelines and the frameworks' defaults) and a sweep of the Scheduler,
Operator and Library knobs that fits the machine without oversubscribing it."""

from __future__ import annotations

from collections.abc import Sequence

from pyparbench.grid import ALL, Grid, expand_all
from pyparbench.names import PRESETS
from pyparbench.runner import Config
from pyparbench.settings import Settings, preset

__all__ = ["DEFAULT_BATCHES", "DEFAULT_MODELS", "SWEEP", "default_suite", "sweep"]

DEFAULT_MODELS = ("resnet50", "googlenet", "mlp-512", "dlrm-kaggle", "transformer")
DEFAULT_BATCHES = (1, 8)


# The sweep around the presets, one knob at a time: every inter_op x intra_op
# split of the cores (Scheduler), unpinned, framework operator mode on Eigen's
# pool (Operator), and the Eigen math library (Library).
SWEEP = (
    Grid({"affinity": ("none",)}),
    Grid({"inter_op": ALL, "affinity": ("compact",)}),
    Grid({"operator": ("framework",), "pool": ("eigen",)}),
    Grid({"library": ("eigen",)}),
)


def sweep(cores: int) -> list[Settings]:
    """The settings of :data:`SWEEP` on ``cores`` cores."""
    return expand_all(SWEEP, cores)


def default_suite(models: Sequence[str] = DEFAULT_MODELS,
                  batches: Sequence[int] = DEFAULT_BATCHES, *, repeats: int = 5,
                  cores: int | None = None) -> list[Config]:
    """Every (model, batch) under the presets and the sweep, presets first."""
    from pyparbench.models import build
    from pyparbench.settings import allowed_cores
    from pyparbench.threading.topology import topology

    topo = topology()
    n = cores or allowed_cores(topo)
    configs = []
    for model in models:
        for batch in batches:
            graph = build(model, batch)
            chosen = [preset(p, topo, graph) for p in PRESETS]
            for s in sweep(n):
                if s not in chosen:
                    chosen.append(s)
            configs += [Config(model, batch, s, repeats=repeats) for s in chosen]
    return configs
