"""``pyparbench merge``: join the results of shards (and of the identical
nodes of a fleet) into one machine's results folder.

Records are deduplicated by their configuration key: a finished result wins
over a failed one, and of two with the same status the later one
(``started``) is kept. All records that carry a machine fingerprint must
agree on its significant fields (CPU model, ISA, oneDNN, OpenMP runtime,
sockets, cores, governor, ...; host names are not compared, as shards run
on several nodes of one kind): one machine's table never mixes machines.
When the inputs carry shard manifests (``pyparbench run --shard``), merge
checks they come from one suite, warns about missing shards and
configurations, and writes the records in the suite's order, so a complete
merge equals the unsharded run (``--shard 0/1``).

Shards whose tasks were given different CPUs of their nodes (co-located
tasks of ``--cpus-per-task``) merge when the CPUs match in count and layout
(``cpus.allowed_layout``: cores per socket, CPUs per core); a different
count or layout is refused with why, unless ``force``, and what was forced
is kept in the merged folder (``merge.json``, and the report).

Beside the records, merge joins the operator measurements
(``operators.jsonl``, deduplicated the same way) and copies every host's
ceilings (``peak-<id>.json``), then writes ``merge.json`` (inputs, counts,
warnings, what was forced) and the report (:mod:`pyparbench.harness.folder`):
``summary.json`` and ``report.html``, every host listed. A folder a
previous merge wrote (it holds ``merge.json``) is merged into again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyparbench.harness.folder import (OPERATORS_FILE, check_results_record, folder_of,
                                       read_checked, read_folder, read_graphs, read_peaks,
                                       read_summary_conditions, results_file, write_folder_report,
                                       write_graphs)
from pyparbench.harness.shards import manifest_path
from pyparbench.machine.fingerprint import Difference, fingerprint_differences
from pyparbench.resultfiles import (
    DEFAULT_MAX_BYTES,
    ResultFileError,
    fingerprint_fields,
    read_json,
    read_text,
)
from pyparbench.resultfiles.measurements import PEAK_FILE, check_operator_record
from pyparbench.resultfiles.atomic import write_atomic

__all__ = ["MERGE_FILE", "MergeError", "MergeReport", "merge", "merge_records", "results_file"]

# What a merge did, kept in the merged folder.
MERGE_FILE = "merge.json"
# The fingerprint fields that say which CPUs of a node a task was given.
_ALLOTMENT = {"cpus.allowed", "cpus.allowed_layout"}
# Forced differences kept in merge.json (the rest counted).
_FORCED_KEPT = 20


class MergeError(ValueError):
    """The inputs cannot be merged (one line, naming the files)."""


@dataclass
class Source:
    """One record and where it came from."""

    where: str  # "path:line"
    order: int  # position over all inputs, for a stable order
    record: dict[str, Any]


@dataclass
class MergeReport:
    """What merge did: the merged results file, its records and operator
    records, the duplicates dropped, the inputs, the hosts' ceilings copied
    (fingerprint ids), warnings, the machine differences ``force`` let
    through, and the report written."""

    output: Path
    records: int
    duplicates: int
    inputs: list[str]
    warnings: list[str] = field(default_factory=list)
    op_records: int = 0
    peaks: list[str] = field(default_factory=list)
    forced: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    report: Path | None = None


def _read(path: Path, order0: int, max_bytes: int, warnings: list[str],
          check: Callable[[str, dict[str, Any]], None] = check_results_record) -> list[Source]:
    return [Source(where, order0 + i, r)
            for i, (where, r) in enumerate(read_checked(path, check, max_bytes, warnings))]


def _refusal(first: str, where: str, diffs: Sequence[Difference]) -> str:
    """Why two records cannot share a table, and what to do instead."""
    text = ", ".join(f"{d.field.label} ({d.values[0]!r} vs {d.values[1]!r})" for d in diffs)
    force = "or pass --force to merge them anyway (recorded in merge.json and the report)"
    if {d.field.path for d in diffs} <= _ALLOTMENT:
        return (f"cannot merge results of different CPU allotments into one table: {first} "
                f"and {where} differ in {text}: a thread count means something else on each "
                "(fewer CPUs, or CPUs laid out otherwise: SMT siblings, another socket); give "
                f"every task the same CPUs (one --cpus-per-task, or --exclusive), {force}")
    return (f"cannot merge results of different machines into one table: {first} and {where} "
            f"differ in {text}; merge each machine into its own folder, {force}")


def _check_machines(sources: Sequence[Source], *, force: bool = False) -> list[str]:
    """Raise MergeError at the first record whose machine differs from the
    first record's (:func:`_refusal`); with ``force``, the differences instead."""
    first: tuple[str, dict[str, str]] | None = None
    forced: dict[str, str] = {}
    for s in sources:
        machine = s.record.get("machine")
        if not isinstance(machine, dict):
            continue  # a failed configuration has no fingerprint
        fields = fingerprint_fields(s.where, machine)
        if first is None:
            first = (s.where, fields)
            continue
        diffs = fingerprint_differences([first[1], fields])
        if not diffs:
            continue
        if not force:
            raise MergeError(_refusal(first[0], s.where, diffs))
        what = ", ".join(f"{d.field.label} ({d.values[0]!r} vs {d.values[1]!r})"
                         for d in diffs)
        forced.setdefault(what, f"{first[0]} and {s.where} differ in {what}")
    return list(forced.values())


def _better(new: Source, old: Source) -> bool:
    """Whether ``new`` replaces ``old`` for the same configuration."""
    new_ok, old_ok = bool(new.record["status"] == "ok"), bool(old.record["status"] == "ok")
    if new_ok != old_ok:
        return new_ok
    t_new, t_old = new.record.get("started"), old.record.get("started")
    if isinstance(t_new, (int, float)) and isinstance(t_old, (int, float)) and t_new != t_old:
        return bool(t_new > t_old)
    return new.order > old.order


def merge_records(sources: Sequence[Source]) -> tuple[list[Source], int]:
    """Deduplicated by key (see the module docstring), in first-seen order;
    and how many records were dropped. The machines are checked by the caller
    (:func:`merge`)."""
    kept: dict[str, Source] = {}
    first_seen: dict[str, int] = {}
    for s in sources:
        key = s.record["key"]
        first_seen.setdefault(key, s.order)
        if key not in kept or _better(s, kept[key]):
            kept[key] = s
    ordered = sorted(kept.values(), key=lambda s: first_seen[s.record["key"]])
    return ordered, len(sources) - len(ordered)


def _manifests(files: Sequence[Path], max_bytes: int) -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for f in files:
        m = manifest_path(f)
        if not m.is_file():
            continue
        data = read_json(m, max_bytes)
        ok = (isinstance(data, dict) and isinstance(data.get("index"), int)
              and isinstance(data.get("count"), int) and isinstance(data.get("suite_size"), int)
              and isinstance(data.get("suite_digest"), str) and isinstance(data.get("keys"), list)
              and all(isinstance(k, str) for k in data["keys"])
              and 0 <= data["index"] < data["count"])
        if not ok:
            raise ResultFileError(m, "not a shard manifest (index, count, suite_size, "
                                     "suite_digest, keys)")
        out.append((m, data))
    return out


def _suite_order(manifests: Sequence[tuple[Path, dict[str, Any]]], present: set[str],
                 warnings: list[str]) -> dict[str, int]:
    """Each key's position in the whole suite, checked across the manifests."""
    if not manifests:
        return {}
    m0, d0 = manifests[0]
    for m, d in manifests[1:]:
        if (d["count"], d["suite_digest"]) != (d0["count"], d0["suite_digest"]):
            raise MergeError(f"shards of different suites: {m0} (shard {d0['index']}/"
                             f"{d0['count']} of {d0['suite_size']}) and {m} (shard "
                             f"{d['index']}/{d['count']} of {d['suite_size']}); "
                             "the jobs built different configuration lists")
    count = d0["count"]
    seen = sorted({d["index"] for _, d in manifests})
    missing = [i for i in range(count) if i not in seen]
    if missing:
        shown = ", ".join(f"{i}/{count}" for i in missing[:10])
        warnings.append(f"shard(s) {shown}{' ...' if len(missing) > 10 else ''} missing: "
                        f"the merged results are partial")
    order: dict[str, int] = {}
    for m, d in manifests:
        lost = [k for k in d["keys"] if k not in present]
        if lost:
            warnings.append(f"{m}: {len(lost)} of its {len(d['keys'])} configurations have "
                            "no result (still running, or the job was killed)")
        for j, k in enumerate(d["keys"]):
            order.setdefault(k, d["index"] + j * count)
    return order


def _write_jsonl(target: Path, sources: Sequence[Source]) -> None:
    """Write the records at once: never a half-written results file."""
    write_atomic(target, (json.dumps(s.record) + "\n" for s in sources))


def _peak_files(folders: Sequence[Path], ops: Sequence[Source], max_bytes: int
                ) -> dict[str, Path]:
    """Every host's ceilings by fingerprint id, checked. Where two folders
    hold one host's (each shard run on that node measured them), the one
    of the folder whose operator records name them wins: their % of peak
    was computed with it."""
    wanted: dict[str, Path] = {}
    for s in ops:
        wanted.setdefault(str(s.record.get("peak_id")), Path(s.where.rsplit(":", 1)[0]).parent)
    chosen: dict[str, Path] = {}
    for folder in folders:
        for pid in read_peaks(folder, max_bytes):
            if pid not in chosen or wanted.get(pid) == folder:
                chosen[pid] = folder / f"peak-{pid}.json"
    return chosen


def _conditions(folders: Sequence[Path], forced: Sequence[str], max_bytes: int,
                warnings: list[str]) -> dict[str, Any]:
    """The merged report's conditions: each input's warning that its machine
    was busy, and what --force let through."""
    busy = []
    for folder in folders:
        note = read_summary_conditions(folder, warnings, max_bytes).get("busy")
        if note:
            busy.append(f"{folder}: {note}")
    out: dict[str, Any] = {}
    if busy:
        out["busy"] = "; ".join(busy)
    if forced:
        out["forced"] = "; ".join(forced[:3]) + (f" and {len(forced) - 3} more"
                                                  if len(forced) > 3 else "")
    return out


def merge(inputs: Sequence[str | Path], output: str | Path, *,
          max_bytes: int = DEFAULT_MAX_BYTES, force: bool = False) -> MergeReport:
    """Merge results folders (or results.jsonl files) into the folder
    ``output``: results.jsonl, operators.jsonl, every host's peak file,
    the models' graph figures (graphs.json), merge.json, and the report
    (summary.json, report.html).

    ``force``: merge records of different machines (or CPU allotments)
    all the same; the differences are kept in merge.json and the report.

    Raises
    ------
    ResultFileError
        An input that is missing or not pyparbench results.
    MergeError
        Results of different machines or CPU allotments (without
        ``force``), shards of different suites, or an existing
        ``output``/results.jsonl that is neither an input nor a merge's.
    """
    if not inputs:
        raise MergeError("merge needs at least one results folder")
    files = [results_file(p) for p in inputs]
    out_dir = Path(output)
    target = out_dir / "results.jsonl"
    resolved = {f.resolve() for f in files}
    is_input = target.exists() and target.resolve() in resolved
    remerge = (out_dir / MERGE_FILE).is_file() and not is_input
    if target.exists() and not is_input and not remerge:
        raise MergeError(f"{target} exists; name it as an input to merge into it, "
                         "or choose another -o")
    warnings: list[str] = []
    sources: list[Source] = []
    for f in files:
        sources += _read(f, len(sources), max_bytes, warnings)
    # Operator records and peaks live in the inputs' folders (once each).
    folders = list(dict.fromkeys(folder_of(f).resolve() for f in files))
    ops: list[Source] = []
    for folder in folders:
        if (folder / OPERATORS_FILE).is_file():
            ops += _read(folder / OPERATORS_FILE, len(ops), max_bytes, warnings,
                         check_operator_record)
    forced = _check_machines([*sources, *ops], force=force)
    merged, dropped = merge_records(sources)
    merged_ops, dropped_ops = merge_records(ops)
    order = _suite_order(_manifests(files, max_bytes), {s.record["key"] for s in merged},
                         warnings)
    if order:
        # The suite's order for its configurations; anything else after them.
        merged.sort(key=lambda s: ((0, order[s.record["key"]]) if s.record["key"] in order
                                   else (1, s.order)))
    peaks = _peak_files(folders, merged_ops, max_bytes)
    conditions = _conditions(folders, forced, max_bytes, warnings)
    out_dir.mkdir(parents=True, exist_ok=True)
    if remerge:  # a previous merge's output: its hosts may not be among these inputs
        for old in out_dir.glob("peak-*.json"):
            if PEAK_FILE.match(old.name) and old.name not in {p.name for p in peaks.values()}:
                old.unlink()
    for path in peaks.values():
        dest = out_dir / path.name
        if path.resolve() != dest.resolve():
            write_atomic(dest, read_text(path, max_bytes))
    _write_jsonl(target, merged)
    graphs: dict[tuple[str, int], dict[str, Any]] = {}
    for folder in folders:
        graphs.update(read_graphs(folder, warnings, max_bytes))
    write_graphs(out_dir, graphs)
    if merged_ops or (out_dir / OPERATORS_FILE).exists():
        _write_jsonl(out_dir / OPERATORS_FILE, merged_ops)
    report = MergeReport(target, len(merged), dropped + dropped_ops, [str(f) for f in files],
                         warnings, len(merged_ops), sorted(peaks), forced)
    (out_dir / MERGE_FILE).write_text(json.dumps({
        "merged_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "inputs": report.inputs,
        "records": report.records, "operator_records": report.op_records,
        "duplicates": report.duplicates, "peaks": report.peaks, "warnings": warnings,
        "forced": forced[:_FORCED_KEPT], "forced_more": max(0, len(forced) - _FORCED_KEPT)},
        indent=1) + "\n")
    written = read_folder(out_dir, max_bytes=max_bytes)
    written.conditions = conditions
    report.warnings += [w for w in written.warnings if w not in warnings]
    report.summary, report.report = write_folder_report(written)
    return report
