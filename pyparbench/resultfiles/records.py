"""pyparbench's own files: result records (``results.jsonl``) and the report's
``summary.json``."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any

from pyparbench.choices import PRESETS
from pyparbench.machine.fingerprint import fingerprint_differences
from pyparbench.resultfiles.fingerprint import fingerprint_fields
from pyparbench.resultfiles.rows import ResultSet, Row, RowName, set_machine
from pyparbench.resultfiles.schema import Result, check_record
from pyparbench.resultfiles.values import (
    MAX_COUNT,
    ResultFileError,
    canonical,
    duration,
    get_int,
    get_string,
    int_ok,
    is_number,
    json_type,
    printable,
    show,
)
from pyparbench.settings import Settings

__all__ = [
    "add_summary",
    "check_record",
    "read_peak",
    "read_records",
    "read_result",
    "same_machine",
    "settings_label",
    "settings_sweep_label",
    "summary_records",
]


def settings_label(where: str, settings: dict[str, Any]) -> tuple[str, int]:
    """The settings' short label and their thread count; invalid settings are an error."""
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
    if s.get("precision", "fp32") != "fp32":
        text += f" {s['precision']}"
    return text


def read_result(where: str, record: dict[str, Any]) -> Result:
    """One record of the main job's ``results.jsonl`` as a typed
    :class:`~pyparbench.resultfiles.schema.Result`, every value checked.

    Raises
    ------
    ResultFileError
        Naming ``where`` and what is wrong.
    """
    return Result.from_dict(record, where)


@dataclass
class _Entry:
    """What one row is read from: its label and its records by round."""

    display: str
    threads: int
    sweep: str | None
    sweep_label: str
    group: str  # its setting, the name aside: processes are pooled by it
    name: RowName
    precision: str = "fp32"
    rounds: dict[int, dict[str, Any]] = field(default_factory=dict)


def read_records(source: Path, records: list[tuple[str, dict[str, Any]]], *,
                 allow_empty: bool = False, processes: bool = True) -> ResultSet:
    """Rows from pyparbench records, each with where it was read (for messages).

    A row is a model, batch and setting (a preset by its name), in the
    native executor or in one framework; its records of several
    confirmation rounds are several processes of it, and so are those of
    the same setting under other names (``processes``: False for records
    that are not single processes, such as a summary's medians). A setting
    without a precision (a file written before the knob) reads fp32, and an
    fp32 row keeps the key it had then; a bf16 row is keyed apart, a
    preset's by its name and precision."""
    entries: dict[str, _Entry] = {}
    notes: list[str] = []
    rs = ResultSet(str(source), str(source), "pyparbench", {}, None, {}, None, notes=notes)
    machine_at = ""
    for where, r in records:
        check_record(where, r)
        config = r["config"]
        settings = dict(config["settings"])
        label, threads = settings_label(where, settings)
        precision = str(settings.get("precision", "fp32"))  # checked by settings_label
        if precision == "fp32":
            settings.pop("precision", None)  # keys as before the knob
        name = settings.pop("name", "") or ""
        full, _ = settings_label(where, settings)
        if not isinstance(name, str):
            raise ResultFileError(where, f"config.settings.name must be a string, "
                                         f"got {show(name)}")
        rnd = config.get("round", 0)
        if not int_ok(rnd, 0):
            raise ResultFileError(where, f"config.round must be an integer >= 0, got {show(rnd)}")
        base: dict[str, Any] = {"model": config["model"], "batch": config["batch"]}
        head = runner = ""
        if config.get("framework") is not None:
            # A framework's run of a setting is another row than the executor's.
            framework, mode = config["framework"], config.get("mode")
            if not isinstance(framework, str) or not (mode is None or isinstance(mode, str)):
                raise ResultFileError(where, "config.framework and config.mode must be "
                                             f"names, got {show(framework)} and {show(mode)}")
            base.update(framework=framework, mode=mode)
            runner = f"{framework} ({mode})" if mode else framework
            head = runner + " "
        # A preset is matched by its name: on another machine it resolves to
        # other thread counts, and comparing presets is the point.
        ident = ({**base, "preset": name, **({"precision": precision} if precision != "fp32"
                                              else {})}
                 if name else {**base, "settings": settings})
        key = canonical(ident)
        sweep_settings = {k: v for k, v in settings.items() if k != "intra_op"}
        entry = entries.get(key)
        if entry is None:
            entry = entries[key] = _Entry(
                printable(f"{head}{config['model']} b{config['batch']} {label}"), threads,
                None if name else canonical({**base, "settings": sweep_settings}),
                printable(f"{head}{config['model']} b{config['batch']} "
                          + settings_sweep_label(settings)),
                # A framework's run under a name of its own (OpenVINO's hints,
                # its defaults) sets knobs the settings do not hold: its own group.
                canonical({**base, "settings": settings,
                           **({"preset": name} if head and name and name not in PRESETS
                              else {})}),
                # A precision other than fp32 is part of the group: the short
                # keys under it (a preset's name) are the same at every precision.
                RowName(printable(f"{config['model']} b{config['batch']}"
                                  + ("" if precision == "fp32" else f" {precision}")),
                        printable(runner), printable(name), printable(full)), precision)
        machine = r.get("machine")
        if isinstance(machine, dict) and machine:
            if rs.machine is None:
                set_machine(rs, where, "machine", machine)
                machine_at = where
            else:
                same_machine(rs.fields, machine_at, where, machine)
        old = entry.rounds.get(rnd)
        if old is not None:
            if old["status"] == "ok" and r["status"] != "ok":
                continue  # a failed retry does not hide a finished result
            notes.append(f"{entry.display}: measured more than once in {source}; "
                         "the last kept")
        entry.rounds[rnd] = r
    # Every ok process of each setting, under whichever name it ran.
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in entries.values():
        groups.setdefault(entry.group, []).extend(
            r for r in entry.rounds.values() if r["status"] == "ok")
    for key, entry in entries.items():
        rs.rows[key] = _row(key, entry, groups[entry.group], processes)
    if processes:
        rs.process_groups = [tuple(float(r["summary"]["median"]) for r in g)
                             for g in groups.values()]
    if not rs.rows and not allow_empty:
        raise ResultFileError(source, "no result records")
    return rs


def _row(key: str, entry: _Entry, group: list[dict[str, Any]], processes: bool) -> Row:
    """A row from its records (and its setting's processes under other names)."""
    ok = [r for r in entry.rounds.values() if r["status"] == "ok"]
    if not ok:
        last = list(entry.rounds.values())[-1]
        return Row(key, entry.display, str(last["status"]), None, (), entry.threads,
                   entry.sweep, error=printable(" ".join(str(last.get("error", "")).split())),
                   sweep_label=entry.sweep_label, name=entry.name, precision=entry.precision)
    medians = tuple(float(r["summary"]["median"]) for r in group)
    samples = tuple(float(x) for r in group for x in r.get("ns", ()))
    return Row(key, entry.display, "ok", statistics.median(medians), samples, entry.threads,
               entry.sweep, sweep_label=entry.sweep_label,
               processes=medians if processes else (), name=entry.name,
               precision=entry.precision)


def same_machine(fields: dict[str, str], first: str, where: str, machine: dict[str, Any]
                 ) -> None:
    """Raise unless ``machine`` agrees with ``fields`` (read at ``first``)."""
    diffs = fingerprint_differences([fields, fingerprint_fields(where, machine)])
    if diffs:
        d = diffs[0]
        raise ResultFileError(where, f"measured on another machine than {first} "
                                     f"({d.field.label}: {d.values[1]!r} vs {d.values[0]!r}); "
                                     "one file holds one machine's results")


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
    rs.peak_bf16_gflops = read_peak(where, summary, "bf16_gflops")
    rs.peak_int8_gops = read_peak(where, summary, "int8_gops")
    warning = summary["peak"].get("fma_warning") if isinstance(summary.get("peak"), dict) else None
    if isinstance(warning, str) and warning:
        # Its % of peak and a per-peak comparison rest on a ceiling the
        # machine's CPUs may share (pyparbench.machine.peak).
        rs.notes.append(f"{rs.path}: its FMA ceiling is flagged: {warning[:300]}")
    if rs.machine is None and "machine" in summary:
        set_machine(rs, where, "machine", summary["machine"])
    operators = summary.get("operators")
    scaling = operators.get("scaling") if isinstance(operators, dict) else None
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
                               sweep_label=f"op {name}",
                               name=RowName(f"op {name}", item=f"t{threads}"))


def read_peak(where: Path, summary: dict[str, Any], ceiling: str = "fma_gflops"
              ) -> dict[int, float] | None:
    """Measured FMA GFLOP/s per thread count, from ``peak.points``;
    ``ceiling`` "bf16_gflops" / "int8_gops": the bf16 / int8 dot products'
    instead, None when no point has it (not measured: no such dot products,
    or an older file)."""
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
        g: Any = pt.get(ceiling)
        if g is None and ceiling != "fma_gflops":
            continue
        if not is_number(g) or not 0 < float(g) < 1e9:
            raise ResultFileError(at, f"{ceiling} must be a positive GFLOP/s figure, "
                                      f"got {show(g)}")
        out[threads] = float(g)
    return out or None
