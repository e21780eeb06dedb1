"""Reading result files from any machine, safely: pyparbench's and pytest-benchmark's.

Accepted inputs, recognised by their content (not their names):

* a pyparbench results folder (its ``results.jsonl``, and its ``summary.json``
  for the measured ``peak`` when there is one);
* a pyparbench ``results.jsonl``: one record per configuration, each with
  ``config`` (model, batch, settings), ``status``, ``summary.median`` and the
  raw per-run times ``ns``, and the machine fingerprint ``machine``;
* a pyparbench ``summary.json`` (:mod:`pyparbench.report`): the
  ``results.jsonl`` beside it is read for the rows when it is there (a
  summary holds medians, no per-run samples), else the summary's own
  settings; its measured ``peak`` and its operator scaling rows (standard
  GEMM, convolution and embedding shapes at each thread count) are added;
* a pytest-benchmark JSON file (``--benchmark-json`` or ``--benchmark-save``):
  rows are its benchmarks; raw samples are ``stats.data`` when it was saved
  with ``--benchmark-save-data``; the fingerprint is ``machine_info.pyparbench``
  when the pyparbench pytest plugin was active, else what pytest-benchmark
  itself records (CPU brand, CPU count, Python).

A file comes from somewhere else and is treated as hostile: it is parsed with
:mod:`json` only, never larger than a size limit, and every value used is
type- and range-checked. Whatever is wrong raises :class:`ResultFileError`
with a one-line message naming the file (and line) and what is wrong.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pyparbench.results import SCHEMA, STATUSES

__all__ = [
    "DEFAULT_MAX_BYTES",
    "NOISE_FIELDS",
    "SIGNIFICANT_FIELDS",
    "ResultFileError",
    "ResultSet",
    "Row",
    "check_record",
    "fingerprint_fields",
    "load",
    "parse_jsonl",
    "parse_size",
    "printable",
    "read_text",
    "resolve",
]

DEFAULT_MAX_BYTES = 256 << 20

# Timings beyond these are not measurements but corrupt or hostile values.
MAX_NS = 1e15  # about 11.6 days per run
MAX_COUNT = 1 << 20  # batches, threads, repeats, samples per row: generous upper bounds

# Fingerprint fields that change what a measurement means, with the words
# used to report them: (dotted path in pyparbench's fingerprint, label).
# Unlike results.MACHINE_IDENTITY (which keeps resume on one host) the host
# is not here: the nodes of a cluster are one machine for comparisons.
SIGNIFICANT_FIELDS: tuple[tuple[str, str], ...] = (
    ("cpu_model", "CPU model"),
    ("onednn.isa", "ISA oneDNN dispatches to"),
    ("onednn.version", "oneDNN version"),
    ("onednn.cpu_runtime", "oneDNN CPU runtime"),
    ("openmp.library", "OpenMP runtime"),
    ("cpus.sockets", "sockets"),
    ("cpus.numa_nodes", "NUMA nodes"),
    ("cpus.physical_cores", "physical cores"),
    ("cpus.logical", "logical CPUs"),
    ("cpus.allowed", "CPUs allowed to the process"),
    ("governor", "CPU frequency governor"),
    ("pyparbench", "pyparbench version"),
    ("python", "Python version"),
)
# Fields that differ between runs of one machine and are never reported:
# the host name (nodes of one cluster are the same machine), clocks and
# times, and values that depend on the environment of one process.
NOISE_FIELDS = ("host", "node", "started", "datetime", "hz_actual", "hz_actual_friendly",
                "openmp.max_threads", "openmp.num_procs", "cpus.os_cpu_count", "onednn.hash")

Kind = Literal["pyparbench", "pytest-benchmark"]


class ResultFileError(ValueError):
    """A file that is not a usable result; the message is one line naming the file."""

    def __init__(self, path: str | Path, what: str) -> None:
        super().__init__(printable(f"{path}: {what}"))
        self.path = str(path)
        self.what = what


def printable(text: str) -> str:
    """``text`` with control characters (newlines, terminal escapes) shown
    escaped, so that text from a file stays one harmless line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclass(frozen=True)
class Row:
    """One measured thing (a configuration, or a pytest-benchmark test), its
    per-run times in nanoseconds and what is needed to compare it."""

    key: str  # identity used to match rows across files
    label: str  # what a person reads
    status: str  # "ok", or why there is no timing ("error", "timeout", "skipped")
    median_ns: float | None
    samples_ns: tuple[float, ...] = ()
    threads: int | None = None  # threads it ran with, when known
    sweep: str | None = None  # its key with the thread count left out (thread-sweep curves)
    gflop: float | None = None  # work per run, when the file says
    error: str = ""
    sweep_label: str = ""  # what a person reads for its thread sweep


@dataclass
class ResultSet:
    """The rows of one input and the machine that measured them."""

    path: str  # as given
    source: str  # the file the rows were read from
    kind: Kind
    rows: dict[str, Row]
    machine: dict[str, Any] | None  # the raw fingerprint, None when the file has none
    fields: dict[str, str]  # significant fingerprint fields, as text
    cores: int | None  # physical cores the process could use, when known
    peak_gflops: dict[int, float] | None = None  # measured FMA peak per thread count
    notes: list[str] = field(default_factory=list)


def parse_size(text: str) -> int:
    """A byte count such as ``1000``, ``64K``, ``256M`` or ``1G``.

    Raises
    ------
    ValueError
        Anything else, or zero.
    """
    t = text.strip()
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(t[-1:].lower(), 1)
    digits = t[:-1] if scale > 1 else t
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 15 or int(digits) < 1:
        raise ValueError(f"a size is a positive number of bytes such as 256M, got {text!r}")
    return int(digits) * scale


# -- reading -----------------------------------------------------------------


def read_text(path: Path, max_bytes: int) -> str:
    """The whole text of a regular file of at most ``max_bytes`` bytes."""
    try:
        st = path.stat()
    except OSError as e:
        raise ResultFileError(path, f"cannot read it ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ResultFileError(path, "not a regular file")
    if st.st_size > max_bytes:
        raise ResultFileError(path, f"{st.st_size} bytes, over the {max_bytes}-byte limit "
                                    "(--max-bytes)")
    try:
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)  # the file may have grown since stat
    except OSError as e:
        raise ResultFileError(path, f"cannot read it ({e.strerror or e})") from None
    if len(data) > max_bytes:
        raise ResultFileError(path, f"over the {max_bytes}-byte limit (--max-bytes)")
    if b"\x00" in data:
        raise ResultFileError(path, "binary data, not JSON text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ResultFileError(path, f"not UTF-8 text (byte {e.start}); binary data?") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _loads(text: str) -> Any:
    """json.loads that refuses NaN and Infinity (Python's json accepts them)."""
    return json.loads(text, parse_constant=_reject_constant)


def _json_error(e: Exception) -> str:
    if isinstance(e, json.JSONDecodeError):
        if e.pos >= len(e.doc.rstrip()) or e.msg.startswith("Unterminated string"):
            return f"not complete JSON (ends at line {e.lineno} column {e.colno}; truncated?)"
        return f"not JSON ({e.msg} at line {e.lineno} column {e.colno})"
    if isinstance(e, RecursionError):
        return "JSON nested too deeply"
    if "digits" in str(e):  # int() refuses numbers of thousands of digits
        return "not usable JSON (a number with thousands of digits)"
    return f"not usable JSON ({e})"  # NaN or Infinity, refused by parse_constant


def _first_line_is_object(text: str) -> bool:
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        return isinstance(_loads(first), dict)
    except (ValueError, RecursionError):
        return False


def parse_json(path: Path, text: str) -> Any:
    """The JSON value of a whole file."""
    try:
        return _loads(text)
    except (ValueError, RecursionError) as e:
        raise ResultFileError(path, _json_error(e)) from None


def parse_jsonl(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of a JSONL file."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = _loads(line)
        except (ValueError, RecursionError) as e:
            raise ResultFileError(f"{path}:{n}", _json_error(e)) from None
        if not isinstance(value, dict):
            raise ResultFileError(f"{path}:{n}", f"a JSON {_type(value)}, not a result record "
                                                 "(an object)")
        out.append((n, value))
    return out


def resolve(path: str | Path) -> tuple[Path, Path | None]:
    """(the file holding rows, the summary.json with the machine's peak or None)
    for a folder, a results.jsonl, a summary.json or a pytest-benchmark file."""
    p = Path(path)
    if p.is_dir():
        results, summary = p / "results.jsonl", p / "summary.json"
        if results.is_file():
            return results, summary if summary.is_file() else None
        if summary.is_file():
            return summary, None
        raise ResultFileError(p, "a folder with neither results.jsonl nor summary.json")
    if p.name == "summary.json" and (p.parent / "results.jsonl").is_file():
        # The raw samples are in the results beside it; the summary adds the peak.
        return p.parent / "results.jsonl", p
    if not p.exists():
        raise ResultFileError(p, "no such file or folder")
    return p, None


def load(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ResultSet:
    """Read one input (see the module docstring) into a :class:`ResultSet`.

    Raises
    ------
    ResultFileError
        The input is missing, too large, not JSON, or not a result; the
        message names the file (and line) and what is wrong.
    """
    source, summary_path = resolve(path)
    text = read_text(source, max_bytes)
    if not text.strip():
        raise ResultFileError(source, "empty file")
    value: Any = None
    try:
        value = _loads(text)
        whole = True
    except (ValueError, RecursionError) as e:
        # Not one JSON value: JSONL when its first line is an object of its
        # own, else one broken document (say, a truncated pretty-printed file).
        if not _first_line_is_object(text):
            raise ResultFileError(source, _json_error(e)) from None
        whole = False
    if whole and isinstance(value, dict) and "benchmarks" in value:
        rs = _pytest_benchmark(source, value)
    elif whole and isinstance(value, dict) and "models" in value and "config" not in value:
        rs = _pyparbench(source, _summary_records(source, value), allow_empty=True)
        _add_summary(rs, source, value)
        if not rs.rows:
            raise ResultFileError(source, "a summary with no measured settings or operators")
    elif whole and isinstance(value, dict) and "config" not in value:
        raise ResultFileError(source, "a JSON object that is not a result file (no "
                                      "'benchmarks' of pytest-benchmark, no 'config' of a "
                                      "pyparbench record, no 'models' of a summary)")
    elif whole and not isinstance(value, dict):
        raise ResultFileError(source, f"a JSON {_type(value)}, not a result file")
    else:
        lines = [(1, value)] if whole else parse_jsonl(source, text)
        rs = _pyparbench(source, [(f"{source}:{n}", r) for n, r in lines])
    rs.path = str(path)
    if summary_path is not None:
        summary = parse_json(summary_path, read_text(summary_path, max_bytes))
        if not isinstance(summary, dict):
            raise ResultFileError(summary_path, f"a JSON {_type(summary)}, not a summary "
                                                "(an object)")
        _add_summary(rs, summary_path, summary)
    return rs


# -- pyparbench records -------------------------------------------------------


def check_record(where: str, r: dict[str, Any]) -> None:
    """Raise ResultFileError(where, ...) unless ``r`` is a well-formed
    pyparbench result record (the fields compare and merge rely on)."""
    key = r.get("key")
    if key is not None and not isinstance(key, str):
        raise ResultFileError(where, f"key must be a string, got {_show(key)}")
    # Records written before the schema field existed have the same shape.
    schema = r.get("schema", SCHEMA)
    if schema != SCHEMA or isinstance(schema, bool):
        raise ResultFileError(where, f"a record of schema {_show(schema)}; this pyparbench "
                                     f"reads schema {SCHEMA}")
    config = _obj(where, r, "config")
    _str(where, config, "model", "config.model")
    _int(where, config, "batch", "config.batch")
    settings = _obj(where, config, "settings", "config.settings")
    for k, v in settings.items():
        if not _plain(v):
            raise ResultFileError(where, f"config.settings.{k} must be a string, number, "
                                         f"boolean, null or lists of CPUs, got {_show(v)}")
    status = r.get("status")
    if status not in STATUSES:
        raise ResultFileError(where, f"status must be one of {', '.join(STATUSES)}, "
                                     f"got {_show(status)}")
    if "error" in r and not isinstance(r["error"], str):
        raise ResultFileError(where, f"error must be a string, got {_show(r['error'])}")
    if "machine" in r and not isinstance(r["machine"], dict):
        raise ResultFileError(where, f"machine must be an object, got {_show(r['machine'])}")
    if status != "ok":
        return
    summary = _obj(where, r, "summary")
    _time(where, summary.get("median"), "summary.median", positive=True)
    if "ns" in r:
        _samples(where, r["ns"], "ns", scale=1.0)


def _settings_label(where: str, settings: dict[str, Any]) -> tuple[str, int]:
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


def _sweep_label(s: dict[str, Any]) -> str:
    """Settings with the intra-op thread count as T: 'sync 1xT library/onednn/openmp none'."""
    aff = s.get("affinity", "none")
    text = (f"{s.get('scheduler', 'sync')} {s.get('inter_op', 1)}xT "
            f"{s.get('operator', 'library')}/{s.get('library', 'onednn')}/"
            f"{s.get('pool', 'openmp')} {aff if isinstance(aff, str) else 'explicit'}")
    if s.get("instances", 1) != 1:
        text += f" x{s['instances']} instances"
    return text


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _pyparbench(source: Path, records: list[tuple[str, dict[str, Any]]], *,
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
        label, threads = _settings_label(where, settings)
        name = settings.pop("name", "") or ""
        if not isinstance(name, str):
            raise ResultFileError(where, f"config.settings.name must be a string, "
                                         f"got {_show(name)}")
        base = {"model": config["model"], "batch": config["batch"]}
        # A preset is matched by its name: on another machine it resolves to
        # other thread counts, and comparing presets is the point.
        ident = {**base, "preset": name} if name else {**base, "settings": settings}
        key = _canonical(ident)
        sweep_settings = {k: v for k, v in settings.items() if k != "intra_op"}
        sweep = None if name else _canonical({**base, "settings": sweep_settings})
        display = printable(f"{config['model']} b{config['batch']} {label}")
        sweep_label = printable(f"{config['model']} b{config['batch']} "
                                + _sweep_label(settings))
        machine = r.get("machine")
        if isinstance(machine, dict) and machine:
            if rs.machine is None:
                _set_machine(rs, where, "machine", machine)
                machine_at = where
            else:
                _same_machine(rs.fields, machine_at, where, machine)
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


def _same_machine(fields: dict[str, str], first: str, where: str, machine: dict[str, Any]
                  ) -> None:
    other = fingerprint_fields(where, machine)
    for path, label in SIGNIFICANT_FIELDS:
        a, b = fields.get(path), other.get(path)
        if a is not None and b is not None and a != b:
            raise ResultFileError(where, f"measured on another machine than {first} "
                                         f"({label}: {b!r} vs {a!r}); one file holds one "
                                         "machine's results")


# -- summary.json --------------------------------------------------------------
# The report's summary (pyparbench.report.summary): ``machine``, ``peak``
# (the ceilings of ``pyparbench peak``, with ``points``: per thread count its
# ``fma_gflops``), ``models`` (per model and batch, ``configs``: every
# setting with its median) and ``operators.scaling`` (standard shapes at each
# thread count). A summary holds medians only, no per-run samples.


def _summary_records(source: Path, value: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each setting of a summary's ``models`` as a record (median only)."""
    models = value["models"]
    if not isinstance(models, list):
        raise ResultFileError(source, f"models must be a list, got {_show(models)}")
    out = []
    for i, m in enumerate(models):
        where = f"{source}: models[{i}]"
        if not isinstance(m, dict):
            raise ResultFileError(where, f"a JSON {_type(m)}, not a model entry")
        configs = m.get("configs")
        if not isinstance(configs, list):
            raise ResultFileError(where, f"configs must be a list, got {_show(configs)}")
        for j, c in enumerate(configs):
            if not isinstance(c, dict):
                raise ResultFileError(f"{where}.configs[{j}]", f"a JSON {_type(c)}, "
                                                               "not a setting")
            _time(f"{where}.configs[{j}]", c.get("median_ns"), "median_ns", positive=True)
            out.append((f"{where}.configs[{j}]", {
                "config": {"model": m.get("model"), "batch": m.get("batch"),
                           "settings": c.get("settings")},
                "status": "ok", "summary": {"median": c.get("median_ns")}}))
    return out


def _add_summary(rs: ResultSet, where: Path, summary: dict[str, Any]) -> None:
    """The machine's peak, its operator scaling rows, and the fingerprint when
    the rows carried none."""
    rs.peak_gflops = _peak(where, summary)
    if rs.machine is None and "machine" in summary:
        _set_machine(rs, where, "machine", summary["machine"])
    scaling = _get(summary, "operators.scaling")
    if scaling is None:
        return
    if not isinstance(scaling, list):
        raise ResultFileError(where, f"operators.scaling must be a list, got {_show(scaling)}")
    for i, shape in enumerate(scaling):
        at = f"{where}: operators.scaling[{i}]"
        if not isinstance(shape, dict):
            raise ResultFileError(at, f"a JSON {_type(shape)}, not a shape")
        name = printable(_str(at, shape, "name"))
        points = shape.get("points")
        if not isinstance(points, list):
            raise ResultFileError(at, f"points must be a list, got {_show(points)}")
        sweep = _canonical({"operator": name})
        for j, pt in enumerate(points):
            p_at = f"{at}.points[{j}]"
            if not isinstance(pt, dict):
                raise ResultFileError(p_at, f"a JSON {_type(pt)}, not a point")
            threads = _int(p_at, pt, "threads", "threads")
            median = _time(p_at, pt.get("median_ns"), "median_ns", positive=True)
            flops: Any = pt.get("flops")
            if flops is not None and (not _num(flops) or not 0 < float(flops) < 1e18):
                raise ResultFileError(p_at, f"flops must be a positive number, got {_show(flops)}")
            key = _canonical({"operator": name, "threads": threads})
            rs.rows[key] = Row(key, f"op {name} t{threads}", "ok", median, (), threads, sweep,
                               float(flops) / 1e9 if flops is not None else None,
                               sweep_label=f"op {name}")


def _peak(where: Path, summary: dict[str, Any]) -> dict[int, float] | None:
    """Measured FMA GFLOP/s per thread count, from ``peak.points``."""
    peak = summary.get("peak")
    if peak is None:
        return None
    if not isinstance(peak, dict):
        raise ResultFileError(where, f"peak must be an object, got {_show(peak)}")
    points = peak.get("points")
    if not isinstance(points, list) or not points:
        raise ResultFileError(where, "peak.points must be a non-empty list (the ceilings "
                                     "per thread count)")
    out: dict[int, float] = {}
    for i, pt in enumerate(points):
        at = f"{where}: peak.points[{i}]"
        if not isinstance(pt, dict):
            raise ResultFileError(at, f"a JSON {_type(pt)}, not a point")
        threads = _int(at, pt, "threads", "threads")
        g: Any = pt.get("fma_gflops")
        if not _num(g) or not 0 < float(g) < 1e9:
            raise ResultFileError(at, f"fma_gflops must be a positive GFLOP/s figure, "
                                      f"got {_show(g)}")
        out[threads] = float(g)
    return out


# -- pytest-benchmark ------------------------------------------------------------


def _pytest_benchmark(source: Path, value: dict[str, Any]) -> ResultSet:
    benches = value["benchmarks"]
    if not isinstance(benches, list):
        raise ResultFileError(source, f"benchmarks must be a list, got {_show(benches)}")
    info = value.get("machine_info")
    if not isinstance(info, dict):
        raise ResultFileError(source, "no machine_info object: not a pytest-benchmark file")
    rows: dict[str, Row] = {}
    for i, b in enumerate(benches):
        where = f"{source}: benchmarks[{i}]"
        if not isinstance(b, dict):
            raise ResultFileError(where, f"a JSON {_type(b)}, not a benchmark")
        name = _str(where, b, "name")
        fullname = _str(where, b, "fullname")
        params = b.get("params")
        if params is not None and not isinstance(params, dict):
            raise ResultFileError(where, f"params must be an object or null, got {_show(params)}")
        extra = b.get("extra_info", {})
        if not isinstance(extra, dict):
            raise ResultFileError(where, f"extra_info must be an object, got {_show(extra)}")
        st = _obj(where, b, "stats")
        median = _time(where, st.get("median"), "stats.median", positive=True, scale=1e9)
        samples: tuple[float, ...] = ()
        if "data" in st:
            samples = _samples(where, st["data"], "stats.data", scale=1e9)
        threads = _bench_threads(where, params or {}, extra)
        gflop = extra.get("gflop")
        if gflop is not None and (not _num(gflop) or not 0 < float(gflop) < 1e12):
            raise ResultFileError(where, f"extra_info.gflop must be a positive number, "
                                         f"got {_show(gflop)}")
        base = fullname.split("[", 1)[0]
        rest = {k: v for k, v in (params or {}).items() if k not in ("ppb_threads", "threads")}
        sweep = _canonical({"test": base, "params": rest}) if threads is not None else None
        if fullname in rows:
            raise ResultFileError(where, f"benchmark {fullname!r} appears twice")
        rest_ids = ",".join(f"{k}={v}" for k, v in sorted(rest.items()))
        rows[fullname] = Row(fullname, printable(_short(fullname)), "ok", median, samples,
                             threads, sweep, float(gflop) if gflop is not None else None,
                             sweep_label=printable(_short(base)
                                                   + (f"[{rest_ids}]" if rest_ids else "")))
    if not rows:
        raise ResultFileError(source, "a pytest-benchmark file with no benchmarks")
    rs = ResultSet(str(source), str(source), "pytest-benchmark", rows, None, {}, None)
    ours = info.get("pyparbench")
    if isinstance(ours, dict) and "error" not in ours:
        _set_machine(rs, source, "machine_info.pyparbench", ours)
    else:
        rs.machine = info
        rs.fields = _pytest_benchmark_fields(source, info)
        rs.notes.append(f"{source}: saved without the pyparbench plugin; only pytest-benchmark's "
                        "own machine_info (CPU brand and count, Python) can be compared")
    return rs


def _bench_threads(where: str, params: dict[str, Any], extra: dict[str, Any]) -> int | None:
    for name, src in (("ppb_threads", params), ("threads", params), ("threads", extra)):
        v = src.get(name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_COUNT:
            raise ResultFileError(where, f"{name} must be a thread count, got {_show(v)}")
        return v
    return None


def _short(fullname: str) -> str:
    """'bench/test_ops.py::test_gemm[t2]' -> 'test_ops.py::test_gemm[t2]'."""
    path, sep, rest = fullname.partition("::")
    return f"{path.rsplit('/', 1)[-1]}{sep}{rest}" if sep else fullname


def _pytest_benchmark_fields(source: Path, info: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    cpu = info.get("cpu")
    if isinstance(cpu, dict):
        brand = cpu.get("brand_raw") or cpu.get("brand")
        if isinstance(brand, str):
            out["cpu_model"] = printable(brand[:200])
        if isinstance(cpu.get("count"), int):
            out["cpus.logical"] = str(cpu["count"])
    if isinstance(info.get("python_version"), str):
        out["python"] = _minor(info["python_version"])
    return out


# -- the fingerprint -------------------------------------------------------------


def _set_machine(rs: ResultSet, where: str | Path, name: str, machine: Any) -> None:
    if not isinstance(machine, dict):
        raise ResultFileError(where, f"{name} must be an object, got {_show(machine)}")
    rs.machine = machine
    rs.fields = fingerprint_fields(str(where), machine)
    rs.cores = _cores(machine)


def _get(d: dict[str, Any], path: str) -> Any:
    v: Any = d
    for part in path.split("."):
        if not isinstance(v, dict):
            return None
        v = v.get(part)
    return v


def fingerprint_fields(where: str, machine: dict[str, Any]) -> dict[str, str]:
    """The significant fields of a pyparbench fingerprint, as comparable text
    (absent fields are left out; a field of the wrong type is an error)."""
    out: dict[str, str] = {}
    for path, label in SIGNIFICANT_FIELDS:
        v = _get(machine, path)
        if v is None:
            continue
        if path == "cpus.allowed":
            # The count matters; which CPU numbers a job got (cgroups) does not.
            if not isinstance(v, list) or not all(_int_ok(c, 0) for c in v):
                raise ResultFileError(where, f"machine.{path} must be a list of CPU numbers")
            out[path] = str(len(v))
        elif path.startswith("cpus."):
            if not _int_ok(v, 1):
                raise ResultFileError(where, f"machine.{path} must be a positive integer, "
                                             f"got {_show(v)}")
            out[path] = str(v)
        elif isinstance(v, str):
            if path == "openmp.library":
                v = v.rsplit("/", 1)[-1]  # the runtime, wherever it is installed
            elif path == "python":
                v = _minor(v)
            elif path == "governor" and not v:
                v = "(no cpufreq)"  # the fingerprint's "" when the kernel exposes no governor
            out[path] = printable(v[:200])
        else:
            raise ResultFileError(where, f"machine.{path} must be a string, got {_show(v)}")
    return out


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _cores(machine: dict[str, Any]) -> int | None:
    """Physical cores the measuring process could use: from the topology when
    the fingerprint has one, else min(physical cores, allowed CPUs)."""
    topo = machine.get("topology")
    allowed = _get(machine, "cpus.allowed")
    allowed_set = ({c for c in allowed if _int_ok(c, 0)} if isinstance(allowed, list)
                   else None)
    if isinstance(topo, dict) and isinstance(topo.get("cores"), list):
        cores = [c.get("cpus") for c in topo["cores"] if isinstance(c, dict)]
        if allowed_set is None:
            allowed_set = {x for c in cores if isinstance(c, list) for x in c}
        n = sum(1 for c in cores if isinstance(c, list) and allowed_set & set(c))
        if n:
            return n
    phys = _get(machine, "cpus.physical_cores")
    if _int_ok(phys, 1):
        return min(int(phys), len(allowed_set)) if allowed_set else int(phys)
    return None


# -- checks ---------------------------------------------------------------------------


def _type(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
            float: "number", type(None): "null"}.get(type(v), type(v).__name__)


def _show(v: Any) -> str:
    """A short rendering of a value from a file (containers by type only: a
    hostile one may be huge or deeply nested)."""
    if isinstance(v, (dict, list)):
        return f"a JSON {_type(v)}"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**30:
        return "a huge integer"
    text = json.dumps(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool, int, float))


def _plain(v: Any) -> bool:
    """A scalar, a list of scalars or a list of lists of scalars (CPU lists)."""
    if isinstance(v, list):
        return all(_scalar(x) or (isinstance(x, list) and all(_scalar(y) for y in x))
                   for x in v)
    return _scalar(v)


def _num(v: Any) -> bool:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:  # an integer beyond any float
        return False


def _int_ok(v: Any, lo: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= MAX_COUNT


def _obj(where: str, d: dict[str, Any], key: str, name: str | None = None) -> dict[str, Any]:
    v = d.get(key)
    if v is None:
        raise ResultFileError(where, f"no {name or key} (an object)")
    if not isinstance(v, dict):
        raise ResultFileError(where, f"{name or key} must be an object, got {_show(v)}")
    return v


def _str(where: str, d: dict[str, Any], key: str, name: str | None = None) -> str:
    v = d.get(key)
    if not isinstance(v, str) or not v or len(v) > 4096:
        raise ResultFileError(where, f"{name or key} must be a non-empty string, got {_show(v)}")
    return v


def _int(where: str, d: dict[str, Any], key: str, name: str) -> int:
    v: Any = d.get(key)
    if not _int_ok(v, 1):
        raise ResultFileError(where, f"{name} must be an integer from 1 to {MAX_COUNT}, "
                                     f"got {_show(v)}")
    return int(v)


def _time(where: str, v: Any, name: str, *, positive: bool, scale: float = 1.0) -> float:
    """A duration in the file's unit, returned in ns (``scale``: ns per unit)."""
    if not _num(v):
        raise ResultFileError(where, f"{name} must be a finite number, got {_show(v)}")
    ns = float(v) * scale
    if ns < 0 or (positive and ns == 0) or ns > MAX_NS:
        raise ResultFileError(where, f"{name} = {_show(v)} is not a plausible duration")
    return ns


def _samples(where: str, v: Any, name: str, *, scale: float) -> tuple[float, ...]:
    if not isinstance(v, list):
        raise ResultFileError(where, f"{name} must be a list of durations, got {_show(v)}")
    if len(v) > MAX_COUNT:
        raise ResultFileError(where, f"{name}: {len(v)} samples is not plausible")
    return tuple(_time(where, x, f"{name}[{i}]", positive=False, scale=scale)
                 for i, x in enumerate(v))
