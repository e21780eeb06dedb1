"""What the recommender returns: a setting's :class:`Prediction` and the
:class:`Recommendation` (the chosen setting, the presets' predictions, the
reasons), with how a figure is shown."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pyparbench.recommender.simulate import Simulation
from pyparbench.settings import Settings
from pyparbench.cpulist import cpu_str

__all__ = ["OBJECTIVES", "Prediction", "Recommendation", "format_ns", "format_value"]

OBJECTIVES = ("latency", "throughput")


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
    cpus
        The OS CPU numbers each instance of ``settings`` is pinned to on the
        topology (one list per instance: its workers' teams), as
        :func:`~pyparbench.settings.instance_cpus` places them.
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
    cpus: tuple[tuple[int, ...], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON-able (the 20 best candidates only)."""
        return {"graph": self.graph, "batch": self.batch, "topology": self.topology,
                "objective": self.objective, "settings": self.settings.as_dict(),
                "cpus": [list(c) for c in self.cpus],
                "label": self.settings.label(), "predicted": self.predicted.as_dict(),
                "presets": {k: v.as_dict() for k, v in self.presets.items()},
                "reasons": list(self.reasons), "model": self.model,
                "model_description": self.model_description,
                "candidates": [c.as_dict() for c in self.candidates[:20]],
                "calibration": self.calibration}

    def format(self) -> str:
        """Plain text for a terminal: settings, predictions, reasons."""
        s = self.settings
        unit = format_value(self.predicted, self.objective)
        aff = s.affinity if isinstance(s.affinity, str) else "explicit"
        lines = [(f"{self.graph} (batch {self.batch}) on {self.topology}: "
                  f"recommended for {self.objective}"),
                 (f"  scheduler={s.scheduler} inter_op={s.inter_op} intra_op={s.intra_op} "
                  f"operator={s.operator} library={s.library} pool={s.pool} "
                  f"affinity={aff} smt={s.smt} instances={s.instances} "
                  f"omp_wait={'default' if s.omp_wait is None else s.omp_wait}"),
                 *self._cpu_lines(),
                 f"  predicted: {unit}  [{self.model} cost model]", "  presets (predicted):"]
        for name, p in self.presets.items():
            lines.append(f"    {name:10s} {p.settings.label():58s} "
                         f"{format_value(p, self.objective)}"
                         f"  (ours {self.predicted.better(p, self.objective):.2f}x)")
        lines.append("  why:")
        lines += [f"    - {r}" for r in self.reasons]
        return "\n".join(lines)


    def _cpu_lines(self) -> list[str]:
        """The CPUs of each instance, compactly (``0-27,56-83``)."""
        if not self.cpus:
            return []
        if len(self.cpus) == 1:
            return [f"  cpus: {cpu_str(self.cpus[0])}"]
        return ["  cpus: " + "; ".join(f"instance {i}: {cpu_str(c)}"
                                       for i, c in enumerate(self.cpus))]


def format_value(p: Prediction, objective: str) -> str:
    """A prediction's figure for the objective, with its unit."""
    if objective == "latency":
        return f"{p.latency_ns / 1e6:.4g} ms"
    return f"{p.throughput:.4g} samples/s ({p.latency_ns / 1e6:.4g} ms per instance batch)"


def format_ns(ns: float) -> str:
    """A duration in ms or us, three digits."""
    return f"{ns / 1e6:.3g} ms" if ns >= 1e5 else f"{ns / 1e3:.3g} us"
