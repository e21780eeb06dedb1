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
merge equals the unsharded run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyparbench.resultfiles import (
    DEFAULT_MAX_BYTES,
    SIGNIFICANT_FIELDS,
    ResultFileError,
    check_record,
    fingerprint_fields,
    parse_json,
    parse_jsonl,
    read_text,
)
from pyparbench.shards import manifest_path

__all__ = ["MergeError", "MergeReport", "merge", "merge_records", "results_file"]


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
    """What merge did."""

    output: Path
    records: int
    duplicates: int
    inputs: list[str]
    warnings: list[str] = field(default_factory=list)


def results_file(path: str | Path) -> Path:
    """A results folder's ``results.jsonl``, or the file itself."""
    p = Path(path)
    if p.is_dir():
        if not (p / "results.jsonl").is_file():
            raise ResultFileError(p, "a folder with no results.jsonl")
        return p / "results.jsonl"
    if not p.exists():
        raise ResultFileError(p, "no such file or folder")
    return p


def _read(path: Path, order0: int, max_bytes: int) -> list[Source]:
    out = []
    for i, (n, r) in enumerate(parse_jsonl(path, read_text(path, max_bytes))):
        where = f"{path}:{n}"
        check_record(where, r)
        if not isinstance(r.get("key"), str):
            raise ResultFileError(where, "no configuration key ('key'): not a pyparbench record")
        out.append(Source(where, order0 + i, r))
    return out


def _check_machines(sources: Sequence[Source]) -> None:
    first: tuple[str, dict[str, str]] | None = None
    for s in sources:
        machine = s.record.get("machine")
        if not isinstance(machine, dict):
            continue  # a failed configuration has no fingerprint
        fields = fingerprint_fields(s.where, machine)
        if first is None:
            first = (s.where, fields)
            continue
        diffs = [f"{label} ({first[1][p]!r} vs {fields[p]!r})" for p, label in SIGNIFICANT_FIELDS
                 if p in first[1] and p in fields and first[1][p] != fields[p]]
        if diffs:
            raise MergeError(f"cannot merge results of different machines into one table: "
                             f"{first[0]} and {s.where} differ in {', '.join(diffs)}; "
                             "merge each machine into its own folder")


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
    and how many records were dropped."""
    _check_machines(sources)
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
        data = parse_json(m, read_text(m, max_bytes))
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


def merge(inputs: Sequence[str | Path], output: str | Path, *,
          max_bytes: int = DEFAULT_MAX_BYTES) -> MergeReport:
    """Merge results folders (or results.jsonl files) into ``output``/results.jsonl.

    Raises
    ------
    ResultFileError
        An input that is missing or not pyparbench results.
    MergeError
        Results of different machines, shards of different suites, or an
        existing ``output``/results.jsonl that is not one of the inputs.
    """
    if not inputs:
        raise MergeError("merge needs at least one results folder")
    files = [results_file(p) for p in inputs]
    out_dir = Path(output)
    target = out_dir / "results.jsonl"
    resolved = {f.resolve() for f in files}
    if target.exists() and target.resolve() not in resolved:
        raise MergeError(f"{target} exists; name it as an input to merge into it, "
                         "or choose another -o")
    sources: list[Source] = []
    for f in files:
        sources += _read(f, len(sources), max_bytes)
    merged, dropped = merge_records(sources)
    warnings: list[str] = []
    order = _suite_order(_manifests(files, max_bytes), {s.record["key"] for s in merged},
                         warnings)
    if order:
        # The suite's order for its configurations; anything else after them.
        merged.sort(key=lambda s: ((0, order[s.record["key"]]) if s.record["key"] in order
                                   else (1, s.order)))
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    with tmp.open("w") as fh:
        for s in merged:
            fh.write(json.dumps(s.record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)  # never a half-written results file
    return MergeReport(target, len(merged), dropped, [str(f) for f in files], warnings)
