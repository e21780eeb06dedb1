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
than :data:`THRESHOLD`), when the regret's interval over processes reaches
past :data:`THRESHOLD` (it is wide: the run cannot tell whether the
recommendation is within 3 % of the best;
:func:`pyparbench.stats.regret_estimate`, from the spread
of every setting the run measured in several processes), or when the
study's tuner or Intel's preset measured faster than it, the recommended
setting, the best one and those of the rivals measured faster
(:data:`RIVALS`) are run again in fresh processes, ``rounds`` more times
each, round by round across every model so that one
setting's processes are minutes apart; the rows whose interval reaches
furthest go first. A round's settings of one row are measured in turns
(:mod:`pyparbench.harness.turns`): the regret is their ratio, and in turns
a slow spell of the machine falls on both sides of it. The summary then
takes each setting's median over its rounds
(:func:`pyparbench.stats.merge_settings`) and reads each
regret in pairs of rounds (:func:`pyparbench.stats.regret_of`). A
second pass measures ``rounds`` more of each setting of a row still off or
still wide (the first pass's processes make the spread known where the
suite alone left it unknown), and a best that changed to a setting
measured once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace

from pyparbench.resultfiles import Result, RunConfig
from pyparbench.stats import (
    MergedSetting,
    ProcessSpread,
    merge_settings,
    paired_ratio_of,
    regret_estimate,
    regret_of,
    run_spread,
)

__all__ = ["PASSES", "RIVALS", "THRESHOLD", "confirmations"]

# A recommendation whose regret, and the upper end of its interval, are
# within this much of the best measured is not checked.
THRESHOLD = 0.03
# Passes of confirmation at most (a second when the best changed).
PASSES = 2
# Named settings the recommendation is held against: measured faster than
# it, each is confirmed with it (the study's tuner; Intel's preset, which
# often is the recommended setting with a shorter spin).
RIVALS = ("tftuner", "intel")


def _rows(records: Iterable[Result]) -> dict[tuple[str, int], list[Result]]:
    rows: dict[tuple[str, int], list[Result]] = defaultdict(list)
    for r in records:
        if r.ok and not r.config.framework:
            rows[(r.config.model, r.config.batch)].append(r)
    return rows


def _to_confirm(merged: Sequence[MergedSetting], spread: ProcessSpread | None,
                threshold: float) -> tuple[float, list[MergedSetting]]:
    """(how far the recommendation may be off: the upper end of its regret's
    interval, else its regret; the merged settings to measure again) for
    one model and batch."""
    def named(name: str) -> MergedSetting | None:
        return min((m for m in merged if m.named(name)), key=lambda m: m.median, default=None)

    rec = named("recommended")
    if rec is None:
        return 0.0, []
    best = min(merged, key=lambda m: m.median)
    regret = regret_of(rec, best)
    estimate = regret_estimate(rec, best, spread)
    reach = max(regret, estimate.high - 1.0) if estimate is not None else regret
    # A rival ahead of it in the rounds that measured both (read in pairs, as
    # the regret is), or by its figure where they share no round.
    ahead = [m for m in map(named, RIVALS) if m is not None and paired_ratio_of(rec, m) > 1.0]
    if reach <= threshold and not ahead:
        return reach, []
    unique = {id(m): m for m in (rec, best, *ahead)}
    return reach, list(unique.values())


def confirmations(records: Sequence[Result], rounds: int, *,
                  threshold: float = THRESHOLD, depth: int = 1) -> list[RunConfig]:
    """The configurations to run so that every setting a reported regret
    depends on (see the module docstring) has been measured in rounds 1 to
    ``rounds`` x ``depth`` besides the suite's (round 0): round-major across
    models, the rows whose regret may be furthest off first. A second pass (``depth`` 2)
    measures again what the first left more than ``threshold`` off or wide."""
    if rounds < 1:
        return []
    rows = _rows(records)
    spread = run_spread(r for rs in rows.values() for r in rs)
    wanted: list[tuple[float, list[list[RunConfig]]]] = []
    for row in rows.values():
        reach, todo = _to_confirm(merge_settings(row), spread, threshold)
        settings = []
        for m in todo:
            configs = [r.config for r in m.records]
            base = replace(configs[0], round=0)
            # Every setting of the row in every round, under any of its names:
            # a regret compares settings measured in the same rounds.
            done = {c.round for c in configs}
            settings.append([replace(base, round=k) for k in range(1, rounds * depth + 1)
                             if k not in done])
        if any(settings):
            wanted.append((reach, settings))
    wanted.sort(key=lambda w: -w[0])
    most = max((len(todo) for _, row in wanted for todo in row), default=0)
    return [todo[k] for k in range(most) for _, row in wanted for todo in row
            if k < len(todo)]
