"""Shards: one part of a suite per job, so that a fleet (a Slurm job array)
runs a long sweep in parallel and ``pyparbench merge`` joins the parts.

``K/N`` counts K from 0: shard K runs configurations K, K+N, K+2N, ... of
the suite's list, so shards 0/N .. N-1/N together run each configuration
exactly once. The selection depends only on the list, which every job of
one machine type builds the same way; a job that built a different list
(another machine, other options) is caught by merge through the manifest
each shard writes beside its results (``results.shard.json``: the shard,
the suite's size and digest, and the keys it was to run).

Without ``--shard``, a Slurm array task takes its shard from
``SLURM_ARRAY_TASK_ID`` and ``SLURM_ARRAY_TASK_COUNT`` (with
``SLURM_ARRAY_TASK_MIN`` and ``SLURM_ARRAY_TASK_STEP``, so ``--array=1-8``
and ``--array=0-14:2`` work too; a list of ids such as ``--array=3,5``, the
re-run of two failed shards, does not say how many shards there are, and
is refused: pass ``--shard K/N``).

A results folder keeps one shard of one split: a run into a folder whose
manifest names another shard or another number of shards is refused
before anything runs (a re-run resumes the same shard into its folder).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pyparbench.harness.resumable import Keyed
from pyparbench.resultfiles import ResultFileError, read_json_object
from pyparbench.resultfiles.atomic import write_atomic

__all__ = ["Shard", "apply_shard", "check_manifest", "manifest_path", "parse_shard",
           "resolve_shard", "select_shard", "shard_from_env", "suite_digest", "write_manifest"]

T = TypeVar("T")


K = TypeVar("K", bound=Keyed)

_FORM = re.compile(r"^\s*([0-9]+)\s*/\s*([0-9]+)\s*$")
MAX_SHARDS = 1_000_000


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (from 0) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_SHARDS or not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count}: K/N needs 0 <= K < N "
                             f"(K counts from 0)")

    def select(self, items: Sequence[T]) -> list[T]:
        """Items index, index + count, index + 2 count, ... in their order."""
        return list(items[self.index::self.count])

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"K/N"`` -> Shard(K, N).

    Raises
    ------
    ValueError
        Not two integers ``K/N`` with ``0 <= K < N``, naming the value.
    """
    m = _FORM.match(text) if len(text) <= 40 else None
    if m is None:
        raise ValueError(f"--shard must be K/N (K from 0 to N-1), got {text!r}")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1 or n > MAX_SHARDS:
        raise ValueError(f"--shard {text}: N must be from 1 to {MAX_SHARDS}")
    if k >= n:
        raise ValueError(f"--shard {text}: K counts from 0, so it must be below N={n} "
                         f"(shards 0/{n} .. {n - 1}/{n})")
    return Shard(k, n)


def _env_int(env: Mapping[str, str], name: str) -> int:
    text = env[name].strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise ValueError(f"{name}={env[name]!r} is not a non-negative integer")
    return int(text)


def shard_from_env(env: Mapping[str, str] | None = None) -> Shard | None:
    """The shard of a Slurm array task, or None outside an array.

    Raises
    ------
    ValueError
        Only one of ``SLURM_ARRAY_TASK_ID`` / ``SLURM_ARRAY_TASK_COUNT``
        set, or values that do not make a shard (named with their values).
    """
    env = os.environ if env is None else env
    has_id, has_count = "SLURM_ARRAY_TASK_ID" in env, "SLURM_ARRAY_TASK_COUNT" in env
    if not has_id and not has_count:
        return None
    if not (has_id and has_count):
        missing = "SLURM_ARRAY_TASK_COUNT" if has_id else "SLURM_ARRAY_TASK_ID"
        raise ValueError(f"{missing} is not set but its partner is; pass --shard K/N")
    task, count = _env_int(env, "SLURM_ARRAY_TASK_ID"), _env_int(env, "SLURM_ARRAY_TASK_COUNT")
    low = _env_int(env, "SLURM_ARRAY_TASK_MIN") if "SLURM_ARRAY_TASK_MIN" in env else 0
    step = _env_int(env, "SLURM_ARRAY_TASK_STEP") if "SLURM_ARRAY_TASK_STEP" in env else 1
    what = (f"SLURM_ARRAY_TASK_ID={task}, SLURM_ARRAY_TASK_COUNT={count}, "
            f"SLURM_ARRAY_TASK_MIN={low}, SLURM_ARRAY_TASK_STEP={step}")
    if step < 1 or task < low or (task - low) % step:
        raise ValueError(f"{what} do not make a shard (an --array of a range is needed, "
                         "e.g. 0-7); pass --shard K/N")
    if "SLURM_ARRAY_TASK_MAX" in env:
        # A list such as --array=3,5 (a re-run of failed shards) gives ids
        # that are not a range: its COUNT is not the suite's split.
        high = _env_int(env, "SLURM_ARRAY_TASK_MAX")
        if high < low or (high - low) // step + 1 != count:
            raise ValueError(f"{what}, SLURM_ARRAY_TASK_MAX={high}: the array is not one "
                             "range of ids (a list such as --array=3,5?), so its count is not "
                             "the number of shards; pass --shard K/N")
    index = (task - low) // step
    if not 0 <= index < count:
        raise ValueError(f"{what} give shard {index}/{count}, outside 0..{count - 1}; "
                         "pass --shard K/N")
    return Shard(index, count)


def resolve_shard(arg: str | None, env: Mapping[str, str] | None = None) -> Shard | None:
    """``--shard`` when given, else the Slurm array task's shard, else None."""
    return parse_shard(arg) if arg is not None else shard_from_env(env)


def select_shard(items: Sequence[T], shard: Shard | None) -> list[T]:
    """The shard's part of ``items`` (all of them for None)."""
    return list(items) if shard is None else shard.select(items)


def suite_digest(keys: Sequence[str]) -> str:
    """A digest of the whole suite's configuration keys, in order."""
    h = hashlib.sha256()
    for k in keys:
        h.update(k.encode())
        h.update(b"\n")
    return h.hexdigest()


def manifest_path(results: str | Path) -> Path:
    """Where a shard's manifest goes: beside a JSONL file (``x.jsonl`` ->
    ``x.shard.json``), or into a results folder (``DIR/results.shard.json``,
    beside its ``results.jsonl``)."""
    p = Path(results)
    return p.with_suffix(".shard.json") if p.suffix == ".jsonl" else p / "results.shard.json"


def write_manifest(results: str | Path, shard: Shard, keys: Sequence[str]) -> Path:
    """Record which part of which suite the results beside it are (for merge).

    ``keys``: the whole suite's configuration keys, in order.
    """
    path = manifest_path(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"shard": str(shard), "index": shard.index, "count": shard.count,
                            "suite_size": len(keys), "suite_digest": suite_digest(keys),
                            "keys": shard.select(keys)}
    write_atomic(path, json.dumps(data, indent=1) + "\n")
    return path


def apply_shard(configs: Sequence[K], arg: str | None, results: str | Path, *,
                env: Mapping[str, str] | None = None,
                log: Callable[[str], None] = print) -> list[K]:
    """``pyparbench run``'s shard step: the configurations of the shard given
    by ``arg`` (``--shard``) or the Slurm array task, all of them outside a
    shard. A shard's manifest is written beside ``results``.

    Raises
    ------
    ValueError
        A bad ``--shard`` or Slurm array variables (see :func:`resolve_shard`).
    """
    shard = resolve_shard(arg, env)
    if shard is None:
        return list(configs)
    keys = [c.key for c in configs]
    check_manifest(results, shard, keys)
    chosen = shard.select(configs)
    source = "--shard" if arg is not None else "the Slurm array task"
    log(f"shard {shard} (from {source}): {len(chosen)} of {len(configs)} configurations")
    write_manifest(results, shard, keys)
    return chosen


def check_manifest(results: str | Path, shard: Shard, keys: Sequence[str]) -> None:
    """Refuse to run ``shard`` into results whose manifest names another
    shard or another split (a re-run must resume the shard it continues).

    Raises
    ------
    ValueError
        Naming the folder's shard and the one asked for.
    """
    path = manifest_path(results)
    if not path.exists():
        return
    try:
        data = read_json_object(path)
    except ResultFileError as e:
        raise ValueError(f"{path}: not a shard manifest ({e.what}); move it away or use "
                         "another folder") from None
    theirs = (data.get("index"), data.get("count"))
    if theirs != (shard.index, shard.count):
        raise ValueError(f"{path} holds shard {data.get('shard', theirs)!s} and this run is "
                         f"shard {shard}: a folder keeps one shard of one split (re-running a "
                         f"shard of N: --shard K/N, or PYPARBENCH_SHARDS=N for the README's "
                         f"array script); use another folder for another split")
    if data.get("suite_digest") != suite_digest(keys):
        raise ValueError(f"{path}: shard {shard} of another suite ({data.get('suite_size')} "
                         f"configurations, this run plans {len(keys)}): the options or the "
                         "machine differ from the run that made this folder; use another "
                         "folder")
