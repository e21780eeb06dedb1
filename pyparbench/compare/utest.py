"""The two-sided Mann-Whitney U test of two sets of per-run times, for any sample sizes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

__all__ = ["MIN_SAMPLES", "CompareError", "smallest_p_at_least", "u_test"]

MIN_SAMPLES = 3


class CompareError(ValueError):
    """The inputs cannot be compared as asked (one line, naming the input)."""


def smallest_p_at_least(n1: int, n2: int, alpha: float) -> float | None:
    """The smallest two-sided p a U test of ``n1`` and ``n2`` samples can give,
    2 / C(n1 + n2, n1), when it is at least ``alpha`` (no outcome could be
    significant); None when a p below ``alpha`` is possible.

    Decided exactly, for any sample sizes: C(n1 + n2, n1) has tens of
    thousands of digits for thousands of samples a side (too large for a
    float), so it is built up factor by factor, C(m - k + i, i) for i = 1 ..
    k = min(n1, n2), an increasing sequence, and the loop stops as soon as
    it passes 2 / alpha (after a step or two but for tiny samples).
    """
    if n1 < 1 or n2 < 1:
        raise ValueError(f"sample sizes must be >= 1, got {n1} and {n2}")
    bound = 2 / Fraction(alpha)  # exact: alpha's binary value
    k, m = min(n1, n2), n1 + n2
    c = 1
    for i in range(1, k + 1):
        c = c * (m - k + i) // i  # C(m - k + i, i), exactly
        if c > bound:
            return None
    return 2 / c


def u_test(a: Sequence[float], b: Sequence[float], alpha: float) -> tuple[float | None, str]:
    """(two-sided Mann-Whitney U p-value, "") or (None, why not)."""
    from scipy import stats as scipy_stats  # type: ignore[import-untyped]

    n1, n2 = len(a), len(b)
    if min(n1, n2) < MIN_SAMPLES:
        return None, f"too few samples for a U test ({n1} and {n2}; {MIN_SAMPLES} a side needed)"
    smallest = smallest_p_at_least(n1, n2, alpha)
    if smallest is not None:
        return None, (f"too few samples for a U test ({n1} and {n2}: the smallest p "
                      f"possible is {smallest:.3g} >= alpha {alpha:g})")
    p = float(scipy_stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    if math.isnan(p):  # every sample equal: no evidence of a difference
        p = 1.0
    return p, ""
