"""The OpenMP wait policy (``omp_wait``) as a knob the recommender reasons about.

When a parallel region ends, the team's other threads wait for the next
one: libgomp lets them spin (``GOMP_SPINCOUNT`` pause loops: 300,000 when
``OMP_WAIT_POLICY`` is unset, about 3 ms by libgomp's own estimate; Intel's
preset asks for 20,000, about 0.2 ms) and then sleep on a futex; ``active``
spins for minutes, ``passive`` sleeps at once. Which is best depends on how
long the gaps between regions are and on whether the CPUs are shared:

* back to back (a sync run: one region per node, microseconds apart) every
  spinning policy wakes its team in about a microsecond and ``passive``
  pays a futex wake (8-10 us on the project's 2-core VM) per region;
* after a gap longer than the spin, the thread has gone to sleep and the
  region pays the wake-up: a shorter spin gives nothing back;
* on CPUs shared with other processes, a spinning thread stays runnable,
  so the scheduler preempts it to run the others, and when the next region
  starts nobody wakes it: it waits for its turn (milliseconds on a busy
  machine), while a sleeping thread is woken by the fork and placed at
  once. The longer a policy spins, the more regions meet a preempted
  spinner: that is where Intel's shorter spin wins.

So the recommender measures what a region costs under each policy
(:func:`measure_wait`: passive, Intel's 20,000, the default 300,000 and
active, at each team size and after serial gaps of 0 to 1 ms, each policy
in its own process, interleaved; cached with the calibration); the
simulation adds each region's difference from the default policy to the
node's time (op times were measured under the default policy); every
candidate whose ops run on an OpenMP team of more than one thread is also
tried with each measured policy (:func:`wait_variants`); and verification
(:func:`to_verify`, :func:`measure_variants`) measures the wait variants of
the best candidates, and the presets that differ from one only by spin
count, each policy in its own process, interleaved round by round.

Between settings that differ only in spin count and measure alike (within
:data:`SPIN_TIE`), the shorter spin is taken (:func:`shorter_spin`; a
spin, not ``passive``): what it can lose is bounded (a futex wake, microseconds, per region after a
gap longer than its spin), what the longer spin can lose is not (a
preempted spinner, milliseconds per region whenever another process
wants the CPU), and it leaves the CPUs to others sooner. Ten quick main
jobs on the project's 2-core VM read Intel's preset (the default setting
with a 20,000 spin) fastest in 5 of 10 GoogLeNet rows while verification
had measured it within 3 % of the default, which it kept.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Collection, Sequence

from pyparbench.machine.cpuload import ForeignLoad
from pyparbench.recommender.children import PolicyChildren
from pyparbench.recommender.costmodel import WaitCosts, wait_key
from pyparbench.recommender.simulate import omp_team
from pyparbench.recommender.side_by_side import (
    BUDGET_NS,
    ROUND_WARMUP,
    Verified,
    paired_gain,
    repeats_for,
    rounds_for,
)
from pyparbench.settings import INTEL_SPINCOUNT, OmpWait, Settings

__all__ = ["GAPS", "ROUNDS", "SPIN_TIE", "WAIT_POLICIES", "measure_variants", "measure_wait",
           "shorter_spin", "spin_length", "spin_only", "to_verify", "wait_teams",
           "wait_variants"]

# The policies measured and tried: sleep at once, Intel's spin, libgomp's
# default spin, spin on.
WAIT_POLICIES: tuple[OmpWait, ...] = ("passive", INTEL_SPINCOUNT, None, "active")
# Serial stretches before a region (ns): back to back, shorter than Intel's
# spin, between Intel's spin and the default's, longer than both.
GAPS = (0.0, 1e4, 1e5, 1e6)
# Interleaved rounds per policy; each figure is the median over them.
ROUNDS = 3
# A shorter spin measured at most this much slower than the setting chosen
# (the median of the per-round ratios) is taken instead (see the module
# docstring): the margin a switch needs (decision.SWITCH), the other way
# round. Ten quick main jobs on the project's 2-core VM: where 20,000 was
# taken and the default measured best, ours was 0.9-3.4 % off; where the
# default was kept and 20,000 measured best, 5.0-14.7 %.
SPIN_TIE = 0.03
# libgomp's spin count when OMP_WAIT_POLICY is unset.
DEFAULT_SPINCOUNT = 300_000


def wait_teams(counts: Sequence[int]) -> tuple[int, ...]:
    """The team sizes the wait costs are measured at: the intra-op counts
    calibrated, and one (a team without waiting threads: what the policies
    cannot change, the noise of the measurement)."""
    return tuple(sorted({1, *counts}))


def _rotated(items: Sequence[OmpWait], r: int) -> list[OmpWait]:
    """Round ``r``'s order: each policy goes first in turn."""
    k = r % len(items)
    return [*items[k:], *items[:k]]


def measure_wait(teams: Sequence[int], *, gaps: Sequence[float] = GAPS, rounds: int = ROUNDS,
                 policies: Sequence[OmpWait] = WAIT_POLICIES) -> WaitCosts:
    """What a parallel region costs under each policy, at each team size and
    after each gap: the median over ``rounds`` interleaved rounds, each
    policy in a child of its own (:class:`~pyparbench.recommender.children.PolicyChildren`).

    Raises
    ------
    ValueError
        No team sizes, a team size < 1, rounds < 1, no default policy among
        ``policies``, or bad gaps (see :class:`WaitCosts`).
    ChildFailed
        A child died, hung or failed.
    """
    if not teams or any(t < 1 for t in teams):
        raise ValueError(f"team sizes must be >= 1, got {list(teams)}")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if None not in policies:
        raise ValueError(f"the default policy (None) must be measured, got {list(policies)}")
    samples: dict[str, dict[int, list[list[float]]]] = {
        wait_key(p): {t: [] for t in teams} for p in policies}
    with PolicyChildren(policies) as kids:
        # Each child's imports done (all at once) before the clock starts.
        kids.ask_all({wait_key(p): {"do": "gaps", "threads": [], "gaps": []}
                      for p in policies})
        cpu0, t0 = kids.cpu_s, time.monotonic()
        with ForeignLoad() as load:
            for r in range(rounds):
                for p in _rotated(list(policies), r):
                    got = kids.ask(p, {"do": "gaps", "threads": list(teams),
                                       "gaps": list(gaps)}).regions
                    for t in teams:
                        samples[wait_key(p)][t].append(list(got[str(t)]))
        wall = max(time.monotonic() - t0, 1e-9)
        # The children's CPU time is this measurement's, not other processes'.
        mine = (kids.cpu_s - cpu0) / (wall * (os.cpu_count() or 1))
    regions = {k: {t: tuple(statistics.median(v[i] for v in rs) for i in range(len(gaps)))
                   for t, rs in teams_.items()} for k, teams_ in samples.items()}
    return WaitCosts(gaps=tuple(gaps), regions=regions, load=max(0.0, load.foreign - mine))


def wait_variants(settings: Settings, policies: Sequence[OmpWait]) -> list[Settings]:
    """``settings`` under each of ``policies`` but its own, when its ops run
    on OpenMP teams of more than one thread (else the policy changes
    nothing and there are none)."""
    if not omp_team(settings):
        return []
    return [settings.with_(omp_wait=p) for p in policies if p != settings.omp_wait]


def spin_length(policy: OmpWait) -> float:
    """How long a waiting thread spins under ``policy``, in spins: passive
    0, a spin count itself, libgomp's default 300,000, active unbounded."""
    if policy is None:
        return float(DEFAULT_SPINCOUNT)
    if policy == "passive":
        return 0.0
    if policy == "active":
        return float("inf")
    if isinstance(policy, int):
        return float(policy)
    raise ValueError(f"omp_wait must be None, 'passive', 'active' or a spin count, got {policy!r}")


def shorter_spin(pick: Settings, measured: Sequence[Verified],
                 value: Callable[[Verified], float], higher_is_better: bool) -> Settings:
    """``pick``, or the fastest of its spin-only variants in ``measured``
    that spins less, but spins, and measured at most :data:`SPIN_TIE`
    slower than it (see the module docstring). ``passive`` is never taken
    this way: it pays a futex wake on every region, back to back too (53.7
    us against 1.1-1.3 us for the spinning policies on the project's 2-core
    VM), so where it measures alike the machine was busy at that moment.
    ``value`` and ``higher_is_better`` as for
    :func:`~pyparbench.recommender.side_by_side.verify_choice`."""
    mine = next((v for v in measured if v.settings == pick), None)
    if mine is None or not omp_team(pick):
        return pick
    best, best_gain = pick, 1.0 - SPIN_TIE
    for other in measured:
        if not (spin_only(other.settings, pick)
                and 0 < spin_length(other.settings.omp_wait) < spin_length(pick.omp_wait)):
            continue
        gain, _ = paired_gain(mine, other, value, higher_is_better)
        if gain >= best_gain:
            best, best_gain = other.settings, gain
    return best


def spin_only(a: Settings, b: Settings) -> bool:
    """Whether ``a`` and ``b`` differ in their wait policy only (names aside)."""
    return a.omp_wait != b.omp_wait and (a.with_(name="", omp_wait=None)
                                         == b.with_(name="", omp_wait=None))


def to_verify(chosen: Sequence[Settings], known: Collection[Settings],
              presets: Sequence[Settings], policies: Sequence[OmpWait]) -> list[Settings]:
    """The settings verification adds to ``chosen`` (the best predicted, the
    choice first): each one's wait variants among ``known`` (the candidates
    predicted), and each preset (named) that differs from one of them only
    by its spin count, where it has an OpenMP team for the policy to act
    on; none twice."""
    out: list[Settings] = []
    seen = {s.with_(name="") for s in chosen}

    def add(s: Settings) -> None:
        if s.with_(name="") not in seen:
            seen.add(s.with_(name=""))
            out.append(s)

    plain = {s.with_(name="") for s in known}
    for s in chosen:
        for v in wait_variants(s, policies):
            if v.with_(name="") in plain:
                add(v)
    for p in presets:
        if omp_team(p) and any(spin_only(p, s) for s in chosen):
            add(p)
    return out


def measure_variants(model: str, runs: Sequence[tuple[Settings, int]],
                     budget_ns: float = BUDGET_NS) -> list[Verified]:
    """Each setting's latency, measured whole, each wait policy in a child
    of its own, the children taking turns round by round (see
    :mod:`~pyparbench.recommender.children`); ``runs``: each setting with
    the batch of one instance's graph (the registered ``model`` at that
    batch, one copy per instance). The result is in the order of ``runs``.

    Raises
    ------
    ChildFailed
        A child died, hung or failed (a setting this machine cannot hold).
    """
    groups: dict[str, list[int]] = {}
    for i, (s, _) in enumerate(runs):
        groups.setdefault(wait_key(s.omp_wait), []).append(i)
    policies = [runs[ix[0]][0].omp_wait for ix in groups.values()]
    repeats: dict[int, int] = {}
    samples: dict[int, list[float]] = {i: [] for i in range(len(runs))}
    with PolicyChildren(policies) as kids:
        # Every child's imports done (all at once), then one child at a time
        # builds and compiles its graphs and runs each setting once (for its
        # repeats), so that what a child sets up at its first run (its team;
        # the per-node thread rule's timing of the team's start) is not done
        # beside another child's work. Loaded all at once, a child often
        # stayed slow for its whole measurement (GoogLeNet b1, sync 1x2,
        # 20,000 and the default: the 20,000 child read 11.3-11.7 ms in every
        # round of 4 measurements of 6, against 6.9-7.2 ms alone; loaded in
        # turn, in 0 of 8).
        kids.ask_all({k: {"do": "env"} for k in groups})
        loaded = {k: kids.ask(runs[ix[0]][0].omp_wait,
                              {"do": "load", "model": model,
                               "runs": [{"settings": runs[i][0].as_dict(), "batch": runs[i][1]}
                                        for i in ix]})
                  for k, ix in groups.items()}
        per_round = 0.0
        for k, ix in groups.items():
            for i, e in zip(ix, loaded[k].estimates, strict=True):
                repeats[i] = repeats_for(e)
                per_round += e * (repeats[i] + ROUND_WARMUP)
        rounds = rounds_for(per_round, budget_ns)
        for r in range(rounds):
            for p in _rotated(policies, r):
                ix = groups[wait_key(p)]
                ns = kids.ask(p, {"do": "round", "repeats": [repeats[i] for i in ix]}).ns
                for i, v in zip(ix, ns, strict=True):
                    samples[i].append(float(v))
    return [Verified(s, statistics.median(samples[i]), rounds, tuple(samples[i]))
            for i, (s, _) in enumerate(runs)]
