"""Confirmation rounds: the settings a regret is read from, measured again.

A run measures each setting once, in one fresh process, for a fraction of
a second. On a shared machine a slow spell (another tenant's burst, a
descheduled core) can last that long, so one process in a few reads 1.5x
slow throughout; and the fastest of a hundred single measurements is
likely one that drew a quiet spell. A regret read from single processes is
then mostly noise: the same setting, run under two names minutes apart,
has differed by 1.5x here.

So after the suite, each model and batch whose regret the run reports is
checked: when the recommender's setting is not the best measured (by more
than :data:`THRESHOLD`), or the study's tuner measured faster than it, the
recommended setting, the best one and the tuner's (when faster) are run
again in fresh processes, ``rounds`` more times each, round by round
across every model so that one setting's processes are minutes apart. The
summary then takes each setting's median over its processes
(:func:`pyparbench.report.summary.merge_settings`). A second pass measures
``rounds`` more of each setting of a row still off, and a best that changed
to a setting measured once.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyparbench.runner import Config

__all__ = ["PASSES", "THRESHOLD", "confirmations"]

# A recommendation within this much of the best measured is not checked.
THRESHOLD = 0.03
# Passes of confirmation at most (a second when the best changed).
PASSES = 2


def _rows(records: Iterable[Mapping[str, Any]]
          ) -> dict[tuple[str, int], list[Mapping[str, Any]]]:
    rows: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        c = r.get("config", {})
        if r.get("status") == "ok" and "model" in c and not c.get("framework"):
            rows[(c["model"], int(c["batch"]))].append(r)
    return rows


def _to_confirm(merged: Sequence[Mapping[str, Any]], threshold: float
                ) -> tuple[float, list[Mapping[str, Any]]]:
    """(how far the recommendation is off, the merged settings to measure
    again) for one model and batch."""
    def named(name: str) -> Mapping[str, Any] | None:
        found = [m for m in merged if name in m["config"].get("names", ())]
        return min(found, key=lambda m: m["summary"]["median"]) if found else None

    rec = named("recommended")
    if rec is None:
        return 0.0, []
    best = min(merged, key=lambda m: m["summary"]["median"])
    tuner = named("tftuner")
    regret = rec["summary"]["median"] / best["summary"]["median"] - 1.0
    tuner_ahead = tuner is not None and tuner["summary"]["median"] < rec["summary"]["median"]
    if regret <= threshold and not tuner_ahead:
        return regret, []
    chosen = [rec, best, *([tuner] if tuner_ahead and tuner is not None else [])]
    unique = {id(m): m for m in chosen}
    return regret, list(unique.values())


def confirmations(records: Sequence[Mapping[str, Any]], rounds: int, *,
                  threshold: float = THRESHOLD, depth: int = 1) -> list[Config]:
    """The configurations to run so that every setting a reported regret
    depends on (see the module docstring) has been measured in
    ``rounds`` x ``depth`` + 1 processes: round-major across models, the rows
    furthest off first. A second pass (``depth`` 2) measures again what the
    first left more than ``threshold`` off."""
    from pyparbench.report.summary import merge_settings

    if rounds < 1:
        return []
    wanted: list[tuple[float, list[list[Config]]]] = []
    for row in _rows(records).values():
        regret, todo = _to_confirm(merge_settings(row), threshold)
        settings = []
        for m in todo:
            configs = [Config.from_dict(dict(r["config"])) for r in m["records"]]
            base = replace(configs[0], round=0)
            # Rounds of this configuration (its name included) already run.
            done = [c.round for c in configs if replace(c, round=0).key == base.key]
            missing = rounds * depth + 1 - int(m["processes"])
            settings.append([replace(base, round=max(done) + 1 + i) for i in range(missing)])
        if any(settings):
            wanted.append((regret, settings))
    wanted.sort(key=lambda w: -w[0])
    most = max((len(todo) for _, row in wanted for todo in row), default=0)
    return [todo[k] for k in range(most) for _, row in wanted for todo in row
            if k < len(todo)]
