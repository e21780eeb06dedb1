"""The built-in default suite of ``pyparbench run``: a few models of each
kind, each at a small and a larger batch, under the presets (the study's
guidelines and the frameworks' defaults) and a sweep of the Scheduler,
Operator and Library knobs that fits the machine without oversubscribing it."""

from __future__ import annotations

from collections.abc import Sequence

from pyparbench.runner import Config
from pyparbench.settings import Settings, preset

__all__ = ["DEFAULT_BATCHES", "DEFAULT_MODELS", "default_suite", "sweep"]

DEFAULT_MODELS = ("resnet50", "googlenet", "mlp-512", "dlrm-kaggle", "transformer")
DEFAULT_BATCHES = (1, 8)


def sweep(cores: int) -> list[Settings]:
    """inter_op x intra_op = cores (and all on one worker), sync and async,
    library and framework operator mode, and the other math libraries."""
    out = [Settings(intra_op=cores)]
    for inter in range(2, cores + 1):
        if cores % inter == 0:
            out.append(Settings(scheduler="async", inter_op=inter, intra_op=cores // inter,
                                affinity="compact"))
    out.append(Settings(operator="framework", intra_op=cores, pool="eigen"))
    out.append(Settings(intra_op=cores, library="eigen"))
    if cores > 1:
        out.append(Settings(intra_op=cores, affinity="compact"))
    return out


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
            chosen = [preset(p, topo, graph) for p in ("tensorflow", "intel", "tftuner")]
            for s in sweep(n):
                if s not in chosen:
                    chosen.append(s)
            configs += [Config(model, batch, s, repeats=repeats) for s in chosen]
    return configs
