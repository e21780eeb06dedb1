"""Moved to :mod:`pyparbench.stats.processes` (statistics are computed
there, files are read here); its names are importable from here too."""

from __future__ import annotations

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

__all__ = ["REGRET_LEVEL", "MergedSetting", "input_spread", "merge_settings", "paired_ratio_of",
           "regret_estimate", "regret_of", "run_spread", "shared_rounds"]
