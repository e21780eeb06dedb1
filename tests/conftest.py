"""Shared fixtures: the thread counts to test and a seeded generator per test.
Helpers and references are in ``_support``."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from _support import THREAD_COUNTS


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "onnxruntime: an ONNX Runtime framework test (CI runs these again against "
        "the oldest onnxruntime declared: .ci/onnxruntime_oldest)")


@pytest.fixture(params=THREAD_COUNTS, ids=lambda t: f"t{t}")
def threads(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    # Seeded per test so a failure reproduces.
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)


# The fuzz tests' profiles and tally (tests/_fuzz.py): registered here, so
# `--hypothesis-profile long` can name them.
import _fuzz  # noqa: E402


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After a run with fuzz tests: inputs tried and distinct errors reached."""
    tr = terminalreporter
    if _fuzz.FIGURES:
        tr.section("hardening figures")
        for name, text in _fuzz.FIGURES.items():
            tr.write_line(f"{name}: {text}")
    if not _fuzz.TALLY.tried:
        return
    path = _fuzz.report_path()
    rep = _fuzz.TALLY.write(path)
    tr.section("fuzzing")
    tr.write_line(f"profile {rep['profile']}: {rep['inputs']} inputs tried, "
                  f"{rep['accepted']} accepted, {rep['distinct_errors']} distinct errors "
                  f"reached (all listed in {path})")
    for target, t in rep["targets"].items():
        tr.write_line(f"  {target}: {t['inputs']} inputs, {len(t['errors'])} distinct errors")
