"""The result record of the main job: its schema version, its statuses and its types.

One :class:`Result` per configuration, one line of ``results.jsonl``: what
was asked (``config``, a :class:`RunConfig`), how it ended (``status``),
what it measured (``summary``, a :class:`pyparbench.timing.Summary` in ns,
and the per-run times ``ns``) and on which machine (``machine``, the
fingerprint). It is defined here, beside the code that reads result files,
so that everything that writes or reads records (the main job's store,
merge, the report, confirmation, compare) shares it.

A record read back from a file goes through :meth:`Result.from_dict`, which
checks every value it keeps (:func:`check_record` first: the file may come
from anywhere) and raises :class:`~pyparbench.resultfiles.values.ResultFileError`
naming the record and the field; :meth:`Result.as_dict` writes the line
exactly as the main job always has.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from pyparbench.resultfiles.values import (
    ResultFileError,
    duration,
    durations,
    get_choice,
    get_int,
    get_object,
    get_string,
    int_ok,
    is_plain,
    show,
)
from pyparbench.choices import check_mode
from pyparbench.settings import Settings
from pyparbench.timing import Summary

__all__ = ["SCHEMA", "STATUSES", "Result", "RunConfig", "check_outcome", "check_record",
           "check_schema"]

SCHEMA = 1
# ok: measured; error: the configuration failed (its message in `error`);
# timeout: it ran past the time limit; skipped: this machine cannot hold the
# setting (more threads or sockets than it has), so it was not run.
STATUSES = ("ok", "error", "timeout", "skipped")
# The fields of a timing summary, in the order the executor writes them.
_SUMMARY_FIELDS = ("median", "q1", "q3", "min", "max")


@dataclass(frozen=True)
class RunConfig:
    """What one record measured: the model under ``settings`` in pyparbench's
    executor, or, with ``framework`` ("tensorflow", "torch", "onnxruntime")
    and its ``mode``, the same graph in that framework. ``predicted_ns``:
    what the recommender predicted for this setting (kept with the result,
    not part of its identity). ``round`` > 0: a further measurement of the
    same configuration in another process, at another time (the main job's
    confirmation rounds). A framework's ``mode`` is resolved when the
    configuration is made (None: the framework's default,
    :func:`pyparbench.choices.check_mode`): the mode a record holds is the one
    its child used."""

    model: str
    batch: int
    settings: Settings
    repeats: int = 5
    warmup: int = 1
    framework: str | None = None
    mode: str | None = None
    predicted_ns: float | None = None
    round: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.round, bool) or not isinstance(self.round, int) or self.round < 0:
            raise ValueError(f"round must be an int >= 0, got {self.round!r}")
        if not isinstance(self.settings, Settings):
            raise TypeError(f"settings must be a Settings, got {type(self.settings).__name__}")
        if self.framework is None and self.mode is not None:
            raise ValueError(f"mode {self.mode!r} without a framework: a mode is one "
                             f"of a framework's (pyparbench.frameworks.MODES)")
        if self.framework is not None:
            object.__setattr__(self, "mode", check_mode(self.framework, self.mode))

    @property
    def name(self) -> str:
        """The name the setting ran under ("tensorflow", "recommended", ...; "" for none)."""
        return self.settings.name

    @property
    def key(self) -> str:
        """Stable identity, used to skip finished configurations on resume."""
        d: dict[str, Any] = {"model": self.model, "batch": self.batch,
                             "settings": self.settings.as_dict(), "repeats": self.repeats}
        if self.framework is not None:
            d.update(framework=self.framework, mode=self.mode)
        if self.round:
            d["round"] = self.round
        return json.dumps(d, sort_keys=True)

    @property
    def setting_key(self) -> str:
        """What its processes share: the model, batch, framework and settings,
        the name aside (one setting run under a preset's name and the
        recommender's is one setting), the round, repeats and prediction too."""
        settings = {k: v for k, v in self.settings.as_dict().items() if k != "name"}
        d: dict[str, Any] = {"model": self.model, "batch": self.batch, "settings": settings}
        if self.framework is not None:
            d.update(framework=self.framework, mode=self.mode)
        return json.dumps(d, sort_keys=True)

    def as_dict(self) -> dict[str, Any]:
        d = {"model": self.model, "batch": self.batch, "settings": self.settings.as_dict(),
             "repeats": self.repeats, "warmup": self.warmup}
        if self.framework is not None:
            d.update(framework=self.framework, mode=self.mode)
        if self.predicted_ns is not None:
            d["predicted_ns"] = self.predicted_ns
        if self.round:
            d["round"] = self.round
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "config") -> Self:
        """A configuration read back (``where`` names it in messages).

        Raises
        ------
        ResultFileError
            A field missing or of the wrong type or range (a ValueError).
        """
        c = dict(d)
        model = get_string(where, c, "model", "config.model")
        batch = get_int(where, c, "batch", "config.batch")
        raw = get_object(where, c, "settings", "config.settings")
        try:
            settings = Settings.from_dict(raw)
        except (TypeError, ValueError) as e:
            raise ResultFileError(where, f"config.settings: {e}") from None
        counts = {}
        for name, lo, default in (("repeats", 1, 5), ("warmup", 0, 1), ("round", 0, 0)):
            v = c.get(name, default)
            if not int_ok(v, lo):
                raise ResultFileError(where, f"config.{name} must be an integer >= {lo}, "
                                             f"got {show(v)}")
            counts[name] = int(v)
        text = {}
        for name in ("framework", "mode"):
            v = c.get(name)
            if v is not None and (not isinstance(v, str) or not v):
                raise ResultFileError(where, f"config.{name} must be a name, got {show(v)}")
            text[name] = v
        predicted = c.get("predicted_ns")
        if predicted is not None:
            predicted = duration(where, predicted, "config.predicted_ns", positive=True)
        try:
            return cls(model, batch, settings, counts["repeats"], counts["warmup"],
                       text["framework"], text["mode"], predicted, counts["round"])
        except (TypeError, ValueError) as e:
            raise ResultFileError(where, f"config: {e}") from None

    @property
    def what(self) -> str:
        """'resnet50 b1 sync 1x2 ...', or 'torch (script) resnet50 b1 sync 1x2 ...'."""
        head = "" if self.framework is None else f"{self.framework} ({self.mode}) "
        tail = f" (round {self.round + 1})" if self.round else ""
        return f"{head}{self.model} b{self.batch} {self.settings.label()}{tail}"


@dataclass(frozen=True)
class Result:
    """One configuration's outcome (a line of ``results.jsonl``)."""

    key: str
    config: RunConfig
    status: str
    started: float
    machine: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    ns: list[float] | None = None
    summary: Summary | None = None
    resolved: dict[str, Any] | None = None
    per_instance: list[list[float]] | None = None
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.status == "ok" and self.summary is None:
            raise ValueError("an 'ok' result needs its timings (a summary)")
        if not isinstance(self.config, RunConfig):
            raise TypeError(f"config must be a RunConfig, got {type(self.config).__name__}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def timing(self) -> Summary:
        """The timing summary of an ``ok`` result.

        Raises
        ------
        ValueError
            The result has no timings (it failed, timed out or was skipped).
        """
        if self.summary is None:
            raise ValueError(f"{self.config.what}: a {self.status!r} result has no timings")
        return self.summary

    def as_dict(self) -> dict[str, Any]:
        """The record as written to ``results.jsonl`` (None fields left out)."""
        d: dict[str, Any] = {
            "key": self.key, "config": self.config.as_dict(), "status": self.status,
            "started": self.started, "machine": self.machine, "error": self.error,
            "ns": self.ns, "summary": None if self.summary is None else self.summary.as_dict(),
            "resolved": self.resolved, "per_instance": self.per_instance, "schema": self.schema}
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "result record") -> Result:
        """A record read back, every value checked (:func:`check_record`, and
        the whole timing summary of an ``ok`` one); unknown fields are ignored.

        Raises
        ------
        ResultFileError
            Naming ``where`` and what is missing or wrong (a ValueError).
        """
        missing = [k for k in ("key", "config", "status") if k not in d]
        if missing:
            raise ResultFileError(where, f"result record lacks {missing}")
        r = dict(d)
        check_record(where, r)
        if not isinstance(r["key"], str):
            raise ResultFileError(where, f"key must be a string, got {show(r['key'])}")
        config = RunConfig.from_dict(r["config"], where)
        started = r.get("started", 0.0)
        if isinstance(started, bool) or not isinstance(started, (int, float)):
            raise ResultFileError(where, f"started must be a time, got {show(started)}")
        summary = None
        if "summary" in r:
            summary = _summary(where, get_object(where, r, "summary"))
        ns = list(durations(where, r["ns"], "ns", scale=1.0)) if "ns" in r else None
        for name, kind in (("resolved", dict), ("per_instance", list)):
            if r.get(name) is not None and not isinstance(r[name], kind):
                raise ResultFileError(where, f"{name} must be a JSON "
                                             f"{'object' if kind is dict else 'array'}, "
                                             f"got {show(r[name])}")
        return cls(r["key"], config, r["status"], float(started), r.get("machine") or {},
                   r.get("error"), ns, summary, r.get("resolved"), r.get("per_instance"),
                   int(r.get("schema", SCHEMA)))


def _summary(where: str, s: dict[str, Any]) -> Summary:
    """A record's timing summary, each field checked."""
    median, q1, q3, low, high = (
        duration(where, s.get(k), f"summary.{k}", positive=k == "median")
        for k in _SUMMARY_FIELDS)
    n: Any = s.get("n")
    if not int_ok(n, 1):
        raise ResultFileError(where, f"summary.n must be a count of runs >= 1, got {show(n)}")
    return Summary(median, q1, q3, low, high, int(n))


def check_record(where: str, r: dict[str, Any]) -> None:
    """Raise ResultFileError(where, ...) unless ``r`` is a well-formed
    pyparbench result record (the fields compare and merge rely on)."""
    key = r.get("key")
    if key is not None and not isinstance(key, str):
        raise ResultFileError(where, f"key must be a string, got {show(key)}")
    check_schema(where, r)
    config = get_object(where, r, "config")
    get_string(where, config, "model", "config.model")
    get_int(where, config, "batch", "config.batch")
    settings = get_object(where, config, "settings", "config.settings")
    for k, v in settings.items():
        if not is_plain(v):
            raise ResultFileError(where, f"config.settings.{k} must be a string, number, "
                                         f"boolean, null or lists of CPUs, got {show(v)}")
    if check_outcome(where, r) != "ok":
        return
    summary = get_object(where, r, "summary")
    duration(where, summary.get("median"), "summary.median", positive=True)
    if "ns" in r:
        durations(where, r["ns"], "ns", scale=1.0)


def check_schema(where: str, r: dict[str, Any]) -> None:
    """Raise unless the record is of this pyparbench's schema (records
    written before the schema field existed have the same shape)."""
    schema = r.get("schema", SCHEMA)
    if schema != SCHEMA or isinstance(schema, bool):
        raise ResultFileError(where, f"a record of schema {show(schema)}; this pyparbench "
                                     f"reads schema {SCHEMA}")


def check_outcome(where: str, r: dict[str, Any]) -> str:
    """The record's status, checked with its error text and machine
    fingerprint (the fields every record of a results folder has: the
    configurations' and the operator measurements')."""
    status = get_choice(where, r, "status", STATUSES)
    if "error" in r and not isinstance(r["error"], str):
        raise ResultFileError(where, f"error must be a string, got {show(r['error'])}")
    if "machine" in r and not isinstance(r["machine"], dict):
        raise ResultFileError(where, f"machine must be an object, got {show(r['machine'])}")
    return status
