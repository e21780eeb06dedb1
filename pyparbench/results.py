"""Result records of the main job and the store that keeps them.

One :class:`Result` per configuration: what was asked (``config``), how it
ended (``status``), what it measured and on which machine (``machine``, the
fingerprint). A :class:`ResultStore` is an append-only JSONL file with one
record per line, written and synced as each configuration finishes, so an
interrupted or crashed sweep loses no finished result. Resuming into a store
checks that its records are of this schema and of this machine: a file of
another machine's results is refused, not trusted.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["MACHINE_IDENTITY", "SCHEMA", "STATUSES", "Result", "ResultStore",
           "machine_differences"]

SCHEMA = 1
# ok: measured; error: the configuration failed (its message in `error`);
# timeout: it ran past the time limit; skipped: this machine cannot hold the
# setting (more threads or sockets than it has), so it was not run.
STATUSES = ("ok", "error", "timeout", "skipped")
# Fingerprint fields (dotted paths) that make two machines different ones.
MACHINE_IDENTITY = ("host", "cpu_model", "cpus.logical", "cpus.physical_cores", "cpus.sockets",
                    "onednn.version", "onednn.isa")


@dataclass
class Result:
    """One configuration's outcome (a line of ``results.jsonl``)."""

    key: str
    config: dict[str, Any]
    status: str
    started: float
    machine: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    ns: list[float] | None = None
    summary: dict[str, Any] | None = None
    resolved: dict[str, Any] | None = None
    per_instance: list[list[float]] | None = None
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.status == "ok" and (self.ns is None or self.summary is None):
            raise ValueError("an 'ok' result needs its timings (ns and summary)")

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Result:
        """A record read back; ValueError naming what is missing or wrong."""
        missing = [k for k in ("key", "config", "status") if k not in d]
        if missing:
            raise ValueError(f"result record lacks {missing}")
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


def _field(fingerprint: Mapping[str, Any], dotted: str) -> Any:
    v: Any = fingerprint
    for part in dotted.split("."):
        v = v.get(part) if isinstance(v, Mapping) else None
    return v


def machine_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The identity fields in which two fingerprints differ, as 'field: a != b'."""
    return [f"{f}: {_field(a, f)!r} != {_field(b, f)!r}" for f in MACHINE_IDENTITY
            if _field(a, f) != _field(b, f)]


class ResultStore:
    """An append-only JSONL file of results, one line per configuration."""

    def __init__(self, path: str | Path) -> None:
        # Absolute at once: children run in another working directory.
        self.path = Path(path).absolute()

    def records(self) -> list[dict[str, Any]]:
        """Every whole line; a line cut short by a crash is skipped with a warning."""
        if not self.path.exists():
            return []
        out = []
        for n, line in enumerate(self.path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                print(f"warning: {self.path}:{n} is not JSON, ignored", file=sys.stderr)
                continue
            if not isinstance(record, dict):
                print(f"warning: {self.path}:{n} is not a result record, ignored",
                      file=sys.stderr)
                continue
            out.append(record)
        return out

    def check_resumable(self, machine: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The records, after checking they may be resumed on ``machine``.

        Raises
        ------
        ValueError
            A record of another schema, or of another machine (naming the fields).
        """
        records = self.records()
        for r in records:
            if r.get("schema") != SCHEMA:
                raise ValueError(f"{self.path} holds results of schema {r.get('schema')!r}, "
                                 f"this pyparbench writes schema {SCHEMA}: write to another "
                                 "file or run with --no-resume")
            theirs = r.get("machine") or {}
            diff = machine_differences(theirs, machine)
            if diff:
                raise ValueError(f"{self.path} holds results of another machine "
                                 f"({'; '.join(diff)}): write to another file or run with "
                                 "--no-resume")
        return records

    def append(self, record: Result | Mapping[str, Any]) -> None:
        data = record.to_dict() if isinstance(record, Result) else dict(record)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+b") as fh:
            # A crash mid-write leaves a last line with no newline: end it, so
            # this record starts a line of its own and is not lost with it.
            fh.seek(0, os.SEEK_END)
            if fh.tell():
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
            fh.write((json.dumps(data) + "\n").encode())
            fh.flush()
            os.fsync(fh.fileno())
