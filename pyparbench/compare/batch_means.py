"""Batch means: a test of two sets of per-run times, each from one process.

The runs of one process are not independent samples: its page placement,
its caches' and the machine's state are shared by neighbouring runs, so
runs come in slow and fast spells and a test that takes each run as a
sample (the U test) reads the spells as a difference. Batch means splits
each side's runs, in the order they ran, into blocks of consecutive runs,
takes each block's median as one sample (the pytest plugin records its
blocks: each a timed loop of its own after a pause, so that the blocks
meet the machine at different moments), and grows the blocks until the
lag-1 autocorrelation of the block medians is within Bartlett's bound
(2 / sqrt(blocks)): blocks long enough that their correlation is
negligible. Welch's t test of the log block medians then gives the p.

What this still cannot see: with one process a side, how much two
processes differ (the part of a difference that comes with the process,
not with its runs) is not measured here: :mod:`pyparbench.compare.between_spread`
estimates it from the rows of a comparison.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["MIN_BLOCKS", "BatchMeans", "BlockTest", "batch_means_test", "blocks_for"]

MIN_BLOCKS = 4  # a side's blocks: fewer cannot estimate a spread nor check a correlation


@dataclass(frozen=True)
class BatchMeans:
    """One side's blocks: their size in runs, their medians, and the lag-1
    autocorrelation of those medians."""

    size: int  # runs per block (on average, for recorded blocks of unequal sizes)
    medians: tuple[float, ...]
    lag1: float

    @property
    def blocks(self) -> int:
        return len(self.medians)


@dataclass(frozen=True)
class BlockTest:
    """Both sides' blocks, the difference of their mean log block medians
    (other less baseline) and its standard error."""

    baseline: BatchMeans
    other: BatchMeans
    log_ratio: float
    se: float


def _lag1(x: np.ndarray) -> float:
    d = x - x.mean()
    den = float(d @ d)
    return 0.0 if den == 0 else float(d[:-1] @ d[1:]) / den


def blocks_for(samples: Sequence[float], recorded: Sequence[int] = (),
               min_blocks: int = MIN_BLOCKS) -> BatchMeans | None:
    """The shortest blocks whose medians' lag-1 autocorrelation is within
    2 / sqrt(blocks), with at least ``min_blocks`` blocks; None when there
    are none (too few runs, or runs correlated across the whole process).

    Runs are taken in the order they ran. The first blocks are those
    ``recorded`` (run counts, as the pytest plugin's ``ppb_bench`` writes
    them, each block its own timed loop after a pause) or else pairs of
    runs; each step merges neighbouring blocks two by two (a trailing block
    left alone is dropped).
    """
    x = np.asarray(samples, dtype=np.float64)
    if recorded and sum(recorded) == len(x) and all(n > 0 for n in recorded):
        bounds = np.cumsum([0, *recorded])
        parts = [x[bounds[i]:bounds[i + 1]] for i in range(len(recorded))]
    else:
        parts = [x[i:i + 2] for i in range(0, len(x) - 1, 2)]
    while len(parts) >= min_blocks:
        med = np.array([np.median(p) for p in parts])
        r = _lag1(np.log(med))
        if abs(r) <= 2 / math.sqrt(len(parts)):
            return BatchMeans(len(x) // len(parts), tuple(float(v) for v in med), r)
        parts = [np.concatenate(parts[i:i + 2]) for i in range(0, len(parts) - 1, 2)]
    return None


def batch_means_test(a: Sequence[float], b: Sequence[float], blocks_a: Sequence[int] = (),
                     blocks_b: Sequence[int] = ()
                     ) -> tuple[float | None, str, BlockTest | None]:
    """(Welch's two-sided p on the log block medians, "", the test's figures)
    or (None, why not, None); ``blocks_a``, ``blocks_b``: each side's
    recorded blocks (run counts), if any (:func:`blocks_for`)."""
    from scipy import stats as scipy_stats  # type: ignore[import-untyped]

    if min(len(a), len(b)) == 0:
        return None, f"untested: no per-run times ({len(a)} and {len(b)})", None
    sides = []
    for name, s, rec in (("baseline", a, blocks_a), ("other", b, blocks_b)):
        bm = blocks_for(s, rec)
        if bm is None:
            need = 2 * MIN_BLOCKS
            why = (f"{len(s)} runs; {need} at least" if len(s) < need else
                   f"its {len(s)} runs stay correlated however they are blocked")
            return None, f"untested: one process per side, too few independent blocks in " \
                         f"the {name} ({why})", None
        sides.append(bm)
    la, lb = np.log(sides[0].medians), np.log(sides[1].medians)
    va, vb = la.var(ddof=1) / len(la), lb.var(ddof=1) / len(lb)
    diff = float(lb.mean() - la.mean())
    se = math.sqrt(va + vb)
    test = BlockTest(sides[0], sides[1], diff, se)
    if se == 0:
        return (1.0 if diff == 0 else 0.0), "", test
    df = (va + vb) ** 2 / ((va ** 2 / (len(la) - 1) if va else 0.0)
                           + (vb ** 2 / (len(lb) - 1) if vb else 0.0))
    p = float(2 * scipy_stats.t.sf(abs(diff) / se, df))
    return p, "", test
