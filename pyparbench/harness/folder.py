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

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyparbench.report import SUMMARY_FILE
from pyparbench.resultfiles import (
    DEFAULT_MAX_BYTES,
    Result,
    ResultFileError,
    check_record,
    parse_json,
    read_jsonl,
    read_result,
    read_text,
)
from pyparbench.resultfiles.measurements import (
    PEAK_FILE,
    check_operator_record,
    conditions,
    read_peak_file,
)

if TYPE_CHECKING:
    from pyparbench.machine.peak import Peak

__all__ = ["OPERATORS_FILE", "RESULTS_FILE", "ResultsFolder", "check_results_record", "folder_of",
           "read_checked", "read_folder", "read_peaks", "read_summary_conditions",
           "results_file", "write_folder_report"]

RESULTS_FILE = "results.jsonl"
OPERATORS_FILE = "operators.jsonl"
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


def check_results_record(where: str, r: dict[str, Any]) -> None:
    """Raise ResultFileError unless ``r`` is a configuration's record with
    a key, every value the report reads checked (:func:`read_result`)."""
    _check_key(where, r)
    check_record(where, r)  # the fields merge and compare rely on, said first
    read_result(where, r)


def _check_key(where: str, r: dict[str, Any]) -> None:
    if not isinstance(r.get("key"), str):
        raise ResultFileError(where, "no configuration key ('key'): not a pyparbench record")


def read_peaks(folder: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Peak]:
    """Every ``peak-<id>.json`` of ``folder``, by the id its name carries.

    Raises
    ------
    ResultFileError
        A peak file that is not one (naming it), or one whose ceilings are
        another machine's than its name says.
    """
    from pyparbench.machine.fingerprint import fingerprint_id

    out: dict[str, Peak] = {}
    for p in sorted(folder.glob("peak-*.json")):
        m = PEAK_FILE.match(p.name)
        if m is None:
            continue  # not a name load_or_measure writes
        peak = read_peak_file(p, max_bytes)
        if fingerprint_id(peak.fingerprint) != m.group(1):
            raise ResultFileError(p, f"the ceilings of machine {fingerprint_id(peak.fingerprint)}"
                                     f" under the name of {m.group(1)}")
        out[m.group(1)] = peak
    return out


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
        value = parse_json(path, read_text(path, max_bytes))
    except ResultFileError as e:
        warnings.append(f"{e}: its conditions (how busy the machine was) are not reported")
        return {}
    return conditions(value.get("conditions") if isinstance(value, dict) else None)


def on_own_peaks(op_records: list[dict[str, Any]], peaks: dict[str, Peak]
                 ) -> tuple[list[dict[str, Any]], list[str]]:
    """Operator records placed on the roofline of their own host's ceilings
    (new dicts); where the folder lacks that host's peak file, the record
    keeps the roofline it was stored with, and a warning says so."""
    from pyparbench.harness.operators import annotate

    out: list[dict[str, Any]] = []
    lacking: set[str] = set()
    for r in op_records:
        peak = peaks.get(str(r.get("peak_id")))
        if r.get("status") != "ok":
            out.append(r)
        elif peak is None:
            lacking.add(str(r.get("peak_id")))
            out.append(r)
        else:
            # Copies: annotate writes into the points and nodes.
            copy: dict[str, Any] = dict(r)
            for k in ("points", "nodes"):
                if k in r:
                    copy[k] = [dict(x) for x in r[k]]
            out.append(annotate(copy, peak))
    warnings = [f"no peak file for machine {i}: its operator records keep the '% of peak' "
                "they were stored with" for i in sorted(lacking)]
    return out, warnings


@dataclass
class ResultsFolder:
    """What a results folder holds, checked (see the module docstring)."""

    path: Path
    records: list[Result]
    op_records: list[dict[str, Any]]
    peaks: dict[str, Peak]
    conditions: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def peak(self) -> Peak | None:
        """The ceilings of the machine the summary describes (its first
        finished record's), else of any machine in the folder."""
        from pyparbench.machine.fingerprint import fingerprint_id

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
    op_records = ([r for _, r in read_checked(ops, check_operator_record, max_bytes,
                                              warnings)]
                  if ops.is_file() else [])
    peaks = read_peaks(folder, max_bytes)
    op_records, lacking = on_own_peaks(op_records, peaks)
    warnings += lacking
    return ResultsFolder(folder, records, op_records, peaks,
                         read_summary_conditions(folder, warnings, max_bytes), warnings)


def write_folder_report(folder: ResultsFolder) -> tuple[dict[str, Any], Path]:
    """``summary.json`` and ``report.html`` of the folder's records, written
    into it (every host listed, each with its ceilings); the summary and the
    report's path."""
    from pyparbench.report import write_report

    return write_report(folder.path, folder.records, folder.op_records, folder.peak,
                        folder.conditions, peaks=folder.peaks)
