"""How much one setting's processes differ, and what that makes of a ratio:
the one statistical decision behind compare's significance and the main
job's regret intervals.

The unit is the process. The per-run times of one process are not
independent draws: they share the process's memory layout, its threads'
placement and whatever else the machine was doing while it ran, so one
process can read 1.5x slow throughout, and thousands of its runs say
nothing about the next process. A test of per-run times then calls almost
every difference between two processes significant. Each process gives one
figure, its median; a setting measured in k processes is the median of
their medians.

Few settings are measured in more than one or two processes (each costs a
fresh process), too few for a test of their own. What varies from process
to process is largely the machine's, not the setting's, so it is pooled: the
*spread* of an input (one run, one machine) is the standard deviation of
ln(process median) within a setting, pooled over every setting it measured
in two or more processes (the main job's confirmation rounds; a setting run
under a preset's name and the recommender's)::

    s^2 = sum over settings, processes of (x - mean of its setting)^2
          / sum over settings of (k - 1)          (its degrees of freedom)

A ratio of two settings' figures, b / a, is then read on the log scale:
ln(b / a) has the variance c(k_a) s_a^2 / k_a + c(k_b) s_b^2 / k_b, where
c(k) is how much more a median of k normal values varies than their mean
(1 for one or two processes, 1.35 for three, pi/2 for many). Student's t
with those degrees of freedom (Welch-Satterthwaite when the two spreads
come from two inputs) gives the ratio's two-sided p-value and its interval.

Two settings measured together (the rounds of a confirmation, the steps of
a lockstep run, the rounds of the recommender's verification) are read in
pairs: :func:`estimate_paired_ratio`, the median of the per-pair log
ratios, with the interval from the spread or, where there is none, from
the order statistics of the pairs. Every paired ratio of the package is
that function's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

__all__ = ["PairedEstimate", "ProcessSpread", "RatioEstimate", "estimate_paired_ratio",
           "estimate_ratio", "median_interval", "pooled_spread", "row_spread", "se_of_interval",
           "sign_test_p", "t_quantile", "t_two_sided_p"]

# Var(median of k standard normals) x k, for k = 1..10 (exact for 1 and 2,
# else from 2 x 10^6 draws each);
# pi / 2 beyond: a median of k process medians wanders this much more than
# their mean would.
_MEDIAN_VARIANCE = (1.0, 1.0, 1.346, 1.190, 1.434, 1.287, 1.475, 1.343, 1.496, 1.384)


@dataclass(frozen=True)
class ProcessSpread:
    """An input's between-process spread: ``sigma``, the standard deviation of
    ln(process median) within a setting, with ``df`` degrees of freedom,
    pooled over ``settings`` settings measured in two or more processes."""

    sigma: float
    df: int
    settings: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise ValueError(f"sigma must be a finite number >= 0, got {self.sigma!r}")
        if self.df < 1:
            raise ValueError(f"a spread needs at least 1 degree of freedom, got {self.df}")

    def as_dict(self) -> dict[str, float | int]:
        return {"sigma": self.sigma, "df": self.df, "settings": self.settings}


@dataclass(frozen=True)
class RatioEstimate:
    """b / a of two settings' figures (medians of their process medians),
    with its two-sided p-value (no difference) and its interval at
    ``level``."""

    ratio: float
    low: float
    high: float
    p_value: float
    df: float
    level: float

    @property
    def includes_one(self) -> bool:
        """Whether the interval holds 1 (no difference)."""
        return self.low <= 1.0 <= self.high


def pooled_spread(groups: Iterable[Sequence[float]]) -> ProcessSpread | None:
    """The spread pooled over ``groups`` (each setting's process medians, in
    ns); None when no setting has two processes.

    Raises
    ------
    ValueError
        A median that is not a positive finite number.
    """
    ss, df, settings = 0.0, 0, 0
    for medians in groups:
        if len(medians) < 2:
            continue
        logs = [_log(m) for m in medians]
        mean = math.fsum(logs) / len(logs)
        ss += math.fsum((x - mean) ** 2 for x in logs)
        df += len(logs) - 1
        settings += 1
    if df == 0:
        return None
    return ProcessSpread(math.sqrt(ss / df), df, settings)


def row_spread(a: Sequence[float], b: Sequence[float]) -> ProcessSpread:
    """One row's own spread between processes: ln(process median) pooled
    within each side's processes (``a``, ``b``, ns; two or more each), with
    their n_a + n_b - 2 degrees of freedom.

    Settings differ in how far their processes are apart (a pinned one by
    1-2 %, an unpinned one or a pool whose threads land differently in each
    process by 10-25 % on a 2-core VM), so an input's spread pooled over
    settings says little of any one row: it marks the noisy rows and, where
    one disturbed run widens it, hides changes on the steady ones. With its
    own processes a row is tested on its own spread, Student's t with its
    own degrees of freedom.

    Raises
    ------
    ValueError
        A side with fewer than two processes, or a median that is not a
        positive time.
    """
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"a row's own spread needs two processes a side, got {len(a)} and "
                         f"{len(b)}")
    own = pooled_spread((a, b))
    assert own is not None
    return replace(own, settings=1)


def _log(ns: float) -> float:
    if not (math.isfinite(ns) and ns > 0):
        raise ValueError(f"a process median must be a positive time, got {ns!r}")
    return math.log(ns)


def _median_variance(k: int) -> float:
    """Var(ln median of k process medians) / s^2."""
    c = _MEDIAN_VARIANCE[k - 1] if k <= len(_MEDIAN_VARIANCE) else math.pi / 2
    return c / k


def estimate_ratio(a: Sequence[float], b: Sequence[float], spread_a: ProcessSpread,
                   spread_b: ProcessSpread | None = None, *, level: float = 0.95
                   ) -> RatioEstimate:
    """median(b) / median(a) of two settings' process medians (ns), its p-value
    and its interval at ``level``. ``spread_b`` None: both settings are of
    one input, whose spread is ``spread_a`` (its degrees of freedom then
    count once).

    Raises
    ------
    ValueError
        An empty side, a median that is not a positive time, or a level
        outside (0, 1).
    """
    if not a or not b:
        raise ValueError(f"each side needs a process at least, got {len(a)} and {len(b)}")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level!r}")
    d = _log(statistics.median(b)) - _log(statistics.median(a))
    for m in (*a, *b):
        _log(m)
    sb = spread_a if spread_b is None else spread_b
    va = _median_variance(len(a)) * spread_a.sigma ** 2
    vb = _median_variance(len(b)) * sb.sigma ** 2
    if spread_b is None:
        df = float(spread_a.df)
    elif va + vb == 0:
        df = float(spread_a.df + sb.df)
    else:  # Welch-Satterthwaite: two estimates of two machines' spreads
        df = (va + vb) ** 2 / (va ** 2 / spread_a.df + vb ** 2 / sb.df)
    se = math.sqrt(va + vb)
    if se == 0:  # processes that never differed: any difference is all there is
        p = 1.0 if d == 0 else 0.0
        return RatioEstimate(math.exp(d), math.exp(d), math.exp(d), p, df, level)
    half = t_quantile(1 - level, df) * se
    return RatioEstimate(math.exp(d), math.exp(d - half), math.exp(d + half),
                         t_two_sided_p(d / se, df), df, level)


@dataclass(frozen=True)
class PairedEstimate(RatioEstimate):
    """b / a read from pairs (a, b) measured together (:func:`estimate_paired_ratio`):
    a :class:`RatioEstimate` with the number of ``pairs`` and in how many of
    them b was the larger (``above``: b / a > 1).

    ``method`` says where the interval and p-value come from: ``"t"``,
    Student's t over a :class:`ProcessSpread` (``df`` its degrees of
    freedom); ``"sign"``, the order statistics of the pairs' log ratios and
    the sign test, which assume nothing of their distribution (``df`` 0)."""

    pairs: int
    above: int
    method: str

    @property
    def share_above(self) -> float:
        """The share of pairs in which b was the larger."""
        return self.above / self.pairs


def estimate_paired_ratio(pairs: Sequence[tuple[float, float]],
                          spread: ProcessSpread | None = None, *,
                          level: float = 0.95) -> PairedEstimate:
    """b / a from pairs (a, b) of two settings' times (ns) or rates measured
    together (one pair a round, or a step taken in turns): the one paired
    ratio of the package.

    The estimate is exp(median of the per-pair log ratios ln(b / a)). With
    an even number of pairs this is the geometric mean of the two middle
    ratios, not their arithmetic mean: b / a and a / b then read as exact
    inverses of each other, as they must.

    With a ``spread``, each pair's log ratio is taken to vary as two
    processes of it (conservative: a pair measured together shares the
    machine's drift, which the spread holds), and Student's t gives the
    p-value and the interval at ``level``. Without one, the interval is the
    order statistics of the log ratios that bracket their median with at
    least ``level`` (:func:`median_interval`) and the p-value the sign
    test's (:func:`sign_test_p`): nothing is assumed of their distribution.

    Raises
    ------
    ValueError
        No pair, a value that is not a positive finite number, or a level
        outside (0, 1).
    """
    if not pairs:
        raise ValueError("a paired ratio needs a pair at least, got none")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level!r}")
    logs = sorted(_log(b) - _log(a) for a, b in pairs)
    n = len(logs)
    d = statistics.median(logs)
    above = sum(x > 0 for x in logs)
    if spread is None:
        lo, hi = median_interval(n, level)
        p = sign_test_p(above, sum(x < 0 for x in logs))
        return PairedEstimate(math.exp(d), math.exp(logs[lo]), math.exp(logs[hi]), p, 0.0,
                              level, n, above, "sign")
    se = math.sqrt(2.0 * _median_variance(n)) * spread.sigma
    df = float(spread.df)
    if se == 0:
        p = 1.0 if d == 0 else 0.0
        return PairedEstimate(math.exp(d), math.exp(d), math.exp(d), p, df, level, n, above,
                              "t")
    half = t_quantile(1 - level, df) * se
    return PairedEstimate(math.exp(d), math.exp(d - half), math.exp(d + half),
                          t_two_sided_p(d / se, df), df, level, n, above, "t")


def median_interval(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """0-based indices (lo, hi) into n sorted samples that bracket their
    median with at least ``confidence`` (order statistics of Binomial(n, 1/2));
    (0, n - 1) when n is too small for that confidence.

    Raises
    ------
    ValueError
        ``n`` below 1 or ``confidence`` outside (0, 1).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    tail = (1.0 - confidence) / 2.0
    below = 0.0  # P(X < k + 1) for X ~ Binomial(n, 1/2), accumulated
    k = 0
    while True:
        below += math.comb(n, k) / (1 << n)
        if below > tail:
            break
        k += 1
    return (k - 1, n - k) if k > 0 else (0, n - 1)


def sign_test_p(above: int, below: int) -> float:
    """The exact two-sided p-value of the sign test: ``above`` pairs with a
    positive difference and ``below`` with a negative one (ties left out)
    under Binomial(above + below, 1/2) (:func:`scipy.stats.binomtest`); 1
    without an untied pair.

    Raises
    ------
    ValueError
        A negative count.
    """
    from scipy import stats as scipy_stats  # type: ignore[import-untyped]

    if above < 0 or below < 0:
        raise ValueError(f"counts must be >= 0, got {above} and {below}")
    if above + below == 0:
        return 1.0
    return float(scipy_stats.binomtest(above, above + below, 0.5).pvalue)


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` (> 0) degrees of freedom."""
    from scipy import stats as scipy_stats

    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df!r}")
    if not math.isfinite(t):
        return 0.0
    return float(2.0 * scipy_stats.t.sf(abs(t), df))


def t_quantile(p: float, df: float) -> float:
    """The t >= 0 with ``t_two_sided_p(t, df) == p`` (``p`` in (0, 1))."""
    from scipy import stats as scipy_stats

    if not 0 < p < 1:
        raise ValueError(f"p must be between 0 and 1, got {p!r}")
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df!r}")
    return float(scipy_stats.t.isf(p / 2.0, df))


def se_of_interval(low: float, high: float, level: float, df: float | None = None) -> float:
    """The standard error (log units) behind the two-sided interval [low, high]
    of a ratio at confidence ``level``: its half-width on the log scale over
    Student's t quantile with ``df`` degrees of freedom, or over the normal's
    where ``df`` is None. Every standard error backed out of an interval in
    the package comes from here, with the distribution said by the caller.

    Raises
    ------
    ValueError
        An interval that is not 0 < low <= high, or a level outside (0, 1).
    """
    from scipy import stats as scipy_stats

    if not 0 < low <= high:
        raise ValueError(f"an interval needs 0 < low <= high, got [{low!r}, {high!r}]")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level!r}")
    q = (float(scipy_stats.norm.isf((1.0 - level) / 2.0)) if df is None
         else t_quantile(1.0 - level, df))
    return (math.log(high) - math.log(low)) / (2.0 * q)
