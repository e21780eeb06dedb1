"""A results folder read back, whatever made it (a complete main job, an
interrupted one, a merge of shards, another machine's run), and its report
rebuilt: ``pyparbench report DIR``, and ``pyparbench merge`` after joining.

Every file is read through :mod:`pyparbench.resultfiles`, as hostile as
any input: ``results.jsonl`` (the model configurations), ``operators.jsonl``
(the operator measurements), every ``peak-<id>.json`` (the ceilings of each
machine that measured into the folder) and the conditions an earlier
``summary.json`` recorded. The JSONL files are read as the store reads
them on resume (:func:`pyparbench.resultfiles.read_jsonl`): a line that is
not one JSON object, as a run killed while writing leaves it (the store
starts the next record on a line of its own), is skipped with a warning;
an object that is not a record is an error naming it.

Each operator measurement is put on the roofline of the ceilings of the
host that measured it (the peak file its ``peak_id`` names), so that the
"% of peak" of a merge of several nodes' shards is every record's own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyparbench.harness.operators import annotate
from pyparbench.machine.fingerprint import fingerprint_id
from pyparbench.machine.peak import measure_peak, peak_cache_path
from pyparbench.report import SUMMARY_FILE, write_report
from pyparbench.resultfiles import (
    DEFAULT_MAX_BYTES,
    Result,
    ResultFileError,
    check_record,
    read_json,
    read_jsonl,
    read_result,
)
from pyparbench.resultfiles.measurements import PEAK_FILE, conditions, read_peak_file
from pyparbench.resultfiles.atomic import write_atomic
from pyparbench.resultfiles.op_result import OpResult
from pyparbench.resultfiles.values import get_int, get_string, is_number, json_type

if TYPE_CHECKING:
    from pyparbench.machine.peak import Peak

__all__ = ["GRAPHS_FILE", "OPERATORS_FILE", "RESULTS_FILE", "ResultsFolder",
           "check_results_record", "folder_of", "load_or_measure", "read_checked", "read_folder",
           "read_graphs", "read_peaks", "read_summary_conditions", "results_file",
           "write_folder_report", "write_graphs"]

RESULTS_FILE = "results.jsonl"
OPERATORS_FILE = "operators.jsonl"
# Each model's graph figures (the study's tuner's input), written when the
# main job plans, joined by merge: the report reads them here, and never
# rebuilds a model, which a model file would not allow.
GRAPHS_FILE = "graphs.json"
_GRAPH_FIGURES = ("gflops", "heavy_ops", "depth", "avg_width", "nodes")
Graphs = dict[tuple[str, int], dict[str, Any]]
# Skipped lines named one by one; the rest are counted.
_SHOWN = 3


def results_file(path: str | Path) -> Path:
    """A results folder's ``results.jsonl``, or the file itself.

    Raises
    ------
    ResultFileError
        No such file or folder, or a folder without ``results.jsonl``.
    """
    p = Path(path)
    if p.is_dir():
        if not (p / RESULTS_FILE).is_file():
            raise ResultFileError(p, f"a folder with no {RESULTS_FILE}")
        return p / RESULTS_FILE
    if not p.exists():
        raise ResultFileError(p, "no such file or folder")
    return p


def folder_of(results: Path) -> Path:
    """The folder of a results file: operators, peaks and summary are beside it."""
    return results.parent


def read_checked(path: Path, check: Callable[[str, dict[str, Any]], None], max_bytes: int,
                 warnings: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(``path:line``, record) for each record of a JSONL file
    (:func:`pyparbench.resultfiles.read_jsonl`: a line that is not one JSON
    object is skipped, said in ``warnings``), each passed through ``check``.

    Raises
    ------
    ResultFileError
        Too large, not a regular file, or a record ``check`` refuses.
    """
    read = read_jsonl(path, max_bytes)
    for where, value in read.records:
        check(where, value)
    warning = read.warning(_SHOWN)
    if warning is not None:
        warnings.append(warning)
    return read.records


def _no_check(where: str, r: dict[str, Any]) -> None:
    """Records read typed afterwards (their reader checks them)."""


def check_results_record(where: str, r: dict[str, Any]) -> None:
    """Raise ResultFileError unless ``r`` is a configuration's record with
    a key, every value the report reads checked (:func:`read_result`)."""
    _check_key(where, r)
    check_record(where, r)  # the fields merge and compare rely on, said first
    read_result(where, r)


def _check_key(where: str, r: dict[str, Any]) -> None:
    if not isinstance(r.get("key"), str):
        raise ResultFileError(where, "no configuration key ('key'): not a pyparbench record")


def read_peaks(folder: Path, max_bytes: int = DEFAULT_MAX_BYTES, *,
               skip: Collection[str] = ()) -> dict[str, Peak]:
    """Every ``peak-<id>.json`` of ``folder``, by the id its name carries,
    but those of the ids in ``skip`` (ceilings the caller holds already).

    Raises
    ------
    ResultFileError
        A peak file that is not one (naming it), or one whose ceilings are
        another machine's than its name says.
    """
    out: dict[str, Peak] = {}
    for p in sorted(folder.glob("peak-*.json")):
        m = PEAK_FILE.match(p.name)
        if m is None or m.group(1) in skip:
            continue  # not a name load_or_measure writes, or not wanted
        peak = read_peak_file(p, max_bytes)
        if fingerprint_id(peak.fingerprint) != m.group(1):
            raise ResultFileError(p, f"the ceilings of machine {fingerprint_id(peak.fingerprint)}"
                                     f" under the name of {m.group(1)}")
        out[m.group(1)] = peak
    return out


def read_graphs(folder: Path, warnings: list[str],
                max_bytes: int = DEFAULT_MAX_BYTES) -> Graphs:
    """The graph figures of ``folder``'s ``graphs.json`` by (model, batch),
    each value checked ({} without the file). One that cannot be read only
    costs the report its graph figures, said in ``warnings``."""
    path = folder / GRAPHS_FILE
    if not path.is_file():
        return {}
    try:
        value = read_json(path, max_bytes)
        if not isinstance(value, list):
            raise ResultFileError(path, f"a JSON {json_type(value)}, not a list of graphs")
        out: Graphs = {}
        for i, g in enumerate(value):
            where = f"{path}: [{i}]"
            if not isinstance(g, dict):
                raise ResultFileError(where, f"a JSON {json_type(g)}, not a graph's figures")
            model = get_string(where, g, "model")
            batch = get_int(where, g, "batch", "batch")
            figures: dict[str, Any] = {k: g.get(k) for k in _GRAPH_FIGURES}
            bad = [k for k, v in figures.items() if not is_number(v) or v < 0]
            if bad:
                raise ResultFileError(where, f"{bad[0]} must be a number >= 0, "
                                             f"got {figures[bad[0]]!r}")
            out[(model, batch)] = figures
        return out
    except ResultFileError as e:
        warnings.append(f"{e}: the report shows no graph figures")
        return {}


def write_graphs(folder: Path, graphs: Graphs) -> None:
    """Write ``graphs`` as ``folder``'s ``graphs.json`` (atomically), with
    the figures it held of other models kept (a resumed or sharded run)."""
    kept = read_graphs(folder, [])
    kept.update(graphs)
    write_atomic(folder / GRAPHS_FILE,
                 json.dumps([{"model": m, "batch": b, **f} for (m, b), f in kept.items()],
                            indent=1) + "\n")


def load_or_measure(directory: str | Path, *, quick: bool = False,
                    remeasure: bool = False) -> tuple[Peak, bool]:
    """This machine's ceilings from ``directory`` if measured there before
    (same fingerprint: its ``peak-<id>.json``, read as every peak file is,
    by :func:`~pyparbench.resultfiles.measurements.read_peak_file`), else
    measured now and stored. Returns (peak, cached). A file that is not
    readable ceilings (cut short, an older layout) is measured again."""
    path = peak_cache_path(directory)
    if path.is_file() and not remeasure:
        try:
            return read_peak_file(path, DEFAULT_MAX_BYTES), True
        except ResultFileError:
            pass
    peak = measure_peak(quick=quick)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(peak.as_dict(), indent=1))
    return peak, False


def read_summary_conditions(folder: Path, warnings: list[str],
                            max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """The conditions an earlier ``summary.json`` of ``folder`` recorded ({}
    without one). The summary is rebuilt from the records, so one that
    cannot be read (cut short, or not a summary) only costs its conditions,
    said in ``warnings``."""
    path = folder / SUMMARY_FILE
    if not path.is_file():
        return {}
    try:
        value = read_json(path, max_bytes)
    except ResultFileError as e:
        warnings.append(f"{e}: its conditions (how busy the machine was) are not reported")
        return {}
    return conditions(value.get("conditions") if isinstance(value, dict) else None)


def on_own_peaks(op_records: list[OpResult], peaks: dict[str, Peak]
                 ) -> tuple[list[OpResult], list[str]]:
    """Operator records placed on the roofline of their own host's ceilings
    (new records); where the folder lacks that host's peak file, the record
    keeps the roofline it was stored with, and a warning says so."""
    out: list[OpResult] = []
    lacking: set[str] = set()
    for r in op_records:
        peak = peaks.get(str(r.peak_id))
        if not r.ok:
            out.append(r)
        elif peak is None:
            lacking.add(str(r.peak_id))
            out.append(r)
        else:
            out.append(annotate(r, peak))
    warnings = [f"no peak file for machine {i}: its operator records keep the '% of peak' "
                "they were stored with" for i in sorted(lacking)]
    return out, warnings


@dataclass
class ResultsFolder:
    """What a results folder holds, checked (see the module docstring)."""

    path: Path
    records: list[Result]
    op_records: list[OpResult]
    peaks: dict[str, Peak]
    conditions: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    graphs: Graphs = field(default_factory=dict)

    @property
    def peak(self) -> Peak | None:
        """The ceilings of the machine the summary describes (its first
        finished record's), else of any machine in the folder."""
        for r in self.records:
            if r.ok and r.machine:
                found = self.peaks.get(fingerprint_id(r.machine))
                if found is not None:
                    return found
                break
        return next(iter(self.peaks.values()), None)


def read_folder(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ResultsFolder:
    """Read a results folder (or the folder of a ``results.jsonl`` named).

    Raises
    ------
    ResultFileError
        No results.jsonl, or a file that is not what its name says, naming
        it (and the line) and what is wrong.
    """
    results = results_file(path)
    folder = folder_of(results)
    warnings: list[str] = []
    records = [read_result(where, r) for where, r in read_checked(results, _check_key,
                                                                    max_bytes, warnings)]
    ops = folder / OPERATORS_FILE
    op_records = ([OpResult.from_dict(r, where)
                   for where, r in read_checked(ops, _no_check, max_bytes, warnings)]
                  if ops.is_file() else [])
    peaks = read_peaks(folder, max_bytes)
    op_records, lacking = on_own_peaks(op_records, peaks)
    warnings += lacking
    conditions = read_summary_conditions(folder, warnings, max_bytes)
    return ResultsFolder(folder, records, op_records, peaks, conditions, warnings,
                         read_graphs(folder, warnings, max_bytes))


def write_folder_report(folder: ResultsFolder) -> tuple[dict[str, Any], Path]:
    """``summary.json`` and ``report.html`` of the folder's records, written
    into it (every host listed, each with its ceilings); the summary and the
    report's path."""
    return write_report(folder.path, folder.records, folder.op_records, folder.peak,
                        folder.conditions, peaks=folder.peaks, graphs=folder.graphs)
