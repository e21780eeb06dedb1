"""Starting framework child processes and reading their answers.

Each run is a fresh ``python -P -m pyparbench.frameworks.child`` started as
every measuring child is (:mod:`pyparbench.child_process`: a neutral working
directory, pinned to its CPUs before it starts, in its own session so that a
timeout ends it and anything it started), with the framework's environment
(thread knobs read at import, the native core kept out of its process). A
crash, a hang past the time limit, an import failure or a job's exception
comes back as an error that names the configuration, with the status
every child's failure gets (:class:`pyparbench.child_process.ChildFailed`:
"timeout" for the hang, "error" for the others); nothing raises out of
:func:`run_child`, which returns a
:class:`~pyparbench.frameworks.answer.FrameworkRun` (the child's answer
read once, :mod:`pyparbench.frameworks.answer`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from pyparbench.frameworks.answer import ChildAnswer, FrameworkRun, RunStatus
from pyparbench.frameworks.child import HOOK_ENV
from pyparbench.frameworks.mapping import (
    FRAMEWORKS,
    check_framework,
    default_knobs,
    map_settings,
    precision_mode,
    preset_knobs,
)
from pyparbench.frameworks.precision import unsupported
from pyparbench.frameworks.spec import GraphLike, describe, not_applicable, to_spec
from pyparbench import child_process
from pyparbench.child_process import ChildFailed, child_cpus
from pyparbench.resultfiles.values import ResultFileError
from pyparbench.settings import Settings

__all__ = [
    "TARGETS",
    "Job",
    "describe_config",
    "framework_outputs",
    "run_child",
    "run_framework",
]

TARGETS = (*FRAMEWORKS, "native")
# What a framework's child runs (python -m).
CHILD_MODULE = "pyparbench.frameworks.child"


@dataclass(frozen=True)
class Job:
    """One graph to run in a child.

    ``repeats`` timed runs after ``warmup``; ``outputs``: return one run's
    outputs; ``profile``: iterations under the framework's profiler (0:
    none); ``kernel_repeats``: natively, time each node as an isolated
    prepared kernel (0: no); ``inline_repeats``: natively, time each node's
    kernel as the plan prepared it, alone in a C++ loop (0: no), of
    ``inline_inner`` calls per repeat; ``cache_repeats``: natively, time
    each node's isolated kernel one call at a time warm, with the chain's
    data between calls and (``cold_repeats``) with every cache flushed
    (:mod:`pyparbench.frameworks.native.cold`; 0: no);
    ``profile_parser``: TensorFlow's trace reader, "trace_json" or "xplane".
    """

    graph: GraphLike
    repeats: int = 20
    warmup: int = 3
    input_seed: int = 0
    outputs: bool = False
    profile: int = 0
    kernel_repeats: int = 0
    profile_parser: str = "trace_json"
    inline_repeats: int = 0
    inline_inner: int = 1000
    cache_repeats: int = 0
    cold_repeats: int = 0

    def to_request(self) -> dict[str, Any]:
        for f in ("repeats", "warmup", "profile", "kernel_repeats", "inline_repeats",
                  "cache_repeats", "cold_repeats"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{f} must be an integer >= 0, got {v!r}")
        if isinstance(self.inline_inner, bool) or not isinstance(self.inline_inner, int) \
                or self.inline_inner < 1:
            raise ValueError(f"inline_inner must be an integer >= 1, got {self.inline_inner!r}")
        return {"graph": to_spec(self.graph), "repeats": self.repeats, "warmup": self.warmup,
                "input_seed": self.input_seed, "outputs": self.outputs,
                "profile": self.profile, "kernel_repeats": self.kernel_repeats,
                "profile_parser": self.profile_parser, "inline_repeats": self.inline_repeats,
                "inline_inner": self.inline_inner, "cache_repeats": self.cache_repeats,
                "cold_repeats": self.cold_repeats}


def describe_config(framework: str, mode: str | None, settings: Settings,
                    graphs: Sequence[Mapping[str, Any]]) -> str:
    """'torch (script) on resnet50 batch 1 under sync 1x2 library/onednn/openmp none'."""
    what = ", ".join(describe(g) for g in graphs[:3])
    if len(graphs) > 3:
        what += f" and {len(graphs) - 3} more"
    m = f" ({mode})" if mode else ""
    return f"{framework}{m} on {what} under {settings.label()}"


@dataclass(frozen=True)
class ChildPlan:
    """What one child is asked to run, and how it is started."""

    framework: str
    mode: str | None
    settings: Settings
    request: dict[str, Any]
    env: dict[str, str]
    cpus: list[int] | None
    label: str
    base: dict[str, Any]  # config, mapping, not_applicable, env: every answer carries them
    python: str | None = None  # another install's interpreter (None: this one)

    def run(self, status: RunStatus, error: str = "", stderr: str = "",
            answer: ChildAnswer | None = None) -> FrameworkRun:
        """What became of this child: ``status``, with what every run carries."""
        b = self.base
        return FrameworkRun(status, b["config"], b["mapping"], b["not_applicable"], b["env"],
                            error, stderr, answer)


def plan_child(framework: str, jobs: Sequence[Job], settings: Settings | None = None,
               mode: str | None = None, *, python: str | None = None,
               defaults: bool = False, preset: str | None = None,
               **request_extra: Any) -> ChildPlan:
    """The request, environment and CPUs of a child running ``jobs`` (in
    ``python``, another install's interpreter, if given). ``defaults``: the
    framework as it comes, no knob set, no environment of ours, every CPU
    (``settings`` then only labels the run); with ``preset``, one of
    OpenVINO's own (:data:`~pyparbench.frameworks.mapping.OPENVINO_PRESETS`:
    its hint, its tuner picking the rest)."""
    if framework not in TARGETS:
        raise ValueError(f"unknown framework {framework!r}; valid: {', '.join(TARGETS)}")
    settings = settings if settings is not None else Settings()
    if not isinstance(settings, Settings):
        raise TypeError(f"settings must be a pyparbench Settings, got {settings!r}")
    if not jobs:
        raise ValueError("a framework child needs at least one job")
    requests = [j.to_request() for j in jobs]
    cpus = None if defaults else child_cpus(settings)
    if defaults:
        if framework == "native":
            raise ValueError("defaults=True is for a framework; native runs a Settings")
        mode = precision_mode(framework, mode, settings.precision)
        if framework in ("tensorflow", "torch") and settings.precision != "fp32":
            raise ValueError(f"{framework} under its own defaults runs fp32: a run at "
                             f"precision {settings.precision!r} sets its bf16 mode (no defaults)")
        if preset is not None and framework != "openvino":
            raise ValueError(f"preset {preset!r} is OpenVINO's; {framework} has none")
        knobs: dict[str, Any] = (default_knobs(framework, mode) if preset is None
                                 else preset_knobs(preset, mode))
        extra: dict[str, str] = {}
        if framework == "tensorflow":
            extra["TF_CPP_MIN_LOG_LEVEL"] = "2"  # the child's stderr: errors only
        mapping: dict[str, Any] = {"framework": framework, "mode": mode, "defaults": True,
                                   "cpus": None, "env": {}, "knobs": knobs}
        not_applicable: list[dict[str, Any]] = []
        request_extra["defaults"] = True
    elif framework == "native":
        mode = None
        knobs = {}
        extra = {}
        not_applicable = []
        mapping = {"framework": "native", "cpus": cpus}
    else:
        mode = precision_mode(framework, mode, settings.precision)
        cfg = map_settings(framework, settings, mode, cpus)
        knobs, extra = cfg.knobs, dict(cfg.env)
        if framework == "tensorflow":
            extra["TF_CPP_MIN_LOG_LEVEL"] = "2"  # the child's stderr: errors only
        mapping = cfg.as_dict()
        not_applicable = mapping["not_applicable"]
    config = {"framework": framework, "mode": mode, "settings": settings.as_dict(),
              "graphs": [describe(r["graph"]) for r in requests], "cpus": cpus}
    label = describe_config(framework, mode, settings, [r["graph"] for r in requests])
    if defaults:
        label = label.rsplit(" under ", 1)[0] + (" under its own defaults" if preset is None
                                                 else f" under its preset {preset}")
    env = child_process.child_env(settings, core=framework == "native", extra=extra)
    shown = dict(extra)
    if HOOK_ENV in env:
        shown[HOOK_ENV] = env[HOOK_ENV]
    base: dict[str, Any] = {"config": config, "mapping": mapping,
                            "not_applicable": not_applicable, "env": shown}
    request = {"framework": framework, "mode": mode, "settings": settings.as_dict(),
               "knobs": knobs, "cpus": cpus, "jobs": requests, **request_extra}
    if python is not None:
        label += f" in {python}"
        base["config"]["python"] = python
    return ChildPlan(framework, mode, settings, request, env, cpus, label, base, python)


def start_child(plan: ChildPlan, **session: Any) -> child_process.Session:
    """A session with the child of ``plan``, pinned to its CPUs before
    anything is imported and sent its request (``session``: the
    :class:`~pyparbench.child_process.Session`'s options).

    Raises
    ------
    ChildFailed
        The child could not be started.
    """
    s = child_process.Session.start(CHILD_MODULE, cpus=plan.cpus, env=plan.env,
                                    python=plan.python, **session)
    s.send(plan.request)
    return s


def child_record(plan: ChildPlan, answer: Callable[[], dict[str, Any]]) -> FrameworkRun:
    """What became of the child of ``plan``: its ``answer`` (a one-shot
    call's or a session's last word) read once, each failed job's error
    naming the configuration; or, where ``answer`` raises ChildFailed or
    does not read, its status ("error" or "timeout") with the error naming
    the configuration."""
    label = plan.label
    try:
        got = ChildAnswer.parse("the child's answer", answer())
    except ChildFailed as e:
        return plan.run(e.status, f"{label}: {e.error}", e.stderr)
    except ResultFileError as e:
        return plan.run("error", f"{label}: {e}")
    mode = f" ({plan.mode})" if plan.mode else ""
    jobs = tuple(j if j.ok else replace(
        j, error=f"{plan.framework}{mode} on {j.graph} under {plan.settings.label()}: {j.error}")
        for j in got.jobs)
    return plan.run("ok", answer=replace(got, jobs=jobs))


def run_child(framework: str, jobs: Sequence[Job], settings: Settings | None = None,
              mode: str | None = None, *, timeout: float = 600.0,
              python: str | None = None, preset: str | None = None) -> FrameworkRun:
    """Run ``jobs`` in one fresh child of ``framework`` (or "native"), in
    ``python`` (another install's interpreter) when given; with ``preset``,
    under one of OpenVINO's own presets in place of ``settings``
    (:data:`~pyparbench.frameworks.mapping.OPENVINO_PRESETS`: its hint, its
    tuner picking the rest, on every CPU).

    Returns
    -------
    FrameworkRun
        ``status`` "ok" (``answer``: the reported thread settings, each
        job's answer), "error", "timeout" (it ran past ``timeout`` and was
        killed) or "not_applicable" (TensorFlow or PyTorch on an ONNX file,
        ONNX Runtime at bf16: nothing started, ``error`` says why), with ``error`` naming the
        configuration and ``stderr`` the end of the child's; always
        ``config``, ``mapping``, ``not_applicable`` and ``env``.

    Raises
    ------
    ValueError
        An unknown framework or mode; a Job with bad counts.
    """
    plan = plan_child(framework, jobs, settings, mode, python=python,
                      defaults=preset is not None, preset=preset)
    why = next((w for j in plan.request["jobs"] if (w := not_applicable(framework, j["graph"]))),
               None)
    if why is None and framework != "native":  # a precision it has no kernels for
        why = unsupported(framework, plan.settings.precision, plan.mode,
                          str(plan.request["jobs"][0]["graph"].get("model") or "") or None)
    if why is not None:  # nothing to start: status "not_applicable", why as the error
        return plan.run("not_applicable", f"{plan.label}: {why}")
    return child_record(plan, lambda: child_process.call(
        CHILD_MODULE, plan.request, cpus=plan.cpus, env=plan.env, timeout=timeout,
        python=plan.python))


def run_framework(graph: GraphLike, framework: str, settings: Settings | None = None, *,
                  mode: str | None = None, repeats: int = 20, warmup: int = 3,
                  profile: int = 0, outputs: bool = False, timeout: float = 600.0,
                  preset: str | None = None) -> FrameworkRun:
    """Run one graph in a fresh process of one framework and time it.

    Parameters
    ----------
    graph
        A :class:`~pyparbench.frameworks.spec.ModelRef`, a Graph or a spec.
    framework
        "tensorflow", "torch", "onnxruntime" (or "native": pyparbench's executor).
    settings
        pyparbench settings, mapped onto the framework's knobs (see
        :mod:`pyparbench.frameworks.mapping`); default: one thread.
    mode
        The framework's mode (None: its default).
    repeats, warmup
        Timed runs and untimed runs before them.
    profile
        Iterations under the framework's profiler (0: none).
    outputs
        Include one run's outputs (numpy arrays, by output name).
    preset
        One of OpenVINO's own presets, run in place of ``settings`` (see
        :func:`run_child`).

    Returns
    -------
    FrameworkRun
        As :func:`run_child` returns it, its status "error" with the job's
        error where the child ran and the job failed; ``job`` holds the
        job's ``ns``, ``latency`` (median, quartiles, min, max in ns),
        ``info``, ``outputs()`` (with ``outputs``) and its other figures
        (``proc_audit``: threads that worked and their CPUs; ``kernels``
        with ``profile``); ``reported``: the thread settings the framework
        reports back.

    Raises
    ------
    ValueError
        An unknown framework or mode, or bad counts.
    """
    res = run_child(framework, [Job(graph, repeats=repeats, warmup=warmup, profile=profile,
                                    outputs=outputs)], settings, mode, timeout=timeout,
                    preset=preset)
    if res.ok and not res.job.ok:
        return replace(res, status="error", error=res.job.error)
    return res


def framework_outputs(graphs: Sequence[GraphLike], framework: str,
                      settings: Settings | None = None, *, mode: str | None = None,
                      input_seed: int = 0, timeout: float = 600.0
                      ) -> list[dict[str, npt.NDArray[np.float32]]]:
    """Each graph's outputs on ``graph.random_inputs(input_seed)``, computed
    by ``framework`` (or "native") in one fresh child.

    Raises
    ------
    ChildFailed
        The child or one of the graphs failed (``status`` "error" or
        "timeout"; the message names the configuration).
    ValueError
        An unknown framework or mode.
    """
    jobs = [Job(g, repeats=0, warmup=0, input_seed=input_seed, outputs=True) for g in graphs]
    if framework != "native":
        check_framework(framework)
    res = run_child(framework, jobs, settings, mode, timeout=timeout)
    if not res.ok:
        raise res.failure()
    out = []
    for job in res.jobs:
        if not job.ok:
            raise ChildFailed(job.error)
        out.append(job.outputs())
    return out
