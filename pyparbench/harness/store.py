"""The store that keeps the main job's records as they are made.

A :class:`ResultStore` is an append-only JSONL file with one record
(:class:`pyparbench.resultfiles.Result`, or an operator task's
:class:`pyparbench.resultfiles.OpResult`) per line, written and synced as each configuration finishes, so an
interrupted or crashed sweep loses no finished result. Resuming into a store
checks that its records are of this schema and of this machine: a file of
another machine's results is refused, not trusted.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pyparbench.machine.fingerprint import resume_conflicts
from pyparbench.resultfiles import DEFAULT_MAX_BYTES, read_jsonl
from pyparbench.resultfiles.schema import SCHEMA, STATUSES
from pyparbench.resultfiles.values import get_choice, show

__all__ = ["ResultStore", "StoredRecord"]

R = TypeVar("R")

# Bad lines of one file named in its warning; the rest are counted.
_WARNINGS = 5


class StoredRecord(Protocol):
    """A typed record a store keeps (a configuration's
    :class:`~pyparbench.resultfiles.Result`, an operator task's
    :class:`~pyparbench.resultfiles.OpResult`): the key it is stored and
    resumed under, how it ended, and its line."""

    @property
    def key(self) -> str: ...

    @property
    def status(self) -> str: ...

    def as_dict(self) -> dict[str, Any]: ...


class ResultStore:
    """An append-only JSONL file of results, one line per configuration."""

    def __init__(self, path: str | Path) -> None:
        # Absolute at once: children run in another working directory.
        self.path = Path(path).absolute()

    def records(self, *, max_bytes: int | None = None) -> list[dict[str, Any]]:
        """Every line that is one JSON object, read as every JSONL file of a
        run is (:func:`pyparbench.resultfiles.read_jsonl`): a line cut short
        by a crash, or any line that is not one JSON object (binary junk,
        NaN, nesting too deep, a JSON array), is skipped with one warning on
        stderr, so a crash never costs the other results.

        Raises
        ------
        ValueError
            The file is over ``max_bytes`` (default: the result-file limit,
            :data:`pyparbench.resultfiles.DEFAULT_MAX_BYTES`) or not a regular file.
        """
        if not self.path.exists():
            return []
        read = read_jsonl(self.path, DEFAULT_MAX_BYTES if max_bytes is None else max_bytes)
        warning = read.warning(_WARNINGS)
        if warning is not None:
            print(f"warning: {warning}", file=sys.stderr)
        return [r for _, r in read.records]

    def check_resumable(self, machine: Mapping[str, Any],
                        check: Callable[[str, dict[str, Any]], None] | None = None
                        ) -> list[dict[str, Any]]:
        """The records, after checking they may be resumed on ``machine``:
        of this schema and machine, each with a configuration key and a
        status, and passing ``check(where, record)`` (which raises
        ValueError for a record its caller cannot use).

        Raises
        ------
        ValueError
            A record of another schema, of another machine (naming the
            fields), or one that is not a usable record (naming it and what
            is wrong).
        """
        def keep(where: str, r: dict[str, Any]) -> dict[str, Any]:
            if check is not None:
                check(where, r)
            return r

        return [r for _, r in self.resumable(machine, keep)]

    def resumable(self, machine: Mapping[str, Any], read: Callable[[str, dict[str, Any]], R]
                  ) -> list[tuple[str, R]]:
        """(key, ``read(where, record)``) of every record, after the checks of
        :meth:`check_resumable` (``read`` raises ValueError for a record its
        caller cannot use: a configuration's result is read back typed,
        :func:`pyparbench.resultfiles.read_result`).

        Raises
        ------
        ValueError
            As :meth:`check_resumable`.
        """
        out = []
        for i, r in enumerate(self.records()):
            if r.get("schema") != SCHEMA:
                raise ValueError(f"{self.path} holds results of schema {r.get('schema')!r}, "
                                 f"this pyparbench writes schema {SCHEMA}: write to another "
                                 "file or run with --no-resume")
            theirs = r.get("machine") or {}
            diff = [f"{d.field.path}: {show(d.values[0])} != {show(d.values[1])}"
                    for d in resume_conflicts(theirs if isinstance(theirs, dict) else {},
                                              machine)]
            if diff:
                raise ValueError(f"{self.path} holds results of another machine "
                                 f"({'; '.join(diff)}): write to another file or run with "
                                 "--no-resume")
            # Resume matches records by key and retries by status.
            where = f"{self.path}: record {i + 1}"
            if not isinstance(r.get("key"), str):
                raise ValueError(f"{where}: no key (a string): not a pyparbench record")
            get_choice(where, r, "status", STATUSES)
            out.append((r["key"], read(where, r)))
        return out

    def append(self, record: StoredRecord | Mapping[str, Any]) -> None:
        """Add one record as a line of its own, written through to the disk.

        Raises
        ------
        OSError
            The line could not be written (a full disk, a file size limit):
            the message names the file; every whole line before stays
            readable, and a later append starts a fresh line.
        """
        data = dict(record) if isinstance(record, Mapping) else record.as_dict()
        line = (json.dumps(data) + "\n").encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Unbuffered: each write reaches the file or fails here, not at close.
            with self.path.open("a+b", buffering=0) as fh:
                # A crash mid-write leaves a last line with no newline: end it, so
                # this record starts a line of its own and is not lost with it.
                end = fh.seek(0, os.SEEK_END)
                if end:
                    fh.seek(end - 1)
                    if fh.read(1) != b"\n":
                        line = b"\n" + line
                view = memoryview(line)
                while view:  # a write may take part of the line only
                    n = fh.write(view)
                    if not n:
                        raise OSError(errno.EIO, "the file took no more bytes")
                    view = view[n:]
                os.fsync(fh.fileno())
        except OSError as e:
            raise OSError(e.errno, f"cannot append a result to {self.path}: "
                                   f"{e.strerror or e}; the results written before are "
                                   "kept") from e
