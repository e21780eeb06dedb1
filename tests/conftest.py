"""Shared fixtures: random inputs (never zeros) and the thread counts to test."""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0))


# Every count from 1 to the CPUs this process may use, plus one oversubscribed.
THREAD_COUNTS = list(range(1, _cpu_count() + 1)) + [_cpu_count() + 1]


@pytest.fixture(autouse=True)
def _scratch_cwd(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Subprocesses started by tests (`python -c`, `python -m pyparbench`) put
    # the current directory first on sys.path: run them from a scratch
    # directory so they import the installed package, not the source tree.
    monkeypatch.chdir(tmp_path_factory.getbasetemp())


@pytest.fixture(params=THREAD_COUNTS, ids=lambda t: f"t{t}")
def threads(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    # Seeded per test so a failure reproduces.
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """float32 values in [-1, 1) with no exact zeros."""
    x = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    x[x == 0] = 0.5
    return x


def poisoned(shape: tuple[int, ...]) -> np.ndarray:
    """An out= buffer full of NaN, so an element left unwritten shows."""
    return np.full(shape, np.nan, dtype=np.float32)


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    """Relative error against the float64 reference, scaled by its magnitude."""
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got)), "non-finite values in the result"
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    err = float(np.abs(got.astype(np.float64) - want).max()) / scale if want.size else 0.0
    assert err <= rtol, f"max relative error {err:.3g} > {rtol:.3g}"
