"""A run's settings with their processes merged, and what its regrets rest on.

The main job runs every configuration in a fresh process, and some settings
in several: under two names (a preset and the recommender's setting, when
they agree), or again in confirmation rounds (``round`` > 0). A setting is
one figure however many processes measured it: the median over rounds of
each round's median of its processes' medians (:func:`merge_settings`).
By round, because a round is one stretch of the machine's time: the
settings a regret compares are measured in the same rounds, and a setting
that ran under two names in the suite (two processes of round 0) must not
outweigh a confirmation round that measured both sides of the regret in
turns (:mod:`pyparbench.harness.turns`): on a shared 2-core VM a model's
confirmation processes read 0.74 to 1.29 times its suite processes (ten
quick runs), alike for every setting of the row, so a figure of two suite
processes and one confirmation against one suite and two confirmation
processes reads that drift as a regret. How far apart a setting's
processes are, pooled over the run (:func:`run_spread`), gives each regret
its interval (:func:`regret_estimate`); see :mod:`.spread`. The report's
summary and the confirmation rounds read the same merge, and every ratio
of two merged settings in pairs of rounds (:func:`paired_ratio_of`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from pyparbench.choices import PRESETS
from pyparbench.resultfiles.rows import ResultSet
from pyparbench.resultfiles.schema import Result, RunConfig
from pyparbench.settings import Settings
from pyparbench.stats.spread import (
    ProcessSpread,
    RatioEstimate,
    estimate_paired_ratio,
    estimate_ratio,
    pooled_spread,
)
from pyparbench.timing import Summary

__all__ = ["REGRET_LEVEL", "MergedSetting", "input_spread", "merge_settings", "paired_ratio_of",
           "regret_estimate", "regret_of", "run_spread", "shared_rounds"]

# How a setting run under several names lists them: the recommender's first.
_NAME_ORDER = ("recommended", *PRESETS)
# The confidence of a regret's interval.
REGRET_LEVEL = 0.95


@dataclass(frozen=True)
class MergedSetting:
    """One setting of a model and batch, its name aside, with every process
    that measured it (``records``, all ``ok``).

    ``config`` is the first record's, named by every name the setting ran
    under ("recommended/tftuner") and carrying the recommender's prediction
    when one record has it; ``summary`` is the first process's, with the
    setting's figure as its median (the median over rounds of each round's
    median of its processes' medians) and, for several processes, ``q1``
    and ``q3`` the lowest and highest process median."""

    config: RunConfig
    names: tuple[str, ...]
    records: tuple[Result, ...]
    summary: Summary

    @property
    def settings(self) -> Settings:
        return self.config.settings

    @property
    def key(self) -> str:
        """The first record's key."""
        return self.records[0].key

    @property
    def median(self) -> float:
        """The setting's latency (ns): the median over rounds of each
        round's median of its processes' medians."""
        return self.summary.median

    @property
    def medians(self) -> tuple[float, ...]:
        """Each process's median (ns)."""
        return tuple(r.timing.median for r in self.records)

    @property
    def round_medians(self) -> tuple[float, ...]:
        """Each round's median of its processes' medians (ns), by round."""
        return tuple(statistics.median(v) for _, v in sorted(_by_round(self.records).items()))

    @property
    def processes(self) -> int:
        return len(self.records)

    def named(self, name: str) -> bool:
        """Whether it ran under ``name``."""
        return name in self.names


def merge_settings(ok: Sequence[Result]) -> list[MergedSetting]:
    """One :class:`MergedSetting` per setting of ``ok`` (results that
    measured, of one model and batch), in the order first measured.

    Raises
    ------
    ValueError
        A result that is not ``ok``.
    """
    groups: dict[str, list[Result]] = {}
    for r in ok:
        groups.setdefault(r.config.setting_key, []).append(r)
    out = []
    for rs in groups.values():
        first = rs[0]
        names = sorted({r.config.name for r in rs} - {""},
                       key=lambda n: (_NAME_ORDER.index(n) if n in _NAME_ORDER else 99, n))
        predicted = next((r.config.predicted_ns for r in rs if r.config.predicted_ns), None)
        config = replace(first.config, settings=first.config.settings.with_(
            name="/".join(names)), predicted_ns=predicted)
        summary = first.timing
        if len(rs) > 1:
            medians = [r.timing.median for r in rs]
            figure = statistics.median(statistics.median(v) for v in _by_round(rs).values())
            summary = replace(summary, median=figure, q1=min(medians), q3=max(medians))
        out.append(MergedSetting(config, tuple(names), tuple(rs), summary))
    return out


def _by_round(records: Iterable[Result]) -> dict[int, list[float]]:
    rounds: dict[int, list[float]] = {}
    for r in records:
        rounds.setdefault(r.config.round, []).append(r.timing.median)
    return rounds


def run_spread(results: Iterable[Result]) -> ProcessSpread | None:
    """The run's between-process spread (:func:`.spread.pooled_spread`): over
    every setting of every model, batch and framework that its ``ok``
    results measured in two or more processes; None when there is none."""
    groups: dict[str, list[float]] = {}
    for r in results:
        if r.ok:
            groups.setdefault(r.config.setting_key, []).append(r.timing.median)
    return pooled_spread(groups.values())


def shared_rounds(chosen: MergedSetting, best: MergedSetting) -> list[tuple[float, float]]:
    """(best's, chosen's) median of each round that measured both, by round."""
    a, b = _by_round(best.records), _by_round(chosen.records)
    return [(statistics.median(a[k]), statistics.median(b[k])) for k in sorted(a) if k in b]


def paired_ratio_of(chosen: MergedSetting, best: MergedSetting) -> float:
    """chosen / best read in pairs: the median over the rounds that measured
    both of the ratio of their round medians (:func:`.spread.estimate_paired_ratio`),
    so that the machine's drift from round to round (0.74 to 1.29 between a
    suite and its confirmation on a 2-core VM) cancels; without a shared
    round, the ratio of their figures. A setting against itself is exactly 1."""
    if chosen.config.setting_key == best.config.setting_key:
        return 1.0
    pairs = shared_rounds(chosen, best)
    return estimate_paired_ratio(pairs).ratio if pairs else chosen.median / best.median


def regret_of(chosen: MergedSetting, best: MergedSetting) -> float:
    """How much slower ``chosen`` is than ``best`` (0: not slower): their
    ratio read in pairs of rounds (:func:`paired_ratio_of`) - 1. Never below
    0: ``best`` is the fastest figure, and ``chosen`` measured faster than
    it in the rounds of both is no regret."""
    return max(0.0, paired_ratio_of(chosen, best) - 1.0)


def regret_estimate(chosen: MergedSetting, best: MergedSetting,
                    spread: ProcessSpread | None) -> RatioEstimate | None:
    """chosen / best as :func:`paired_ratio_of` reads it (paired by round), with
    its interval at :data:`REGRET_LEVEL` (the regret is the ratio - 1, at
    least 0); None without a spread. The best against itself is exactly 1.

    The best is the fastest of many settings, each read with its own
    luck: the interval says how far the two settings' processes leave the
    ratio uncertain, not how likely another setting is to be faster."""
    if spread is None:
        return None
    if chosen.config.setting_key == best.config.setting_key:
        return RatioEstimate(1.0, 1.0, 1.0, 1.0, float(spread.df), REGRET_LEVEL)
    # Paired by round, as paired_ratio_of reads it (a round's processes under
    # several names taken as one: conservative, it has a process's variance).
    pairs = shared_rounds(chosen, best)
    if pairs:
        return estimate_paired_ratio(pairs, spread, level=REGRET_LEVEL)
    return estimate_ratio(best.round_medians, chosen.round_medians, spread,
                          level=REGRET_LEVEL)


def input_spread(rs: ResultSet) -> ProcessSpread | None:
    """An input's between-process spread (:func:`.spread.pooled_spread`) over
    the settings it measured in two or more processes
    (:attr:`~pyparbench.resultfiles.ResultSet.process_groups`); None when
    there is none."""
    return pooled_spread(rs.process_groups)
