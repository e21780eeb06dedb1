"""How much two processes differ beyond their runs, from the rows of one comparison.

Batch means (:mod:`pyparbench.compare.batch_means`) sees how a process's
runs vary, not how much two processes differ: their page placement, the
machine's load when each ran. With one process a side that part cannot be
measured per row, but every row of the comparison shares the two
processes. A row's log ratio (of mean log block medians) is taken as
normal around its true value with variance se^2 + tau^2: se^2 from its
blocks, tau^2 the spread between processes, one for all rows (a random
effect). tau is the smallest value with which the lower quartile of the
rows' |log ratio| / sqrt(se^2 + tau^2) is a standard normal's |z|
quartile (0.319): the quartile, not the median, so that up to three rows
in four may truly have changed (a change only raises a row's |z|) without
widening the others. Each row's p is then two-sided normal on
|log ratio| / sqrt(se^2 + tau^2).

Too few rows to tell (fewer than :data:`MIN_ROWS` tested), and no p is
given: the row says "untested: one process per side".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["MIN_ROWS", "QUANTILE", "between_spread", "p_slower_with_spread", "p_with_spread"]

MIN_ROWS = 8
QUANTILE = 0.25
_Z_QUARTILE = 0.31863936396437514  # scipy.stats.norm.ppf(0.625): P(|Z| < q) = 0.25


def _quartile_z(log_ratios: np.ndarray, var: np.ndarray, tau: float) -> float:
    return float(np.quantile(np.abs(log_ratios) / np.sqrt(var + tau * tau), QUANTILE))


def between_spread(log_ratios: Sequence[float], ses: Sequence[float]) -> float | None:
    """tau (log units) from the rows' log ratios and standard errors; 0 when
    the blocks explain the rows' scatter; None for fewer than
    :data:`MIN_ROWS` rows."""
    if len(log_ratios) != len(ses):
        raise ValueError(f"{len(log_ratios)} log ratios but {len(ses)} standard errors")
    if len(log_ratios) < MIN_ROWS:
        return None
    lr, var = np.asarray(log_ratios, float), np.asarray(ses, float) ** 2
    if _quartile_z(lr, var + 1e-300, 0.0) <= _Z_QUARTILE:
        return 0.0
    lo, hi = 0.0, float(np.max(np.abs(lr))) / _Z_QUARTILE + 1e-12
    for _ in range(100):  # bisection: the quartile falls as tau grows
        mid = (lo + hi) / 2
        if _quartile_z(lr, var, mid) > _Z_QUARTILE:
            lo = mid
        else:
            hi = mid
    return hi


def p_slower_with_spread(log_ratio: float, se: float, tau: float, factor: float) -> float:
    """The one-sided normal p that the ratio exceeds ``factor`` (the gate's
    claim, :mod:`pyparbench.compare.slower`), against sqrt(se^2 + tau^2)."""
    from scipy import stats as scipy_stats  # type: ignore[import-untyped]

    d = log_ratio - math.log(factor)
    scale = math.sqrt(se * se + tau * tau)
    if scale == 0:
        return 0.0 if d > 0 else 1.0
    return float(scipy_stats.norm.sf(d / scale))


def p_with_spread(log_ratio: float, se: float, tau: float) -> float:
    """The two-sided normal p of ``log_ratio`` against sqrt(se^2 + tau^2)."""
    from scipy import stats as scipy_stats

    scale = math.sqrt(se * se + tau * tau)
    if scale == 0:
        return 1.0 if log_ratio == 0 else 0.0
    return float(2 * scipy_stats.norm.sf(abs(log_ratio) / scale))
