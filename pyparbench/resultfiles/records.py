"""pyparbench's own files: result records (``results.jsonl``) and the report's
``summary.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyparbench.resultfiles.fingerprint import SIGNIFICANT_FIELDS, fingerprint_fields
from pyparbench.resultfiles.rows import ResultSet, Row, set_machine
from pyparbench.resultfiles.values import (
    MAX_COUNT,
    ResultFileError,
    canonical,
    dotted,
    duration,
    durations,
    get_int,
    get_object,
    get_string,
    is_number,
    is_plain,
    json_type,
    printable,
    show,
)
from pyparbench.results import SCHEMA, STATUSES

__all__ = [
    "add_summary",
    "check_record",
    "read_peak",
    "read_records",
    "same_machine",
    "settings_label",
    "settings_sweep_label",
    "summary_records",
]


def check_record(where: str, r: dict[str, Any]) -> None:
    """Raise ResultFileError(where, ...) unless ``r`` is a well-formed
    pyparbench result record (the fields compare and merge rely on)."""
    key = r.get("key")
    if key is not None and not isinstance(key, str):
        raise ResultFileError(where, f"key must be a string, got {show(key)}")
    # Records written before the schema field existed have the same shape.
    schema = r.get("schema", SCHEMA)
    if schema != SCHEMA or isinstance(schema, bool):
        raise ResultFileError(where, f"a record of schema {show(schema)}; this pyparbench "
                                     f"reads schema {SCHEMA}")
    config = get_object(where, r, "config")
    get_string(where, config, "model", "config.model")
    get_int(where, config, "batch", "config.batch")
    settings = get_object(where, config, "settings", "config.settings")
    for k, v in settings.items():
        if not is_plain(v):
            raise ResultFileError(where, f"config.settings.{k} must be a string, number, "
                                         f"boolean, null or lists of CPUs, got {show(v)}")
    status = r.get("status")
    if status not in STATUSES:
        raise ResultFileError(where, f"status must be one of {', '.join(STATUSES)}, "
                                     f"got {show(status)}")
    if "error" in r and not isinstance(r["error"], str):
        raise ResultFileError(where, f"error must be a string, got {show(r['error'])}")
    if "machine" in r and not isinstance(r["machine"], dict):
        raise ResultFileError(where, f"machine must be an object, got {show(r['machine'])}")
    if status != "ok":
        return
    summary = get_object(where, r, "summary")
    duration(where, summary.get("median"), "summary.median", positive=True)
    if "ns" in r:
        durations(where, r["ns"], "ns", scale=1.0)


def settings_label(where: str, settings: dict[str, Any]) -> tuple[str, int]:
    """The settings' short label and their thread count; invalid settings are an error."""
    from dataclasses import fields as dc_fields

    from pyparbench.settings import Settings

    known = {f.name for f in dc_fields(Settings)}
    try:
        obj = Settings.from_dict({k: v for k, v in settings.items() if k in known})
    except (TypeError, ValueError) as e:
        raise ResultFileError(where, f"config.settings: {e}") from None
    if obj.threads > MAX_COUNT:
        raise ResultFileError(where, f"config.settings: {obj.threads} threads is not plausible")
    return obj.label(), obj.threads


def settings_sweep_label(s: dict[str, Any]) -> str:
    """Settings with the intra-op thread count as T: 'sync 1xT library/onednn/openmp none'."""
    aff = s.get("affinity", "none")
    text = (f"{s.get('scheduler', 'sync')} {s.get('inter_op', 1)}xT "
            f"{s.get('operator', 'library')}/{s.get('library', 'onednn')}/"
            f"{s.get('pool', 'openmp')} {aff if isinstance(aff, str) else 'explicit'}")
    if s.get("instances", 1) != 1:
        text += f" x{s['instances']} instances"
    return text


def read_records(source: Path, records: list[tuple[str, dict[str, Any]]], *,
                allow_empty: bool = False) -> ResultSet:
    """Rows from pyparbench records, each with where it was read (for messages)."""
    rows: dict[str, Row] = {}
    notes: list[str] = []
    rs = ResultSet(str(source), str(source), "pyparbench", rows, None, {}, None, notes=notes)
    machine_at = ""
    for where, r in records:
        check_record(where, r)
        config = r["config"]
        settings = dict(config["settings"])
        label, threads = settings_label(where, settings)
        name = settings.pop("name", "") or ""
        if not isinstance(name, str):
            raise ResultFileError(where, f"config.settings.name must be a string, "
                                         f"got {show(name)}")
        base = {"model": config["model"], "batch": config["batch"]}
        # A preset is matched by its name: on another machine it resolves to
        # other thread counts, and comparing presets is the point.
        ident = {**base, "preset": name} if name else {**base, "settings": settings}
        key = canonical(ident)
        sweep_settings = {k: v for k, v in settings.items() if k != "intra_op"}
        sweep = None if name else canonical({**base, "settings": sweep_settings})
        display = printable(f"{config['model']} b{config['batch']} {label}")
        sweep_label = printable(f"{config['model']} b{config['batch']} "
                                + settings_sweep_label(settings))
        machine = r.get("machine")
        if isinstance(machine, dict) and machine:
            if rs.machine is None:
                set_machine(rs, where, "machine", machine)
                machine_at = where
            else:
                same_machine(rs.fields, machine_at, where, machine)
        if r["status"] == "ok":
            samples = tuple(float(x) for x in r.get("ns", ()))
            row = Row(key, display, "ok", float(r["summary"]["median"]), samples,
                      threads, sweep, sweep_label=sweep_label)
        else:
            row = Row(key, display, str(r["status"]), None, (), threads, sweep,
                      error=printable(" ".join(str(r.get("error", "")).split())))
        old = rows.get(key)
        if old is not None:
            if old.status == "ok" and row.status != "ok":
                continue  # a failed retry does not hide a finished result
            notes.append(f"{display}: measured more than once in {source}; the last kept")
        rows[key] = row
    if not rows and not allow_empty:
        raise ResultFileError(source, "no result records")
    return rs


def same_machine(fields: dict[str, str], first: str, where: str, machine: dict[str, Any]
                  ) -> None:
    """Raise unless ``machine`` agrees with ``fields`` (read at ``first``)."""
    other = fingerprint_fields(where, machine)
    for path, label in SIGNIFICANT_FIELDS:
        a, b = fields.get(path), other.get(path)
        if a is not None and b is not None and a != b:
            raise ResultFileError(where, f"measured on another machine than {first} "
                                         f"({label}: {b!r} vs {a!r}); one file holds one "
                                         "machine's results")


def summary_records(source: Path, value: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each setting of a summary's ``models`` as a record (median only)."""
    models = value["models"]
    if not isinstance(models, list):
        raise ResultFileError(source, f"models must be a list, got {show(models)}")
    out = []
    for i, m in enumerate(models):
        where = f"{source}: models[{i}]"
        if not isinstance(m, dict):
            raise ResultFileError(where, f"a JSON {json_type(m)}, not a model entry")
        configs = m.get("configs")
        if not isinstance(configs, list):
            raise ResultFileError(where, f"configs must be a list, got {show(configs)}")
        for j, c in enumerate(configs):
            if not isinstance(c, dict):
                raise ResultFileError(f"{where}.configs[{j}]", f"a JSON {json_type(c)}, "
                                                               "not a setting")
            duration(f"{where}.configs[{j}]", c.get("median_ns"), "median_ns", positive=True)
            out.append((f"{where}.configs[{j}]", {
                "config": {"model": m.get("model"), "batch": m.get("batch"),
                           "settings": c.get("settings")},
                "status": "ok", "summary": {"median": c.get("median_ns")}}))
    return out


def add_summary(rs: ResultSet, where: Path, summary: dict[str, Any]) -> None:
    """The machine's peak, its operator scaling rows, and the fingerprint when
    the rows carried none."""
    rs.peak_gflops = read_peak(where, summary)
    if rs.machine is None and "machine" in summary:
        set_machine(rs, where, "machine", summary["machine"])
    scaling = dotted(summary, "operators.scaling")
    if scaling is None:
        return
    if not isinstance(scaling, list):
        raise ResultFileError(where, f"operators.scaling must be a list, got {show(scaling)}")
    for i, shape in enumerate(scaling):
        at = f"{where}: operators.scaling[{i}]"
        if not isinstance(shape, dict):
            raise ResultFileError(at, f"a JSON {json_type(shape)}, not a shape")
        name = printable(get_string(at, shape, "name"))
        points = shape.get("points")
        if not isinstance(points, list):
            raise ResultFileError(at, f"points must be a list, got {show(points)}")
        sweep = canonical({"operator": name})
        for j, pt in enumerate(points):
            p_at = f"{at}.points[{j}]"
            if not isinstance(pt, dict):
                raise ResultFileError(p_at, f"a JSON {json_type(pt)}, not a point")
            threads = get_int(p_at, pt, "threads", "threads")
            median = duration(p_at, pt.get("median_ns"), "median_ns", positive=True)
            flops: Any = pt.get("flops")
            if flops is not None and (not is_number(flops) or not 0 < float(flops) < 1e18):
                raise ResultFileError(p_at, f"flops must be a positive number, got {show(flops)}")
            key = canonical({"operator": name, "threads": threads})
            rs.rows[key] = Row(key, f"op {name} t{threads}", "ok", median, (), threads, sweep,
                               float(flops) / 1e9 if flops is not None else None,
                               sweep_label=f"op {name}")


def read_peak(where: Path, summary: dict[str, Any]) -> dict[int, float] | None:
    """Measured FMA GFLOP/s per thread count, from ``peak.points``."""
    peak = summary.get("peak")
    if peak is None:
        return None
    if not isinstance(peak, dict):
        raise ResultFileError(where, f"peak must be an object, got {show(peak)}")
    points = peak.get("points")
    if not isinstance(points, list) or not points:
        raise ResultFileError(where, "peak.points must be a non-empty list (the ceilings "
                                     "per thread count)")
    out: dict[int, float] = {}
    for i, pt in enumerate(points):
        at = f"{where}: peak.points[{i}]"
        if not isinstance(pt, dict):
            raise ResultFileError(at, f"a JSON {json_type(pt)}, not a point")
        threads = get_int(at, pt, "threads", "threads")
        g: Any = pt.get("fma_gflops")
        if not is_number(g) or not 0 < float(g) < 1e9:
            raise ResultFileError(at, f"fma_gflops must be a positive GFLOP/s figure, "
                                      f"got {show(g)}")
        out[threads] = float(g)
    return out
