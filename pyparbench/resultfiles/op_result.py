"""The operator record of the main job: one line of ``operators.jsonl``.

One :class:`OpResult` per operator task (:class:`OpTask`, run by
:mod:`pyparbench.harness.operators`): what was asked (``task``), how it
ended (``status``, ``error``) and what it measured: a ``scaling`` task's
``points`` (one :class:`OpPoint` per thread count), a ``nodes`` task's
heavy ``nodes`` (:class:`OpNode`) with the whole graph's time
(``graph_ns``), each placed on the roofline of the host that measured it
(``roofline``, a :class:`pyparbench.machine.peak.Ceiling`; ``peak_id`` names
that host's ceilings); a ``generation`` task's ``generation`` points (one
:class:`GenerationPoint` per runtime and thread count: a built-in decoder's
prefill and decode rates, not placed on the roofline).

It is defined here, beside :class:`pyparbench.resultfiles.Result`, the
configurations' record, for the same reason: everything that writes or
reads operator records (the main job's store, resume, merge, a results
folder read back, the report) shares it. :meth:`OpResult.from_dict` checks
every value it keeps and raises
:class:`~pyparbench.resultfiles.values.ResultFileError` naming the record
and the field; :meth:`OpResult.as_dict` writes the line exactly as the main
job writes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from pyparbench.machine.peak import Ceiling
from pyparbench.resultfiles.schema import SCHEMA, check_outcome, check_schema
from pyparbench.resultfiles.values import (
    MAX_COUNT,
    ResultFileError,
    duration,
    get_int,
    get_number,
    get_object,
    get_string,
    get_text,
    int_ok,
    is_number,
    is_plain,
    json_type,
    show,
)
from pyparbench.settings import Settings
from pyparbench.timing import Summary

__all__ = ["OP_KINDS", "SHAPE_KINDS", "GenerationPoint", "OpNode", "OpPoint", "OpResult",
           "OpShape", "OpTask"]

# Operator task kinds, and the shape kinds of a scaling task.
OP_KINDS = ("scaling", "nodes", "generation")
SHAPE_KINDS = ("gemm", "conv", "embedding")
# The operator of the graph each shape kind is (for its roofline).
_SHAPE_OP = {"gemm": "linear", "conv": "conv2d", "embedding": "embedding_bag"}
_ROOFLINE_NUMBERS = ("intensity", "gflops", "gbs", "ceiling", "percent")
_SUMMARY_FIELDS = ("median", "q1", "q3", "min", "max")
# A generation point's rates and times, each a positive number.
_GENERATION_NUMBERS = ("ttft_ms", "tpot_ms", "tokens_per_s", "prefill_tokens_per_s",
                       "bytes_per_token")
# How far tokens_per_s * tpot may stray from the batch (float rounding only).
_RATE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class OpShape:
    """One standard operator shape and where it comes from.

    ``kind`` "gemm" (``m, n, k``: C (m x n) = A (m x k) B (k x n)), "conv"
    (``n, c, h, w, out_channels, kh, kw, stride_h, stride_w, pad_t, pad_b,
    pad_l, pad_r, groups``) or "embedding" (``rows, dim, batch, bag``: batch
    bags of bag rows each). ``level``: the smallest suite level that
    measures it ("quick", "default" or "full").
    """

    kind: str
    name: str
    source: str
    params: Mapping[str, int] = field(hash=False)
    level: str = "default"

    @property
    def op(self) -> str:
        """The graph operator the shape is ("linear", "conv2d", "embedding_bag")."""
        return _SHAPE_OP[self.kind]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "source": self.source,
                "params": dict(self.params), "level": self.level}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OpShape:
        return cls(d["kind"], d["name"], d["source"], dict(d["params"]), d.get("level", "default"))


@dataclass(frozen=True)
class OpTask:
    """One operator measurement to make.

    ``scaling``: ``shape`` at each of ``threads``; ``nodes``: the heavy
    nodes of ``model`` at ``batch``, on ``threads[0]`` threads;
    ``generation``: the built-in decoder ``model`` generating, for each of
    ``batch`` sequences, ``new`` tokens after a prompt of ``prompt``, at each
    of ``threads`` (``repeats`` generations per point, each in a fresh
    process), in each of ``frameworks`` (empty: the runtimes installed).
    ``prompt`` and ``new`` are 0 for the other kinds (and then left out of
    the task's key, as are empty ``frameworks``).
    """

    kind: str
    threads: tuple[int, ...]
    shape: OpShape | None = None
    model: str = ""
    batch: int = 0
    repeats: int = 5
    prompt: int = 0
    new: int = 0
    frameworks: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Stable identity, used to skip finished tasks on resume."""
        return json.dumps(self.as_dict(), sort_keys=True)

    @property
    def label(self) -> str:
        if self.kind == "scaling" and self.shape is not None:
            return f"{self.shape.name} at 1..{max(self.threads)} threads"
        if self.kind == "generation":
            return (f"{self.model} generation ({self.prompt} + {self.new} new) at "
                    f"1..{max(self.threads)} threads")
        return f"{self.model} b{self.batch} per-node trace"

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "threads": list(self.threads),
                             "repeats": self.repeats}
        if self.shape is not None:
            d["shape"] = self.shape.as_dict()
        if self.model:
            d["model"], d["batch"] = self.model, self.batch
        if self.kind == "generation":
            d["prompt"], d["new"] = self.prompt, self.new
        if self.frameworks:
            d["frameworks"] = list(self.frameworks)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OpTask:
        """A task as :meth:`as_dict` wrote it (not checked: see
        :meth:`OpResult.from_dict` for a task read from a file)."""
        shape = OpShape.from_dict(d["shape"]) if "shape" in d else None
        return cls(d["kind"], tuple(int(t) for t in d["threads"]), shape,
                   d.get("model", ""), int(d.get("batch", 0)), int(d.get("repeats", 5)),
                   int(d.get("prompt", 0)), int(d.get("new", 0)))


@dataclass(frozen=True)
class OpPoint:
    """One thread count of a scaling task: per-run times (``ns``), their
    summary, the work and traffic of one run, and its place on the roofline
    (None until placed)."""

    threads: int
    summary: Summary
    flops: float
    bytes: float
    cpus: tuple[int, ...] | None = None
    ns: tuple[float, ...] | None = None
    roofline: Ceiling | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"threads": self.threads}
        if self.cpus is not None:
            d["cpus"] = list(self.cpus)
        if self.ns is not None:
            d["ns"] = list(self.ns)
        d.update(summary=self.summary.as_dict(), flops=self.flops, bytes=self.bytes)
        if self.roofline is not None:
            d["roofline"] = self.roofline.as_dict()
        return d


@dataclass(frozen=True)
class OpNode:
    """One heavy node of a traced graph: its median time over the traced
    runs (``median_ns``, each run's in ``ns``), work, traffic, output shape
    and place on the roofline (None until placed)."""

    id: int
    name: str
    op: str
    flops: float
    bytes: float
    median_ns: float
    shape: tuple[int, ...] | None = None
    ns: tuple[float, ...] | None = None
    roofline: Ceiling | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "name": self.name, "op": self.op,
                             "flops": self.flops, "bytes": self.bytes}
        if self.shape is not None:
            d["shape"] = list(self.shape)
        if self.ns is not None:
            d["ns"] = list(self.ns)
        d["median_ns"] = self.median_ns
        if self.roofline is not None:
            d["roofline"] = self.roofline.as_dict()
        return d


@dataclass(frozen=True)
class GenerationPoint:
    """One runtime (``framework``: "native" or "llamacpp") at one thread
    count of a generation task: time to first token (``ttft_ms``: the
    prompt's step and the first token's choice), time per output token
    after it (``tpot_ms``, the median token step), decode tokens per second
    (``tokens_per_s``: batch / tpot), prefill tokens per second
    (``prefill_tokens_per_s``: batch x prompt / ttft, the first token's
    choice included, as no runtime times the prompt's step apart from it),
    the bytes a token step reads, and the setting it ran under as the
    runtime describes it (``settings``)."""

    framework: str
    threads: int
    ttft_ms: float
    tpot_ms: float
    tokens_per_s: float
    prefill_tokens_per_s: float
    bytes_per_token: float
    settings: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def decode_gbs(self) -> float:
        """The bytes a token step reads over its time (GB/s)."""
        return self.bytes_per_token / (self.tpot_ms * 1e-3) / 1e9

    def as_dict(self) -> dict[str, Any]:
        return {"framework": self.framework, "threads": self.threads,
                "ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms,
                "tokens_per_s": self.tokens_per_s,
                "prefill_tokens_per_s": self.prefill_tokens_per_s,
                "bytes_per_token": self.bytes_per_token, "settings": dict(self.settings)}


@dataclass(frozen=True)
class OpResult:
    """One operator task's outcome (a line of ``operators.jsonl``).

    An ``ok`` scaling task has ``points``; an ``ok`` nodes task has
    ``threads``, ``nodes`` and ``graph_ns`` (and the ``settings`` it ran
    under); an ``ok`` generation task has ``generation``. Others have none,
    and say why in ``error``.
    """

    key: str
    task: OpTask
    status: str
    started: float = 0.0
    machine: dict[str, Any] = field(default_factory=dict)
    peak_id: str | None = None
    error: str | None = None
    points: tuple[OpPoint, ...] | None = None
    settings: Settings | None = None
    threads: int | None = None
    nodes: tuple[OpNode, ...] | None = None
    graph_ns: Summary | None = None
    generation: tuple[GenerationPoint, ...] | None = None
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        if self.task.kind not in OP_KINDS:
            raise ValueError(f"task kind must be one of {OP_KINDS}, got {self.task.kind!r}")
        if self.status != "ok":
            return
        if self.task.kind == "scaling" and (not self.points or self.task.shape is None):
            raise ValueError("an 'ok' scaling record needs its shape and points")
        if self.task.kind == "nodes" and (self.nodes is None or self.threads is None
                                          or self.graph_ns is None):
            raise ValueError("an 'ok' nodes record needs its threads, nodes and graph_ns")
        if self.task.kind == "generation" and not self.generation:
            raise ValueError("an 'ok' generation record needs its generation points")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def kind(self) -> str:
        """The task's kind: "scaling", "nodes" or "generation"."""
        return self.task.kind

    @property
    def name(self) -> str | None:
        """What the task measured: the model's name, else the shape's."""
        return self.task.model or (self.task.shape.name if self.task.shape else None)

    def as_dict(self) -> dict[str, Any]:
        """The record as written to ``operators.jsonl`` (None fields left out)."""
        d: dict[str, Any] = {
            "key": self.key, "task": self.task.as_dict(), "started": self.started,
            "schema": self.schema, "machine": self.machine, "peak_id": self.peak_id,
            "status": self.status, "error": self.error,
            "points": None if self.points is None else [p.as_dict() for p in self.points],
            "settings": None if self.settings is None else self.settings.as_dict(),
            "threads": self.threads,
            "nodes": None if self.nodes is None else [n.as_dict() for n in self.nodes],
            "graph_ns": None if self.graph_ns is None else self.graph_ns.as_dict(),
            "generation": None if self.generation is None
            else [g.as_dict() for g in self.generation]}
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "operator record", *,
                  placed: bool = True) -> OpResult:
        """A record read back, every value it keeps checked; unknown fields
        are ignored. ``placed``: every point and node of an ``ok`` record
        must carry its roofline (a stored record's do; a measurement not yet
        placed on the roofline, as the task's process answers it, does not).

        Raises
        ------
        ResultFileError
            Naming ``where`` and what is missing or wrong (a ValueError).
        """
        r = dict(d)
        if not isinstance(r.get("key"), str):
            raise ResultFileError(where, f"key must be a string, got {show(r.get('key'))}")
        check_schema(where, r)
        status = check_outcome(where, r)
        ok = status == "ok"
        task = _task(where, get_object(where, r, "task"), ok)
        peak_id = r.get("peak_id")
        if peak_id is not None and not (isinstance(peak_id, str)
                                        and re.fullmatch(r"[0-9a-f]{12}", peak_id)):
            raise ResultFileError(where, f"peak_id must be a machine's fingerprint id (12 hex "
                                         f"digits), got {show(peak_id)}")
        started: Any = r.get("started", 0.0)
        if not is_number(started):
            raise ResultFileError(where, f"started must be a time, got {show(started)}")
        measured: dict[str, Any] = {}
        if ok:
            try:
                measured = (_points(where, r, placed) if task.kind == "scaling"
                            else _generation(where, r, task) if task.kind == "generation"
                            else _nodes(where, r, placed))
            except ValueError as e:
                if isinstance(e, ResultFileError):
                    raise
                raise ResultFileError(where, str(e)) from None
        return cls(r["key"], task, status, started, r.get("machine") or {}, peak_id,
                   r.get("error"), schema=int(r.get("schema", SCHEMA)), **measured)


def _task(where: str, t: dict[str, Any], ok: bool) -> OpTask:
    """The task of a record, checked (its shape in full where it has one;
    an ``ok`` scaling record must)."""
    kind = t.get("kind")
    if kind not in OP_KINDS:
        raise ResultFileError(where, f"task.kind must be one of {', '.join(OP_KINDS)}, "
                                     f"got {show(kind)}")
    threads: Any = t.get("threads", [])
    if not isinstance(threads, list) or len(threads) > MAX_COUNT or not all(
            int_ok(x, 1) for x in threads):
        raise ResultFileError(where, f"task.threads must be a list of thread counts, "
                                     f"got {show(threads)}")
    model: Any = t.get("model", "")
    if not isinstance(model, str) or len(model) > 4096:
        raise ResultFileError(where, f"task.model must be a string, got {show(model)}")
    generation = kind == "generation"
    if generation and not (model and threads):
        raise ResultFileError(where, f"a generation task needs its model and thread counts, "
                                     f"got model {show(model)} and threads {show(threads)}")
    counts = {}
    # A generation times at least one sequence, its prompt and one token step.
    for k, lo, default in (("batch", 1 if generation else 0, 0), ("repeats", 1, 5),
                           ("prompt", 1 if generation else 0, 0),
                           ("new", 2 if generation else 0, 0)):
        v = t.get(k, default)
        if not int_ok(v, lo):
            raise ResultFileError(where, f"task.{k} must be a count from {lo}, got {show(v)}")
        counts[k] = int(v)
    frameworks: Any = t.get("frameworks", [])
    if not isinstance(frameworks, list) or len(frameworks) > MAX_COUNT or not all(
            isinstance(f, str) and 0 < len(f) <= 64 for f in frameworks):
        raise ResultFileError(where, f"task.frameworks must be a list of runtime names, "
                                     f"got {show(frameworks)}")
    shape = None
    if kind == "scaling" and ("shape" in t or ok):
        shape = _shape(where, get_object(where, t, "shape", "task.shape"))
    return OpTask(kind, tuple(threads), shape, model, counts["batch"], counts["repeats"],
                  counts["prompt"], counts["new"], tuple(frameworks))


def _shape(where: str, s: dict[str, Any]) -> OpShape:
    name = get_string(where, s, "name", "task.shape.name")
    source = get_text(where, s, "source", "task.shape.source")
    kind = s.get("kind")
    if kind not in SHAPE_KINDS:
        raise ResultFileError(where, f"task.shape.kind must be one of {', '.join(SHAPE_KINDS)}, "
                                     f"got {show(kind)}")
    params = get_object(where, s, "params", "task.shape.params")
    for k, v in params.items():
        if not int_ok(v, 0):
            raise ResultFileError(where, f"task.shape.params.{k} must be a count, got {show(v)}")
    level = s.get("level", "default")
    if not isinstance(level, str) or len(level) > 64:
        raise ResultFileError(where, f"task.shape.level must be a level's name, got {show(level)}")
    return OpShape(kind, name, source, dict(params), level)


def _items(where: str, v: Any, name: str, *, nonempty: bool) -> list[dict[str, Any]]:
    if not isinstance(v, list) or (nonempty and not v) or len(v) > MAX_COUNT:
        raise ResultFileError(where, f"{name} must be a {'non-empty ' if nonempty else ''}list, "
                                     f"got {show(v)}")
    for i, x in enumerate(v):
        if not isinstance(x, dict):
            raise ResultFileError(where, f"{name}[{i}] must be an object, got a JSON "
                                         f"{json_type(x)}")
    return v


def _counts(where: str, v: Any, name: str, lo: int) -> tuple[int, ...] | None:
    if v is None:
        return None
    if not isinstance(v, list) or len(v) > MAX_COUNT or not all(int_ok(x, lo) for x in v):
        raise ResultFileError(where, f"{name} must be a list of counts, got {show(v)}")
    return tuple(v)


def _times(where: str, v: Any, name: str) -> tuple[float, ...] | None:
    """Per-run times, kept as written (an int stays an int)."""
    if v is None:
        return None
    if not isinstance(v, list) or len(v) > MAX_COUNT:
        raise ResultFileError(where, f"{name} must be a list of durations, got {show(v)}")
    for i, x in enumerate(v):
        duration(where, x, f"{name}[{i}]", positive=False)
    return tuple(v)


def _kept(where: str, v: Any, name: str) -> float:
    """A positive duration, kept as written."""
    duration(where, v, name, positive=True)
    return cast(float, v)


def _summary(where: str, s: dict[str, Any], name: str) -> Summary:
    """A timing summary, each field checked and kept as written."""
    for k in _SUMMARY_FIELDS:
        duration(where, s.get(k), f"{name}.{k}", positive=k == "median")
    n: Any = s.get("n")
    if not int_ok(n, 1):
        raise ResultFileError(where, f"{name}.n must be a count of runs >= 1, got {show(n)}")
    return Summary(s["median"], s["q1"], s["q3"], s["min"], s["max"], n)


def _roofline(where: str, d: dict[str, Any], name: str, placed: bool) -> Ceiling | None:
    if "roofline" not in d and not placed:
        return None
    roof = get_object(where, d, "roofline", f"{name}.roofline")
    numbers = {k: get_number(where, roof, k, f"{name}.roofline.{k}", positive=False)
               for k in _ROOFLINE_NUMBERS}
    text = {k: get_text(where, roof, k, f"{name}.roofline.{k}") for k in ("bound", "unit")}
    return Ceiling(numbers["intensity"], numbers["gflops"], numbers["gbs"], text["bound"],
                   numbers["ceiling"], text["unit"], numbers["percent"])


def _points(where: str, r: dict[str, Any], placed: bool) -> dict[str, Any]:
    """An ok scaling record's measurements: {"points": ...}."""
    points = []
    for i, p in enumerate(_items(where, r.get("points"), "points", nonempty=True)):
        name = f"points[{i}]"
        points.append(OpPoint(
            get_int(where, p, "threads", f"{name}.threads"),
            _summary(where, get_object(where, p, "summary", f"{name}.summary"),
                     f"{name}.summary"),
            get_number(where, p, "flops", f"{name}.flops", positive=False),
            get_number(where, p, "bytes", f"{name}.bytes", positive=True),
            _counts(where, p.get("cpus"), f"{name}.cpus", 0),
            _times(where, p.get("ns"), f"{name}.ns"),
            _roofline(where, p, name, placed)))
    return {"points": tuple(points)}


def _nodes(where: str, r: dict[str, Any], placed: bool) -> dict[str, Any]:
    """An ok nodes record's measurements: settings, threads, nodes, graph_ns."""
    threads = get_int(where, r, "threads", "threads")
    graph_ns = _summary(where, get_object(where, r, "graph_ns"), "graph_ns")
    settings = None
    if r.get("settings") is not None:
        try:
            settings = Settings.from_dict(get_object(where, r, "settings"))
        except (TypeError, ValueError) as e:
            raise ResultFileError(where, f"settings: {e}") from None
    nodes = []
    for i, n in enumerate(_items(where, r.get("nodes"), "nodes", nonempty=False)):
        name = f"nodes[{i}]"
        if not int_ok(n.get("id"), 0):
            raise ResultFileError(where, f"{name}.id must be a node number, got {show(n.get('id'))}")
        shape = n.get("shape")
        if shape is not None and not (isinstance(shape, list) and len(shape) <= 16):
            raise ResultFileError(where, f"{name}.shape must be a list of sizes, got {show(shape)}")
        nodes.append(OpNode(
            n["id"], get_text(where, n, "name", f"{name}.name"),
            get_text(where, n, "op", f"{name}.op"),
            get_number(where, n, "flops", f"{name}.flops", positive=False),
            get_number(where, n, "bytes", f"{name}.bytes", positive=True),
            _kept(where, n.get("median_ns"), f"{name}.median_ns"),
            _counts(where, shape, f"{name}.shape", 0),
            _times(where, n.get("ns"), f"{name}.ns"),
            _roofline(where, n, name, placed)))
    return {"settings": settings, "threads": threads, "nodes": tuple(nodes),
            "graph_ns": graph_ns}


def _generation(where: str, r: dict[str, Any], task: OpTask) -> dict[str, Any]:
    """An ok generation record's measurements: {"generation": ...}, each
    point's figures positive and its decode rate the batch over its tpot."""
    points = []
    for i, g in enumerate(_items(where, r.get("generation"), "generation", nonempty=True)):
        name = f"generation[{i}]"
        framework = get_string(where, g, "framework", f"{name}.framework")
        threads = get_int(where, g, "threads", f"{name}.threads")
        numbers = {k: get_number(where, g, k, f"{name}.{k}", positive=True)
                   for k in _GENERATION_NUMBERS}
        tokens = numbers["tokens_per_s"] * numbers["tpot_ms"] / 1e3
        if abs(tokens - task.batch) > _RATE_TOLERANCE * task.batch:
            raise ResultFileError(where, f"{name}.tokens_per_s must be the batch ({task.batch}) "
                                         f"over tpot_ms, got {show(numbers['tokens_per_s'])} "
                                         f"at tpot_ms {show(numbers['tpot_ms'])}")
        settings = get_object(where, g, "settings", f"{name}.settings")
        bad = next((k for k, v in settings.items() if not is_plain(v)), None)
        if bad is not None:
            raise ResultFileError(where, f"{name}.settings.{bad} must be a value or a list, "
                                         f"got {show(settings[bad])}")
        points.append(GenerationPoint(framework, threads, numbers["ttft_ms"],
                                      numbers["tpot_ms"], numbers["tokens_per_s"],
                                      numbers["prefill_tokens_per_s"],
                                      numbers["bytes_per_token"], dict(settings)))
    return {"generation": tuple(points)}
