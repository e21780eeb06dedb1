"""The other files of a results folder, read as hostile as the records: the
operator measurements (``operators.jsonl``), the measured ceilings
(``peak-<id>.json``) and the run's conditions kept in ``summary.json``.

Each check raises :class:`ResultFileError` naming the file (and line) and
the first value that is wrong, so that the report built from what passes
never meets a missing field or a value of the wrong type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyparbench.resultfiles.schema import check_outcome, check_schema
from pyparbench.resultfiles.values import (
    MAX_COUNT,
    ResultFileError,
    duration,
    get_int,
    get_object,
    get_string,
    int_ok,
    is_number,
    json_type,
    parse_json,
    read_text,
    show,
)

if TYPE_CHECKING:
    from pyparbench.machine.peak import Peak

__all__ = ["PEAK_FILE", "check_operator_record", "conditions", "read_peak_file"]

# A peak file's name: the fingerprint id of the machine it measured.
PEAK_FILE = re.compile(r"^peak-([0-9a-f]{12})\.json$")
# Operator kinds and the shape kinds of a scaling task (harness.operators).
_TASKS = ("scaling", "nodes")
_SHAPES = ("gemm", "conv", "embedding")
_ROOFLINE_NUMBERS = ("intensity", "gflops", "gbs", "ceiling", "percent")
_BIG = 1e18  # FLOPs, bytes, GFLOP/s, GB/s: beyond any measurement


def _number(where: str, d: Mapping[str, Any], key: str, name: str, *, positive: bool) -> float:
    v: Any = d.get(key)
    if not is_number(v) or not (0 < float(v) if positive else 0 <= float(v)) or v > _BIG:
        raise ResultFileError(where, f"{name} must be a {'positive' if positive else 'finite'} "
                                     f"number, got {show(v)}")
    return float(v)


def _text(where: str, d: Mapping[str, Any], key: str, name: str) -> str:
    v = d.get(key)
    if not isinstance(v, str) or len(v) > 4096:
        raise ResultFileError(where, f"{name} must be a string, got {show(v)}")
    return v


def _roofline(where: str, d: Mapping[str, Any], name: str) -> None:
    roof = get_object(where, dict(d), "roofline", f"{name}.roofline")
    for k in _ROOFLINE_NUMBERS:
        _number(where, roof, k, f"{name}.roofline.{k}", positive=False)
    for k in ("bound", "unit"):
        _text(where, roof, k, f"{name}.roofline.{k}")


def _scaling(where: str, task: dict[str, Any], r: dict[str, Any]) -> None:
    shape = get_object(where, task, "shape", "task.shape")
    get_string(where, shape, "name", "task.shape.name")
    _text(where, shape, "source", "task.shape.source")
    if shape.get("kind") not in _SHAPES:
        raise ResultFileError(where, f"task.shape.kind must be one of {', '.join(_SHAPES)}, "
                                     f"got {show(shape.get('kind'))}")
    params = get_object(where, shape, "params", "task.shape.params")
    for k, v in params.items():
        if not int_ok(v, 0):
            raise ResultFileError(where, f"task.shape.params.{k} must be a count, got {show(v)}")
    points = r.get("points")
    if not isinstance(points, list) or not points or len(points) > MAX_COUNT:
        raise ResultFileError(where, f"points must be a non-empty list, got {show(points)}")
    for i, p in enumerate(points):
        name = f"points[{i}]"
        if not isinstance(p, dict):
            raise ResultFileError(where, f"{name} must be an object, got a JSON {json_type(p)}")
        get_int(where, p, "threads", f"{name}.threads")
        summary = get_object(where, p, "summary", f"{name}.summary")
        duration(where, summary.get("median"), f"{name}.summary.median", positive=True)
        _number(where, p, "flops", f"{name}.flops", positive=False)
        _number(where, p, "bytes", f"{name}.bytes", positive=True)
        _roofline(where, p, name)


def _nodes(where: str, r: dict[str, Any]) -> None:
    get_int(where, r, "threads", "threads")
    graph = get_object(where, r, "graph_ns")
    duration(where, graph.get("median"), "graph_ns.median", positive=True)
    nodes = r.get("nodes")
    if not isinstance(nodes, list) or len(nodes) > MAX_COUNT:
        raise ResultFileError(where, f"nodes must be a list, got {show(nodes)}")
    for i, n in enumerate(nodes):
        name = f"nodes[{i}]"
        if not isinstance(n, dict):
            raise ResultFileError(where, f"{name} must be an object, got a JSON {json_type(n)}")
        if not int_ok(n.get("id"), 0):
            raise ResultFileError(where, f"{name}.id must be a node number, got {show(n.get('id'))}")
        _text(where, n, "name", f"{name}.name")
        _text(where, n, "op", f"{name}.op")
        shape = n.get("shape")
        if shape is not None and not (isinstance(shape, list) and len(shape) <= 16
                                      and all(int_ok(x, 0) for x in shape)):
            raise ResultFileError(where, f"{name}.shape must be a list of sizes, got {show(shape)}")
        duration(where, n.get("median_ns"), f"{name}.median_ns", positive=True)
        _number(where, n, "flops", f"{name}.flops", positive=False)
        _number(where, n, "bytes", f"{name}.bytes", positive=True)
        _roofline(where, n, name)


def check_operator_record(where: str, r: dict[str, Any]) -> None:
    """Raise ResultFileError(where, ...) unless ``r`` is a well-formed
    operator task record (:mod:`pyparbench.harness.operators`): what the
    report reads of it, every value typed and in range."""
    if not isinstance(r.get("key"), str):
        raise ResultFileError(where, f"key must be a string, got {show(r.get('key'))}")
    check_schema(where, r)
    task = get_object(where, r, "task")
    kind = task.get("kind")
    if kind not in _TASKS:
        raise ResultFileError(where, f"task.kind must be one of {', '.join(_TASKS)}, "
                                     f"got {show(kind)}")
    for k in ("model", "batch"):
        if k in task and not (isinstance(task[k], str) if k == "model" else int_ok(task[k], 0)):
            raise ResultFileError(where, f"task.{k} must be a {'string' if k == 'model' else 'count'}"
                                         f", got {show(task[k])}")
    status = check_outcome(where, r)
    peak_id = r.get("peak_id")
    if peak_id is not None and not (isinstance(peak_id, str) and re.fullmatch(r"[0-9a-f]{12}",
                                                                              peak_id)):
        raise ResultFileError(where, f"peak_id must be a machine's fingerprint id (12 hex "
                                     f"digits), got {show(peak_id)}")
    if kind == "scaling" and "shape" in task:
        # A failed task's shape names it in the report's list of failures.
        get_string(where, get_object(where, task, "shape", "task.shape"), "name",
                   "task.shape.name")
    if status != "ok":
        return
    if kind == "scaling":
        _scaling(where, task, r)
    else:
        _nodes(where, r)


def _peak_fields(where: str, d: dict[str, Any]) -> None:
    for k in ("isa", "measured_at"):
        _text(where, d, k, k)
    if "fma_warning" in d:
        _text(where, d, "fma_warning", "fma_warning")
    if not isinstance(d.get("fused"), bool):
        raise ResultFileError(where, f"fused must be true or false, got {show(d.get('fused'))}")
    for k in ("lanes", "chains", "fma_pipes", "gather_dim", "gather_bag"):
        get_int(where, d, k, k)
    for k in ("triad_array_bytes", "gather_table_bytes", "llc_bytes", "measured_clock_mhz",
              "seconds"):
        _number(where, d, k, k, positive=False)
    get_object(where, d, "fingerprint")
    clock = get_object(where, d, "clock")
    _number(where, clock, "mhz", "clock.mhz", positive=True)
    _text(where, clock, "source", "clock.source")
    readings = get_object(where, clock, "readings", "clock.readings")
    for k in readings:
        _number(where, readings, k, f"clock.readings.{show(k)}", positive=True)
    points = d.get("points")
    if not isinstance(points, list) or not points or len(points) > MAX_COUNT:
        raise ResultFileError(where, "points must be a non-empty list (the ceilings per "
                                     "thread count)")
    for i, p in enumerate(points):
        name = f"points[{i}]"
        if not isinstance(p, dict):
            raise ResultFileError(where, f"{name} must be an object, got a JSON {json_type(p)}")
        get_int(where, p, "threads", f"{name}.threads")
        cpus = p.get("cpus")
        if not isinstance(cpus, list) or len(cpus) > MAX_COUNT or not all(int_ok(c, 0)
                                                                            for c in cpus):
            raise ResultFileError(where, f"{name}.cpus must be a list of CPU numbers")
        for k in ("fma_gflops", "fma_gflops_median", "theoretical_gflops", "triad_gbs",
                  "triad_gbs_median", "gather_gbs", "gather_gbs_median"):
            _number(where, p, k, f"{name}.{k}", positive=True)


def read_peak_file(path: Path, max_bytes: int) -> Peak:
    """A ``peak-<id>.json`` of a results folder (:func:`pyparbench.harness.folder.load_or_measure`),
    checked value by value.

    Raises
    ------
    ResultFileError
        Not a peak file, naming it and the first wrong value.
    """
    from pyparbench.machine.peak import Peak, PeakPoint

    data = parse_json(path, read_text(path, max_bytes))
    if not isinstance(data, dict):
        raise ResultFileError(path, f"a JSON {json_type(data)}, not measured ceilings")
    _peak_fields(str(path), data)
    # Only the fields Peak has: a file may carry others (a newer pyparbench's).
    points = [{k: p[k] for k in PeakPoint.__dataclass_fields__} for p in data["points"]]
    clock = {k: data["clock"][k] for k in ("mhz", "source", "readings")}
    return Peak.from_dict({**data, "points": points, "clock": clock})


def conditions(value: Any) -> dict[str, Any]:
    """The conditions a summary recorded (what the machine was doing when
    the run started; what a merge was told), the values the report shows
    and nothing else: a value of the wrong type is left out."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, Any] = {}
    for k in ("busy_cpus_start", "loadavg_start"):
        if is_number(value.get(k)) and 0 <= value[k] <= MAX_COUNT:
            out[k] = float(value[k])
    if int_ok(value.get("cpus"), 1):
        out["cpus"] = value["cpus"]
    for k in ("busy", "forced"):
        if isinstance(value.get(k), str):
            out[k] = value[k][:4096]
        elif k in value and value[k] is None:
            out[k] = None
    return out
