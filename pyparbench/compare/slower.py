"""One-sided tests of "the other input is slower than the baseline by more
than a factor": the per-row test of the regression gate (:mod:`.gate`).

The gate's claim about a row is "slower by more than PCT", so that is the
hypothesis tested, not "different": H0 ratio <= 1 + PCT against H1 ratio >
1 + PCT. A row a few per cent slower for certain is then no failure of a
5 % gate, however many samples show it. Each test is the one-sided form of
the row's own test in compare (:mod:`.match`):

* over processes: Student's t of ln(ratio) - ln(1 + PCT) over the standard
  error that the inputs' spreads between processes give;
* over per-run times: the one-sided Mann-Whitney U test of the other's runs
  against the baseline's scaled by 1 + PCT (the scale shift under which H0
  holds with equality).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyparbench.stats import se_of_interval

__all__ = ["slower_p_processes", "slower_p_runs"]


def slower_p_processes(ratio: float, low: float, high: float, df: float, level: float,
                       factor: float) -> float:
    """P(T >= t) for t = (ln ratio - ln factor) / se, where se is what the
    two-sided interval [low, high] at ``level`` with ``df`` degrees of
    freedom was built from (:func:`pyparbench.stats.estimate_ratio`)."""
    from scipy import stats as scipy_stats  # type: ignore[import-untyped]

    d = math.log(ratio) - math.log(factor)
    if high <= low:  # processes that never differed: the difference is all there is
        return 0.0 if d > 0 else 1.0
    se = se_of_interval(low, high, level, df)
    return float(scipy_stats.t.sf(d / se, df))


def slower_p_runs(baseline: Sequence[float], other: Sequence[float], factor: float) -> float:
    """The one-sided U test's p that ``other``'s runs are larger than
    ``baseline``'s times ``factor``."""
    from scipy import stats as scipy_stats

    p = float(scipy_stats.mannwhitneyu(other, [x * factor for x in baseline],
                                       alternative="greater").pvalue)
    return 1.0 if math.isnan(p) else p
