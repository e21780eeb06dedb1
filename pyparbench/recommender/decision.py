"""The rule that settles between close settings by measuring them, stated once.

Both the recommender's own verification (settings measured whole in
pyparbench, :mod:`~pyparbench.recommender.side_by_side`) and its check inside a
framework (:mod:`~pyparbench.recommender.framework_check`) measure the
predicted choice beside the next best predicted settings, and switch only
when one of those is clearly faster. Which settings are measured, and what
"clearly faster" means, is decided here. Pure Python: nothing here loads the
native core.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from pyparbench.recommender.types import Prediction

__all__ = ["CONSISTENT", "MARGIN", "SWITCH", "TOP", "switch_to", "within_margin"]

# How many of the best predicted settings are measured (the chosen one among them).
TOP = 3
# Only settings predicted within this fraction of the best are worth measuring.
MARGIN = 0.25
# The measured best replaces the predicted choice only when it is this much
# faster (the median of its per-round ratios) and faster in at least this
# share of the rounds: below either, two settings are the same within the
# noise (a shared machine's slow spells hit one setting's runs of a round
# and not the other's).
SWITCH = 0.03
CONSISTENT = 0.75

K = TypeVar("K")


def within_margin(best: Prediction, preds: Sequence[Prediction], objective: str
                  ) -> list[Prediction]:
    """The predictions within MARGIN of ``best`` (lower latency or higher
    throughput, as ``objective`` says), in ``preds``' order."""
    if objective == "latency":
        return [p for p in preds if p.latency_ns <= best.latency_ns * (1 + MARGIN)]
    return [p for p in preds if p.throughput >= best.throughput * (1 - MARGIN)]


def switch_to(chosen: K, measured: Iterable[tuple[K, float, float]]) -> K:
    """``chosen``, or the measured contender that beats it most clearly.

    ``measured``: per other contender, its gain over ``chosen`` (the median
    of the paired ratios; above 1: faster) and the share of the rounds in
    which it was faster. A contender is taken only when faster in at least
    CONSISTENT of the rounds and by more than SWITCH; of several such, the
    one with the highest gain.
    """
    pick, best_gain = chosen, 1 + SWITCH
    for other, gain, share_faster in measured:
        if gain > best_gain and share_faster >= CONSISTENT:
            pick, best_gain = other, gain
    return pick
