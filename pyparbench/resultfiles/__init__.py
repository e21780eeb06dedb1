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
  itself records (CPU brand, CPU count, Python);
* a folder of runs of one suite on one machine, read as one input
  (:mod:`.merged`): results folders of the main job (each row holding every
  run's processes), or pytest-benchmark JSON files (as
  ``--benchmark-autosave`` fills ``.benchmarks/<machine>/``), each file a
  process of every row it holds.

The package: ``values`` (safe reading, value checks, ``ResultFileError``),
``fingerprint`` (a fingerprint's compared fields as text), ``rows`` (``Row``,
``ResultSet``), ``schema`` (the main job's typed record ``Result`` with its
``RunConfig`` and timing ``Summary``, its statuses and schema version, and
the checks of a record read back), ``records`` (our JSONL records and
summaries), ``op_result`` (the operator tasks' typed record ``OpResult``
with its ``OpTask``, ``OpShape``, ``OpPoint`` and ``OpNode``),
``measurements`` (peak files, conditions, and the operator record's check),
``pytest_benchmark``, ``merged`` (several runs read as one input). What
is computed from the rows (how much a setting's processes differ, ratios,
regrets) is :mod:`pyparbench.stats`'s; the names
it took from here (``ProcessSpread``, ``RatioEstimate``, ``estimate_ratio``,
``pooled_spread``, and the modules ``spread`` and ``processes``) are still
importable from here.

A file comes from somewhere else and is treated as hostile: it is parsed with
:mod:`json` only, never larger than a size limit, and every value used is
type- and range-checked. Whatever is wrong raises :class:`ResultFileError`
with a one-line message naming the file (and line) and what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyparbench.resultfiles.fingerprint import fingerprint_fields
from pyparbench.resultfiles.op_result import OpResult
from pyparbench.resultfiles.merged import MAX_RUNS, merge_runs
from pyparbench.resultfiles.pytest_benchmark import read_pytest_benchmark
from pyparbench.resultfiles.records import (
    add_summary,
    check_record,
    read_records,
    read_result,
    summary_records,
)
from pyparbench.resultfiles.rows import ResultSet, Row, RowName
from pyparbench.resultfiles.schema import SCHEMA, STATUSES, Result, RunConfig
from pyparbench.resultfiles.values import (
    DEFAULT_MAX_BYTES,
    JsonlRead,
    ResultFileError,
    first_line_is_object,
    json_error,
    json_type,
    loads,
    parse_json,
    parse_jsonl,
    parse_size,
    printable,
    read_bytes,
    read_json,
    read_json_object,
    read_jsonl,
    read_text,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "JsonlRead",
    "OpResult",
    "Result",
    "ResultFileError",
    "RunConfig",
    "SCHEMA",
    "STATUSES",
    "ResultSet",
    "Row",
    "RowName",
    "check_record",
    "fingerprint_fields",
    "load",
    "loads",
    "merge_runs",
    "parse_json",
    "parse_jsonl",
    "parse_size",
    "printable",
    "read_bytes",
    "read_json",
    "read_json_object",
    "read_jsonl",
    "read_result",
    "read_text",
    "resolve",
]


def resolve(path: str | Path) -> tuple[Path, Path | None]:
    """(the file holding rows, the summary.json with the machine's peak or None)
    for a results folder, a results.jsonl, a summary.json or a
    pytest-benchmark file.

    Raises
    ------
    ResultFileError
        A folder that is not a results folder (:func:`load` reads folders
        of runs), or no such file.
    """
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


def _is_results_folder(p: Path) -> bool:
    return p.is_dir() and any((p / f).is_file() for f in ("results.jsonl", "summary.json"))


def _load_runs(folder: Path, max_bytes: int) -> ResultSet:
    """A folder of runs of one suite on one machine, read as one input
    (:func:`~pyparbench.resultfiles.merged.merge_runs`): results folders of
    the main job (its subfolders holding a results.jsonl), or else
    pytest-benchmark files (its ``*.json``), each a process."""
    runs = sorted(d for d in folder.iterdir() if (d / "results.jsonl").is_file())
    kind = "results folders"
    if not runs:
        runs = sorted(f for f in folder.glob("*.json") if f.is_file())
        kind = "pytest-benchmark files"
    if not runs:
        raise ResultFileError(folder, "a folder with neither results.jsonl nor summary.json, "
                                      "nor results folders (runs of the main job), nor "
                                      "pytest-benchmark JSON files")
    if len(runs) > MAX_RUNS:
        raise ResultFileError(folder, f"{len(runs)} {kind}; at most {MAX_RUNS} are read as "
                                      "one input")
    sets = [load(r, max_bytes=max_bytes) for r in runs]
    if kind == "pytest-benchmark files":
        for f, rs in zip(runs, sets, strict=True):
            if rs.kind != "pytest-benchmark":
                raise ResultFileError(f, "not a pytest-benchmark file: a folder of JSON files "
                                         "is read as pytest-benchmark runs of one suite, each "
                                         "a process")
    return sets[0] if len(sets) == 1 else merge_runs(folder, sets)


def load(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ResultSet:
    """Read one input (see the module docstring) into a :class:`ResultSet`.

    Raises
    ------
    ResultFileError
        The input is missing, too large, not JSON, or not a result; the
        message names the file (and line) and what is wrong.
    """
    folder = Path(path)
    if folder.is_dir() and not _is_results_folder(folder):
        return _load_runs(folder, max_bytes)
    source, summary_path = resolve(path)
    text = read_text(source, max_bytes)
    if not text.strip():
        raise ResultFileError(source, "empty file")
    value: Any = None
    try:
        value = loads(text)
        whole = True
    except (ValueError, RecursionError) as e:
        # Not one JSON value: JSONL when its first line is an object of its
        # own, else one broken document (say, a truncated pretty-printed file).
        if not first_line_is_object(text):
            raise ResultFileError(source, json_error(e)) from None
        whole = False
    if whole and isinstance(value, dict) and "benchmarks" in value:
        rs = read_pytest_benchmark(source, value)
    elif whole and isinstance(value, dict) and "models" in value and "config" not in value:
        # A summary's figures are medians of merged processes, not processes.
        rs = read_records(source, summary_records(source, value), allow_empty=True,
                          processes=False)
        add_summary(rs, source, value)
        if not rs.rows:
            raise ResultFileError(source, "a summary with no measured settings or operators")
    elif whole and isinstance(value, dict) and "config" not in value:
        raise ResultFileError(source, "a JSON object that is not a result file (no "
                                      "'benchmarks' of pytest-benchmark, no 'config' of a "
                                      "pyparbench record, no 'models' of a summary)")
    elif whole and not isinstance(value, dict):
        raise ResultFileError(source, f"a JSON {json_type(value)}, not a result file")
    else:
        lines = [(1, value)] if whole else parse_jsonl(source, text)
        rs = read_records(source, [(f"{source}:{n}", r) for n, r in lines])
    rs.path = str(path)
    if summary_path is not None:
        summary = read_json(summary_path, max_bytes)
        if not isinstance(summary, dict):
            raise ResultFileError(summary_path, f"a JSON {json_type(summary)}, not a summary "
                                                "(an object)")
        add_summary(rs, summary_path, summary)
    return rs
