"""Shared fixtures: the thread counts to test and a seeded generator per test.
Helpers and references are in ``_support``."""

from __future__ import annotations

import shutil
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from _support import MAIN_JOB_SUITE, THREAD_COUNTS, main_job_folders


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "onnxruntime: an ONNX Runtime framework test (CI runs these again against "
        "the oldest onnxruntime declared: .ci/oldest onnxruntime)")
    config.addinivalue_line(
        "markers", "openvino: an OpenVINO framework test (CI runs these again against the "
        "oldest openvino declared: .ci/oldest openvino)")


@pytest.fixture(params=THREAD_COUNTS, ids=lambda t: f"t{t}")
def threads(request: pytest.FixtureRequest) -> int:
    return int(request.param)


# Every tier the embedding-bag kernel is built for; those this CPU does not
# run are skipped, naming the flags they need.
BAG_TIERS = {"avx512": "avx512f/bw/vl/dq", "avx2": "avx2, fma", "generic": ""}


@pytest.fixture(params=sorted(BAG_TIERS))
def bag_tier(request: pytest.FixtureRequest) -> Iterator[str]:
    """Embedding bags (fp32 and 8-bit tables) run this tier's kernel during
    the test."""
    from pyparbench._core import ops
    from pyparbench.machine.cpu_features import cpu_features

    tier = request.param
    if tier not in cpu_features()["tiers"]:
        pytest.skip(f"this CPU does not run the {tier} embedding-bag kernel (flags "
                    f"{BAG_TIERS[tier]})")
    ops.set_bag_isa(tier)
    try:
        yield tier
    finally:
        ops.set_bag_isa("auto")


# Every build of the byte lookup (ops/lookup_kernel.hpp) and the CPU flags it
# needs; those this CPU lacks are skipped, naming the flags missing.
_AVX512 = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq")
LOOKUP_TIERS = {"avx512vbmi": (*_AVX512, "avx512vbmi"), "avx512": _AVX512,
                "avx2": ("avx2", "fma"), "generic": ()}


@pytest.fixture(params=list(LOOKUP_TIERS))
def lookup_tier(request: pytest.FixtureRequest) -> Iterator[str]:
    """Byte lookups (and the int8 plans' gate lookups) run this build during
    the test."""
    from pyparbench._core import ops
    from pyparbench.machine.cpu_features import cpu_features

    tier = str(request.param)
    missing = [f for f in LOOKUP_TIERS[tier] if f not in cpu_features()["flags"]]
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}: it does not run the {tier} byte "
                    "lookup")
    ops.set_lookup_isa(tier)
    try:
        yield tier
    finally:
        ops.set_lookup_isa("auto")


@pytest.fixture(scope="session")
def seed_peak(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """Put this machine's ceilings into a results folder before a main job
    runs there, so that the job reads them as cached instead of measuring
    them again: measured once per test session (quick), as the job itself
    would, then copied. Returns the function that seeds a folder."""
    from pyparbench.harness.folder import load_or_measure
    from pyparbench.machine.peak import peak_cache_path

    measured = tmp_path_factory.mktemp("ceilings")
    load_or_measure(measured, quick=True)
    source = peak_cache_path(measured)

    def seed(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(source, folder / source.name))

    return seed


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


@pytest.fixture(scope="session")
def main_job_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The main job's folders of MAIN_JOB_SUITE, made once for the session
    (each run takes half a minute): 'a' and 'b' on this machine, 'one' on
    CPU 0 (a second machine, where taskset is). Read them; copy to change."""
    return main_job_folders(tmp_path_factory.mktemp("main-job"), MAIN_JOB_SUITE)
