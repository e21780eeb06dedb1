"""pyparbench.timing: summaries and the interleaved best-of used by the bench
scripts' side-by-side figures."""

from __future__ import annotations

import numpy as np
import pytest

from pyparbench.timing import best_interleaved, summarize


def test_summarize_orders_quartiles_and_refuses_nothing() -> None:
    s = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.min, s.q1, s.median, s.q3, s.max, s.n) == (1.0, 2.0, 3.0, 4.0, 5.0, 5)
    with pytest.raises(ValueError, match="no timings"):
        summarize([])


def test_best_interleaved_alternates_the_timers_and_keeps_each_ones_best_run() -> None:
    calls: list[tuple[str, int, int]] = []
    rng = np.random.default_rng(3)

    def timer(name: str, floor: float):  # type: ignore[no-untyped-def]
        def run(repeats: int, warmup: int) -> np.ndarray:
            calls.append((name, repeats, warmup))
            return floor + rng.random(repeats) * 100.0
        return run

    best = best_interleaved({"a": timer("a", 1000.0), "b": timer("b", 2000.0)}, rounds=4, calls=3)
    assert [c[0] for c in calls] == ["a", "b"] * 4  # a round times every timer once
    assert all(c[1:] == (3, 1) for c in calls)
    assert 1000.0 <= best["a"] < 1100.0 and 2000.0 <= best["b"] < 2100.0


@pytest.mark.parametrize("rounds,calls", [(0, 3), (3, 0)])
def test_best_interleaved_names_a_bad_count(rounds: int, calls: int) -> None:
    with pytest.raises(ValueError, match=f"got {calls} and {rounds}"):
        best_interleaved({"a": lambda r, w: np.ones(r)}, rounds=rounds, calls=calls)
    with pytest.raises(ValueError, match="no timers"):
        best_interleaved({}, rounds=1, calls=1)
