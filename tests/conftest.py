"""Shared fixtures: the thread counts to test and a seeded generator per test.
Helpers and references are in ``_support``."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from _support import THREAD_COUNTS


@pytest.fixture(params=THREAD_COUNTS, ids=lambda t: f"t{t}")
def threads(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    # Seeded per test so a failure reproduces.
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)
