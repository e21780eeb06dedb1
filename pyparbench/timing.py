"""Summaries of repeated timings: a median with its spread, never a lone number."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Summary:
    """Timing statistics of one measurement, in nanoseconds."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def fmt(self, unit: str = "us") -> str:
        """'12.3 us [12.1, 12.6]': median and interquartile range."""
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]
        return (f"{self.median / scale:.4g} {unit} "
                f"[{self.q1 / scale:.4g}, {self.q3 / scale:.4g}]")


def summarize(ns: Sequence[float] | np.ndarray) -> Summary:
    """Median, quartiles and range of per-run durations (ns)."""
    a = np.asarray(ns, dtype=np.float64)
    if a.size == 0:
        raise ValueError("no timings to summarize")
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return Summary(float(med), float(q1), float(q3), float(a.min()), float(a.max()), int(a.size))


def time_python(fn: Callable[[], object], *, calls: int, rounds: int = 15,
                warmup: int = 1) -> Summary:
    """Per-call time of ``fn`` called from a Python loop: each round times
    ``calls`` back-to-back calls and contributes their mean."""
    if calls < 1 or rounds < 1:
        raise ValueError(f"calls and rounds must be >= 1, got {calls} and {rounds}")
    for _ in range(warmup * calls):
        fn()
    per_call = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter_ns() - t0) / calls)
    return summarize(per_call)


def time_native(timeit: Callable[..., np.ndarray], *, calls: int, rounds: int = 15,
                warmup: int = 1) -> Summary:
    """Per-call time of a prepared kernel's C++ loop, in rounds of ``calls``
    runs like :func:`time_python`, so the two are compared like for like.
    ``timeit(repeats=..., warmup=...)`` is the kernel's bound ``timeit``."""
    if calls < 1 or rounds < 1:
        raise ValueError(f"calls and rounds must be >= 1, got {calls} and {rounds}")
    timeit(repeats=calls, warmup=warmup * calls)
    return summarize([float(np.mean(timeit(repeats=calls, warmup=0))) for _ in range(rounds)])


def best_interleaved(timers: Mapping[str, Callable[[int, int], np.ndarray]], *, rounds: int,
                     calls: int) -> dict[str, float]:
    """The best per-run ns of each timer over ``rounds`` interleaved rounds of
    ``calls`` runs: interleaving makes drift on a shared machine hit every
    timer alike, and the best run is the kernel's, the others hold another
    process's time slices. ``timer(repeats, warmup)`` returns per-run ns."""
    if calls < 1 or rounds < 1:
        raise ValueError(f"calls and rounds must be >= 1, got {calls} and {rounds}")
    if not timers:
        raise ValueError("no timers to compare")
    ns: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            ns[name].extend(float(v) for v in timer(calls, 1))
    return {name: summarize(v).min for name, v in ns.items()}
