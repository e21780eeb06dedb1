"""The recommender's last step on this machine: the few best predicted
settings measured whole, side by side, and the measured best taken.

The cost model is built from op times measured one configuration at a time;
what it leaves out (the side-by-side runner's start-up and barrier on a
sub-millisecond instance, a framework pool's dispatch on a graph of small
ops) decides between settings whose predictions are close. Measuring those
few settings whole, in interleaved rounds (a burst of other work hits all of
them alike), costs seconds and settles it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyparbench.executor import compile_graph, instances_runner
from pyparbench.graph import Graph
from pyparbench.recommender.decision import switch_to
from pyparbench.settings import Settings
from pyparbench.stats import estimate_paired_ratio

__all__ = ["Verified", "measure_whole", "paired_gain", "repeats_for", "rounds_for", "runner",
           "verify_choice"]
# About this long is spent measuring, all settings and rounds together.
BUDGET_NS = 2e9
MIN_ROUNDS, MAX_ROUNDS = 2, 9
# A round runs a small graph in one C++ loop for at least this long, after
# one untimed run: the first run after another setting's is slow (its OpenMP
# team wakes, its data comes back into cache; GoogLeNet b1's sync 1x2 read
# 30-45 ms right after async 2x1 against 16-18 ms warm, which made the
# slower setting look 16% faster).
MIN_ROUND_NS = 20e6
ROUND_WARMUP = 1

Runner = Callable[[Settings, int, int], list[float]]


@dataclass(frozen=True)
class Verified:
    """One setting measured whole: the median over rounds of each round's
    median (ns), and those per-round medians (paired with the other
    settings' of the same round)."""

    settings: Settings
    ns: float
    rounds: int
    per_round: tuple[float, ...] = ()


def runner(graphs: Sequence[Graph]) -> Runner:
    """Runs ``graphs`` (one per instance) under a setting: repeats, warmup ->
    each repeat's ns."""
    if len(graphs) == 1:
        compiled = compile_graph(graphs[0])
        return lambda s, repeats, warmup: list(
            compiled.run(s.with_(instances=1), repeats=repeats, warmup=warmup).ns)
    prepared: dict[Settings, Any] = {}  # compiled once per setting, not per round

    def side_by_side(s: Settings, repeats: int, warmup: int) -> list[float]:
        if s not in prepared:
            prepared[s] = instances_runner(graphs, s)
        ns: list[float] = prepared[s](repeats, warmup)[0]
        return ns
    return side_by_side


def repeats_for(estimate_ns: float) -> int:
    """Timed runs of a setting in one round: about MIN_ROUND_NS, 1 to 20."""
    return max(1, min(20, int(MIN_ROUND_NS / max(estimate_ns, 1.0))))


def rounds_for(per_round_ns: float, budget_ns: float) -> int:
    """Rounds that fit the budget, MIN_ROUNDS to MAX_ROUNDS."""
    return max(MIN_ROUNDS, min(MAX_ROUNDS, int(budget_ns / max(per_round_ns, 1.0))))


def measure_whole(settings: Sequence[Settings],
                  graphs_of: Callable[[Settings], Sequence[Graph] | None],
                  budget_ns: float = BUDGET_NS) -> list[Verified]:
    """Each setting's latency, measured whole in interleaved rounds.

    ``graphs_of(s)`` gives the graphs one run of ``s`` needs (one per
    instance, each with its own weights) or None when ``s`` cannot be run
    here; those are left out of the result.
    """
    runs: list[tuple[Settings, Runner, int]] = []
    per_round = 0.0
    for s in settings:
        graphs = graphs_of(s)
        if not graphs:
            continue
        run = runner(graphs)
        est = min(run(s, 1, 1))  # and a warm-up
        repeats = repeats_for(est)
        runs.append((s, run, repeats))
        per_round += est * (repeats + ROUND_WARMUP)
    if not runs:
        return []
    rounds = rounds_for(per_round, budget_ns)
    samples: list[list[float]] = [[] for _ in runs]
    for _ in range(rounds):
        for i, (s, run, repeats) in enumerate(runs):
            samples[i].append(statistics.median(run(s, repeats, ROUND_WARMUP)))
    return [Verified(s, statistics.median(v), rounds, tuple(v))
            for (s, _, _), v in zip(runs, samples, strict=True)]


def _rounds(v: Verified) -> list[Verified]:
    """One Verified per round (the setting's median in that round)."""
    return [Verified(v.settings, ns, 1) for ns in (v.per_round or (v.ns,))]


def verify_choice(chosen: Settings, measured: Sequence[Verified],
                  value: Callable[[Verified], float], higher_is_better: bool) -> Settings:
    """``chosen``, unless a measured setting beats it as
    :func:`~pyparbench.recommender.decision.switch_to` says (``value``:
    latency in ns, or samples per second): the median over rounds of the two
    settings' ratio in the same round, so that a slow spell that hit one
    round hits both sides of its ratio."""
    mine = next((v for v in measured if v.settings == chosen), None)
    if mine is None:
        return chosen
    return switch_to(chosen, ((other.settings,
                               *paired_gain(mine, other, value, higher_is_better))
                              for other in measured if other.settings != chosen))


def paired_gain(mine: Verified, other: Verified, value: Callable[[Verified], float],
                higher_is_better: bool) -> tuple[float, float]:
    """How much faster ``other`` measured than ``mine``: the two settings'
    ratio read in pairs of rounds (above 1: ``other`` faster;
    :func:`pyparbench.stats.estimate_paired_ratio`, the median of the
    per-round log ratios), and the share of rounds in which ``other`` was
    faster.

    Raises
    ------
    ValueError
        No round of both, or a value that is not a positive number.
    """
    pairs = [(value(a), value(b)) if higher_is_better else (value(b), value(a))
             for a, b in zip(_rounds(mine), _rounds(other), strict=False)]
    est = estimate_paired_ratio(pairs)
    return est.ratio, est.share_above
