"""Several runs of one suite on one machine, read as one input.

The unit of a comparison is the process (:mod:`pyparbench.stats.spread`),
and one run measures most rows in one process: a row whose processes differ
by 10-25 % (an unpinned setting, a pool whose threads land differently in
each process) then cannot be told from a change. Several runs a side give
every row processes of its own: a folder of results folders (each a run of
the main job) or a folder of pytest-benchmark files (each file a process)
is one input, each row holding every run's processes, so that compare can
test it against its own spread between processes
(:func:`pyparbench.stats.row_spread`).
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

from pyparbench.resultfiles.rows import ResultSet, Row
from pyparbench.resultfiles.values import ResultFileError

__all__ = ["MAX_RUNS", "merge_runs"]

# A side's runs: more is a folder of something else (and would be read for
# minutes rather than refused).
MAX_RUNS = 256


def merge_runs(folder: Path, sets: list[ResultSet]) -> ResultSet:
    """One input of several runs of one suite (``sets``, each read from a file
    or results folder in ``folder``): each row's ``processes`` are every
    run's processes of it (a pytest-benchmark file's median, a results
    folder's every process of the row's setting), its median theirs, its
    runs all of theirs.

    Raises
    ------
    ResultFileError
        No run, more than :data:`MAX_RUNS`, runs of different kinds, or a
        run measured on another machine than the first (its fingerprint).
    """
    if not sets:
        raise ResultFileError(folder, "no runs to read as one input")
    if len(sets) > MAX_RUNS:
        raise ResultFileError(folder, f"{len(sets)} runs; at most {MAX_RUNS} are read as one "
                                      "input")
    first = sets[0]
    name = _within(folder, first.source)
    for rs in sets[1:]:
        if rs.kind != first.kind:
            raise ResultFileError(rs.source, f"a {rs.kind} result beside {first.kind} ones "
                                             f"({name}): a folder's runs are of one suite")
        if rs.fields != first.fields:
            differ = sorted(k for k in {*rs.fields, *first.fields}
                            if rs.fields.get(k) != first.fields.get(k))
            raise ResultFileError(rs.source, f"measured on another machine than {name} "
                                             f"({', '.join(differ)} differ): a folder's runs "
                                             "are processes of one machine")
    rows: dict[str, Row] = {}
    for key in dict.fromkeys(k for rs in sets for k in rs.rows):
        got = [rs.rows[key] for rs in sets if key in rs.rows]
        ok = [r for r in got if r.status == "ok" and r.median_ns is not None]
        if not ok:
            rows[key] = got[0]
            continue
        medians = tuple(p for r in ok for p in _processes(r))
        rows[key] = replace(ok[0], median_ns=statistics.median(medians), processes=medians,
                            samples_ns=tuple(x for r in ok for x in r.samples_ns), blocks=())
    what = ("pytest-benchmark files, each a process" if first.kind == "pytest-benchmark"
            else "runs, each row with every run's processes")
    # A setting run under two names holds the same processes in both rows:
    # one group for the spread.
    groups = dict.fromkeys(r.processes for r in rows.values() if len(r.processes) >= 2)
    return ResultSet(str(folder), str(folder), first.kind, rows, first.machine, first.fields,
                     first.cores, first.peak_gflops,
                     [f"{folder}: {len(sets)} {what}", *(n for rs in sets for n in rs.notes)],
                     list(groups), len(sets), first.peak_bf16_gflops, first.peak_int8_gops)


def _within(folder: Path, source: str) -> str:
    """``source`` as a person finds it in ``folder`` (a run's results.jsonl:
    its folder's name with it)."""
    path = Path(source)
    try:
        return str(path.relative_to(folder))
    except ValueError:
        return path.name


def _processes(row: Row) -> tuple[float, ...]:
    """A run's process medians of ``row``: those it tells apart, else its median."""
    if row.processes:
        return row.processes
    assert row.median_ns is not None
    return (float(row.median_ns),)
