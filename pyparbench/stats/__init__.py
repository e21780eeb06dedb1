"""Statistics of measured results: what is computed from the records that
:mod:`pyparbench.resultfiles` reads, for the report, the main job's
confirmation, the recommender's verification, lockstep runs and compare.

``spread`` (how much a setting's processes differ, pooled over an input;
the ratio of two settings over processes and its interval; the one paired
ratio, :func:`estimate_paired_ratio`, with its interval from a spread or
from the order statistics of the pairs; Student's t and the sign test) and
``processes`` (a run's settings with their processes merged, the regret of
a chosen setting against the best read in pairs of rounds, with its
interval).

The package sits above :mod:`pyparbench.resultfiles` (it reads its typed
records) and below everything that reports or decides from a ratio.
"""

from __future__ import annotations

from pyparbench.stats.multiple import holm
from pyparbench.stats.processes import (
    REGRET_LEVEL,
    MergedSetting,
    input_spread,
    merge_settings,
    paired_ratio_of,
    regret_estimate,
    regret_of,
    run_spread,
    shared_rounds,
)
from pyparbench.stats.spread import (
    PairedEstimate,
    ProcessSpread,
    RatioEstimate,
    estimate_paired_ratio,
    estimate_ratio,
    median_interval,
    pooled_spread,
    row_spread,
    se_of_interval,
    sign_test_p,
    t_quantile,
    t_two_sided_p,
)

__all__ = [
    "REGRET_LEVEL",
    "MergedSetting",
    "PairedEstimate",
    "ProcessSpread",
    "RatioEstimate",
    "estimate_paired_ratio",
    "estimate_ratio",
    "holm",
    "input_spread",
    "median_interval",
    "merge_settings",
    "paired_ratio_of",
    "pooled_spread",
    "row_spread",
    "se_of_interval",
    "regret_estimate",
    "regret_of",
    "run_spread",
    "shared_rounds",
    "sign_test_p",
    "t_quantile",
    "t_two_sided_p",
]
