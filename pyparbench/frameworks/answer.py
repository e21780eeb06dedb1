"""What a framework's child answers, and what a framework run comes to,
read once where they arrive.

A child (:mod:`pyparbench.frameworks.child`) prints one JSON line: the
framework's reported settings and one entry per job. That line is checked
here with the bounds a result file's values get
(:mod:`pyparbench.resultfiles.values`) and becomes a :class:`ChildAnswer`
of :class:`JobAnswer` values; a run, whatever became of its child, is a
:class:`FrameworkRun`. Callers read attributes; :meth:`FrameworkRun.as_dict`
gives the run as one JSON-able record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from pyparbench.child_process import ChildFailed
from pyparbench.frameworks.child import decode
from pyparbench.resultfiles.values import (
    ResultFileError,
    durations,
    get_choice,
    get_text,
    int_ok,
    is_number,
    show,
)

__all__ = ["ChildAnswer", "FrameworkRun", "JobAnswer", "RunStatus"]

RunStatus = Literal["ok", "error", "timeout", "not_applicable"]
# The keys a job's answer holds beside its figures.
_JOB_KEYS = ("graph", "status", "error")


def _object(where: str, d: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``d[key]`` if it is there (a JSON object), else an empty one."""
    v = d.get(key, {})
    if not isinstance(v, dict):
        raise ResultFileError(where, f"{key} must be an object, got {show(v)}")
    return v


@dataclass(frozen=True)
class JobAnswer:
    """One job's answer: the graph it ran, whether it ran (``ok``; else
    ``error``, naming the configuration once the parent has read it), its
    timed runs (``ns``), ``info`` (what the runtime says of the model: ONNX
    Runtime's session options, the file it ran), and its other figures as
    the child sent them (``latency``, ``kernels``, ``kernel_ns``,
    ``inline_ns``, ``cache_ns``, ``proc_audit``, ``native_audit``,
    ``outputs`` encoded, ...)."""

    graph: str
    ok: bool
    error: str = ""
    ns: tuple[float, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, where: str, raw: Any) -> JobAnswer:
        """A job's entry of a child's answer.

        Raises
        ------
        ResultFileError
            Not an object, or a field out of its bounds (named).
        """
        if not isinstance(raw, dict):
            raise ResultFileError(where, f"a job must be an object, got {show(raw)}")
        ok = get_choice(where, raw, "status", ("ok", "error")) == "ok"
        error = "" if ok else raw["error"] if isinstance(raw.get("error"), str) else ""
        if not ok and not error:
            raise ResultFileError(where, f"a failed job needs its error text, got "
                                         f"{show(raw.get('error'))}")
        ns = durations(where, raw["ns"], "ns", scale=1.0) if "ns" in raw else ()
        figures = {k: v for k, v in raw.items() if k not in (*_JOB_KEYS, "ns", "info")}
        return cls(get_text(where, raw, "graph", "graph"), ok, error, ns,
                   _object(where, raw, "info"), figures)

    @property
    def status(self) -> Literal["ok", "error"]:
        return "ok" if self.ok else "error"

    @property
    def latency(self) -> dict[str, float]:
        """Median, quartiles, min and max of ``ns`` (empty: no timed run)."""
        got = self.figures.get("latency")
        return dict(got) if isinstance(got, dict) else {}

    def outputs(self) -> dict[str, npt.NDArray[np.float32]]:
        """Its outputs by name, decoded (empty: none asked for)."""
        encoded = self.figures.get("outputs")
        return {k: decode(v) for k, v in encoded.items()} if isinstance(encoded, dict) else {}

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"graph": self.graph, **self.figures, "info": self.info,
                               "status": self.status}
        if self.ns:
            out["ns"] = list(self.ns)
        if not self.ok:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class ChildAnswer:
    """A framework child's answer: the framework and mode it ran, the
    seconds its import took, the thread settings it reports, whether the
    native core was loaded (it never should be in a framework's child),
    the CPUs it was allowed, and each job's answer."""

    framework: str
    mode: str | None
    import_s: float | None
    reported: dict[str, Any]
    core_loaded: bool
    process_cpus: tuple[int, ...]
    jobs: tuple[JobAnswer, ...]

    @classmethod
    def parse(cls, where: str, raw: dict[str, Any]) -> ChildAnswer:
        """The answer line a child printed, as JSON.

        Raises
        ------
        ResultFileError
            A field out of its bounds (named), no job, or a status other than "ok".
        """
        get_choice(where, raw, "status", ("ok",))
        mode = raw.get("mode")
        if mode is not None and not isinstance(mode, str):
            raise ResultFileError(where, f"mode must be a string or null, got {show(mode)}")
        import_s = raw.get("import_s")
        if import_s is not None and not is_number(import_s):
            raise ResultFileError(where, f"import_s must be a number, got {show(import_s)}")
        cpus = raw.get("process_cpus", [])
        if not isinstance(cpus, list) or not all(int_ok(c, 0) for c in cpus):
            raise ResultFileError(where, f"process_cpus must be CPU numbers, got {show(cpus)}")
        jobs = raw.get("jobs")
        if not isinstance(jobs, list) or not jobs:
            raise ResultFileError(where, f"jobs must be a list of jobs, got {show(jobs)}")
        return cls(get_text(where, raw, "framework", "framework"), mode,
                   None if import_s is None else float(import_s), _object(where, raw, "reported"),
                   raw.get("core_loaded") is True, tuple(int(c) for c in cpus),
                   tuple(JobAnswer.parse(f"{where}: job {i + 1}", j) for i, j in enumerate(jobs)))

    def as_dict(self) -> dict[str, Any]:
        return {"framework": self.framework, "mode": self.mode, "import_s": self.import_s,
                "reported": self.reported, "core_loaded": self.core_loaded,
                "process_cpus": list(self.process_cpus),
                "jobs": [j.as_dict() for j in self.jobs]}


@dataclass(frozen=True)
class FrameworkRun:
    """What became of one framework child: ``status`` "ok" (``answer``
    holds the child's answer), "error" or "timeout" (as
    :class:`~pyparbench.child_process.ChildFailed` types a failed child;
    ``error`` names the configuration, ``stderr`` is the end of the
    child's), or "not_applicable" (TensorFlow or PyTorch on an ONNX file:
    nothing started, ``error`` says why). Every run carries ``config``
    (framework, mode, settings, graphs, CPUs), ``mapping`` (the
    framework's side of the settings), ``not_applicable`` (knobs without a
    counterpart there) and ``env`` (the environment it was given)."""

    status: RunStatus
    config: dict[str, Any]
    mapping: dict[str, Any]
    not_applicable: list[dict[str, Any]]
    env: dict[str, str]
    error: str = ""
    stderr: str = ""
    answer: ChildAnswer | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def jobs(self) -> tuple[JobAnswer, ...]:
        return self.answer.jobs if self.answer is not None else ()

    @property
    def job(self) -> JobAnswer:
        """Its first job's answer (a run of one job).

        Raises
        ------
        ChildFailed
            The run gave no answer (its status and error).
        """
        if self.answer is None:
            raise self.failure()
        return self.answer.jobs[0]

    @property
    def reported(self) -> dict[str, Any]:
        """The thread settings the framework reports (empty: no answer)."""
        return self.answer.reported if self.answer is not None else {}

    def failure(self) -> ChildFailed:
        """This run's failure as the one exception a failed child raises
        (a run that was not applicable: "error")."""
        return ChildFailed(self.error, "timeout" if self.status == "timeout" else "error",
                           self.stderr)

    def first_error(self) -> str:
        """The run's error, else its first failed job's ("": none failed)."""
        if not self.ok:
            return self.error
        return next((j.error for j in self.jobs if not j.ok), "")

    def as_dict(self) -> dict[str, Any]:
        """The run as one record: the config, mapping, environment, the
        status and either the child's answer or the error (and stderr)."""
        out: dict[str, Any] = {"config": self.config, "mapping": self.mapping,
                               "not_applicable": self.not_applicable, "env": self.env}
        if self.answer is not None:
            out.update(self.answer.as_dict())
        out["status"] = self.status
        if self.error:
            out["error"] = self.error
        if self.stderr:
            out["stderr"] = self.stderr
        return out
