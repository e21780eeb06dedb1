"""Many rows tested at once: Holm's step-down adjustment of their p-values."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["holm"]


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given: p_(k) x (m - k + 1), made
    non-decreasing along the sorted order and capped at 1. A p is rejected
    at family-wise level alpha when its adjusted p is below alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p_values[i]))
        out[i] = running
    return out
