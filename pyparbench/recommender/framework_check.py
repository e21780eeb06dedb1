"""A recommendation checked in the framework the user runs
(``recommend --framework``).

The recommender's best predicted candidates (the recommended setting first,
then the next best within :data:`~pyparbench.recommender.decision.MARGIN` of
it, :data:`~pyparbench.recommender.decision.TOP` in all, as pyparbench's own
verification picks them), each translated into the framework's knobs by
:func:`~pyparbench.frameworks.mapping.map_settings` (the mapping the
deployment text gives), are measured in that framework beside two
references: the framework as it comes (no knob set, every CPU: a user's
``python serve.py``, at fp32) and Intel's preset translated the same way
(at fp32, and for a bf16 recommendation at bf16 too: "intel bf16"). Every
contender runs in a fresh process pinned to its CPUs, all of them taking
turns run by run (:func:`~pyparbench.frameworks.lockstep.run_lockstep`),
so that a slow spell of a shared machine falls on every contender alike;
the answer is the contender measured fastest, read in pairs as the
recommender's own verification reads its rounds (the recommended setting,
unless another ran faster by more than
:data:`~pyparbench.recommender.decision.SWITCH` in the median of the
per-step ratios and in at least
:data:`~pyparbench.recommender.decision.CONSISTENT` of the steps), with its
paired ratio against each other one and that ratio's distribution-free
interval.

Candidates that map onto the same knobs in this framework are measured
once (the first, best predicted, stands for them). A candidate with
several instances is left out, with the reason: a framework process runs
one copy of the model.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyparbench.child_process import child_cpus
from pyparbench.frameworks.lockstep import Contender, LockstepResult, run_lockstep
from pyparbench.frameworks.mapping import (
    FRAMEWORKS,
    OPENVINO_PRESETS,
    check_mode,
    map_settings,
)
from pyparbench.frameworks.spec import ModelRef, not_applicable
from pyparbench.recommender.decision import (
    CONSISTENT,
    SWITCH,
    TOP,
    switch_to,
    within_margin,
)
from pyparbench.recommender.types import Recommendation
from pyparbench.settings import Settings, preset

__all__ = [
    "DEFAULTS",
    "INTEL",
    "PACKAGES",
    "FrameworkCheck",
    "Measured",
    "check_in_framework",
    "check_installed",
    "contenders_for",
]

DEFAULTS, INTEL, RECOMMENDED = "defaults", "intel", "recommended"
# The modules each framework's run imports, and the pip package that installs each.
PACKAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "tensorflow": (("tensorflow", "tensorflow-cpu==2.21.0"),),
    "torch": (("torch", "torch"),),
    "onnxruntime": (("onnxruntime", "onnxruntime"), ("onnx", "onnx")),
    "openvino": (("openvino", "openvino"), ("onnx", "onnx")),
}


def check_installed(framework: str) -> None:
    """Nothing if ``framework``'s packages can be imported (found, not
    imported: a framework is only imported in its own child).

    Raises
    ------
    ValueError
        An unknown framework, or one line naming what to install.
    """
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; valid: {', '.join(FRAMEWORKS)}")
    missing = [pip for module, pip in PACKAGES[framework]
               if importlib.util.find_spec(module) is None]
    if missing:
        raise ValueError(f"{framework} is not installed: pip install {' '.join(missing)} "
                         "(or pip install 'pyparbench[frameworks]')")


@dataclass(frozen=True)
class Measured:
    """One contender's figures: its median over the lockstep steps (ns),
    and its paired ratio against the fastest (its time over the fastest's,
    median and interval; 1 for the fastest itself)."""

    label: str
    setting: str
    median_ns: float
    vs_fastest: float
    low: float
    high: float
    knobs: dict[str, Any]
    env: dict[str, str]
    cpus: list[int] | None
    reported: dict[str, Any]
    settings: Settings | None = None  # None: the framework's defaults

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "setting": self.setting,
                "settings": None if self.settings is None else self.settings.as_dict(),
                "median_ms": self.median_ns / 1e6,
                "vs_fastest": {"median": self.vs_fastest, "low": self.low, "high": self.high},
                "knobs": self.knobs, "env": self.env, "cpus": self.cpus,
                "reported": self.reported}


@dataclass
class FrameworkCheck:
    """The contenders measured in one framework, and which was fastest.

    ``regret``: per other contender, the fastest one's time over that
    contender's, read in pairs (median, interval; below 1: the fastest is
    faster); ``left_out``: candidates not measured, and why; ``errors``:
    contenders that failed (a knob the framework refused: its message)."""

    framework: str
    mode: str
    model: str
    batch: int
    steps: int
    confidence: float
    measured: list[Measured]
    fastest: str
    regret: dict[str, dict[str, float]]
    left_out: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"framework": self.framework, "mode": self.mode, "model": self.model,
                "batch": self.batch, "steps": self.steps, "confidence": self.confidence,
                "fastest": self.fastest, "contenders": [m.as_dict() for m in self.measured],
                "regret": self.regret, "left_out": self.left_out, "errors": self.errors}

    def format(self) -> str:
        lines = [(f"  in {self.framework} ({self.mode}), {self.steps} steps in lockstep, "
                  "each contender in a fresh process pinned to its CPUs:")]
        width = max(len(m.label) for m in self.measured)
        for m in self.measured:
            ratio = ("fastest" if m.label == self.fastest else
                     f"x{m.vs_fastest:.3f} [{m.low:.3f}, {m.high:.3f}] of the fastest's time")
            lines.append(f"    {m.label:{width}s}  {m.median_ns / 1e6:8.4f} ms  {ratio}  "
                         f"({m.setting})")
        win = next(m for m in self.measured if m.label == self.fastest)
        lines.append(f"  fastest in {self.framework}: {self.fastest} ({win.setting}); the "
                     "recommended setting stands unless another ran more than "
                     f"{SWITCH:.0%} faster in pairs, in {CONSISTENT:.0%} of the steps")
        level = f"{self.confidence:.0%}"
        for other, r in self.regret.items():
            lines.append(f"    its regret against {other}: x{r['median']:.3f} "
                         f"[{r['low']:.3f}, {r['high']:.3f}] ({level} interval of its time "
                         "over theirs, read in pairs; above 1: slower)")
        for label, why in self.left_out.items():
            lines.append(f"  not measured: {label}: {why}")
        for label, why in self.errors.items():
            lines.append(f"  failed: {label}: {why}")
        return "\n".join(lines)


def _key(framework: str, mode: str, s: Settings, cpus: list[int] | None) -> str:
    """What a setting becomes in the framework: equal keys, equal runs."""
    cfg = map_settings(framework, s, mode, cpus)
    return json.dumps([cfg.env, cfg.knobs], sort_keys=True)


def contenders_for(rec: Recommendation, framework: str, mode: str | None = None, *,
                   top: int | None = None
                   ) -> tuple[list[Contender], dict[str, Settings], dict[str, str]]:
    """The contenders of ``rec`` in ``framework``: its defaults, Intel's
    preset and the ``top`` best candidates (see the module docstring); the
    settings behind each label; and the candidates left out, with why."""
    mode = check_mode(framework, mode)
    top = TOP if top is None else top
    close = [p for p in within_margin(rec.predicted, rec.candidates, rec.objective)
             if p.settings.with_(name="") != rec.settings.with_(name="")]
    picked: dict[str, Settings] = {}
    left_out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for s in [rec.settings, *(p.settings for p in close)]:
        if len(picked) >= top:
            break
        label = RECOMMENDED if not picked else f"candidate {len(picked) + 1}"
        if s.instances > 1:
            left_out[s.label()] = (f"{s.instances} instances: a framework process runs one "
                                   "copy of the model (deploy them as the launch lines say)")
            continue
        key = _key(framework, mode, s, child_cpus(s))
        if key in seen:
            continue  # the same knobs as a better predicted candidate
        seen[key] = label
        picked[label] = s.with_(name="")
    intel = preset("intel", None, None)
    picked[INTEL] = intel
    if rec.settings.precision != "fp32":
        # Intel's advice at the recommendation's precision too: against it
        # the gain is the setting's, against the fp32 runs (Intel's, the
        # defaults) the setting's and the precision's together.
        picked[f"{INTEL} {rec.settings.precision}"] = intel.with_(
            precision=rec.settings.precision)
    contenders = [Contender(framework, mode, s, name=label) for label, s in picked.items()]
    contenders.append(Contender(framework, mode, Settings(), name=DEFAULTS, defaults=True))
    if framework == "openvino":  # its own tuner, a preset to beat
        contenders += [Contender(framework, mode, Settings(), name=p, defaults=True, preset=p)
                       for p in OPENVINO_PRESETS]
    return contenders, picked, left_out


def check_in_framework(rec: Recommendation, model: str, framework: str, *,
                       mode: str | None = None, steps: int = 30, warmup: int = 3,
                       top: int | None = None, confidence: float = 0.95,
                       timeout: float = 600.0,
                       references: Mapping[str, Settings] | None = None) -> FrameworkCheck:
    """``rec`` (recommended on this machine for registered model or file
    ``model`` at its batch) checked in ``framework``: see the module docstring.
    ``references``: more settings to measure beside the defaults and Intel's
    preset (by label, e.g. the study's tuner), translated the same way.

    Raises
    ------
    ValueError
        An unknown framework or mode, one not installed, TensorFlow or
        PyTorch on an ONNX file (:data:`~pyparbench.frameworks.spec.NO_MODULE`),
        bad counts; no candidate could be measured (each failure's message,
        a refused knob named).
    """
    check_installed(framework)
    mode = check_mode(framework, mode)
    ref = ModelRef(model, rec.batch)
    why = not_applicable(framework, ref.to_spec())
    if why is not None:
        raise ValueError(why)
    contenders, settings, left_out = contenders_for(rec, framework, mode, top=top)
    for label, extra in (references or {}).items():
        if label in settings or label == DEFAULTS or label in OPENVINO_PRESETS:
            raise ValueError(f"reference label {label!r} is taken")
        settings[label] = extra.with_(name="")
        at = next(i for i, c in enumerate(contenders) if c.defaults)
        contenders.insert(at, Contender(framework, mode, settings[label], name=label))
    lock = run_lockstep(ref, contenders, steps=steps, warmup=warmup, timeout=timeout)
    ok = [c.label for c in contenders if c.label not in lock.errors]
    baselines = (DEFAULTS, INTEL, f"{INTEL} {rec.settings.precision}", *OPENVINO_PRESETS)
    if lock.steps == 0 or not any(lab not in baselines for lab in ok):
        why_not = "; ".join(f"{k}: {v}" for k, v in lock.errors.items()) or "no step completed"
        raise ValueError(f"nothing measured in {framework}: {why_not}")
    return _summarise(lock, contenders, settings, framework, mode, model, rec.batch,
                      confidence, left_out)


def _summarise(lock: LockstepResult, contenders: Sequence[Contender],
               settings: dict[str, Settings], framework: str, mode: str, model: str,
               batch: int, confidence: float, left_out: dict[str, str]) -> FrameworkCheck:
    ok = [c for c in contenders if c.label not in lock.errors]
    medians = {c.label: statistics.median(lock.ns[c.label]) for c in ok}
    # As the recommender's verification switches (the median of the
    # per-step ratios, the share of the steps a contender was faster in).
    first = RECOMMENDED if RECOMMENDED in medians else min(medians, key=medians.__getitem__)
    ratios = (lock.ratio(c.label, first, confidence) for c in ok if c.label != first)
    fastest = switch_to(first, ((r.a, r.median, r.a_faster / r.steps) for r in ratios))
    regret: dict[str, dict[str, float]] = {}
    measured = []
    for c in ok:
        run = lock.answers[c.label]
        reported = dict(run.reported)
        info = run.jobs[0].info if run.jobs else {}
        if "onnx_file" in info:  # ONNX Runtime ran the user's file itself
            reported["onnx_file"] = info["onnx_file"]
        if c.label == fastest:
            vs, lo, hi = 1.0, 1.0, 1.0
        else:
            # Its time over the fastest's; the fastest's regret is the inverse.
            r = lock.ratio(fastest, c.label, confidence)
            vs, lo, hi = r.median, r.low, r.high
            regret[c.label] = {"median": 1 / r.median, "low": 1 / r.high, "high": 1 / r.low,
                               "fastest_faster_in": r.a_faster, "steps": r.steps}
        setting = (settings[c.label].label() if not c.defaults
                   else "openvino's own defaults at the precision asked "
                        f"({mode}), every CPU" if c.preset is None and framework == "openvino"
                   else f"{framework}'s own defaults: no knob set, every CPU" if c.preset is None
                   else f"OpenVINO's {c.preset} preset: "
                        f"{run.mapping.get('knobs') or 'no property set'}, every CPU")
        measured.append(Measured(c.label, setting, medians[c.label], vs, lo, hi,
                                 dict(run.mapping.get("knobs", {})), dict(run.env),
                                 run.mapping.get("cpus"), reported,
                                 None if c.defaults else settings[c.label]))
    measured.sort(key=lambda m: (m.label != fastest, m.vs_fastest))
    return FrameworkCheck(framework, mode, model, batch, lock.steps, confidence, measured,
                          fastest, regret, left_out, dict(lock.errors))
