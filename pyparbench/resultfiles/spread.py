"""Moved to :mod:`pyparbench.stats.spread` (statistics are computed there,
files are read here); its names are importable from here too."""

from __future__ import annotations

from pyparbench.stats.spread import (
    PairedEstimate,
    ProcessSpread,
    RatioEstimate,
    estimate_paired_ratio,
    estimate_ratio,
    median_interval,
    pooled_spread,
    sign_test_p,
    t_quantile,
    t_two_sided_p,
)

__all__ = ["PairedEstimate", "ProcessSpread", "RatioEstimate", "estimate_paired_ratio",
           "estimate_ratio", "median_interval", "pooled_spread", "sign_test_p", "t_quantile",
           "t_two_sided_p"]
