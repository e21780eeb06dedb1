"""`pyparbench compare` on what `pyparbench run` really writes.

The folders are made by the main job itself, in fresh processes, on a
small quick suite (conftest's ``main_job_runs``: the Criteo-Kaggle-like
DLRM at batch 1 with the recommender, no operators or frameworks): every
native configuration times runs for at least 0.3 s, so a row holds
thousands of per-run samples, as the folders users compare do (an exact
U-test guard overflowed at about 515 a side). Two runs of this
machine, and one under ``taskset -c 0``: a second machine with another
fingerprint (one CPU).
"""

from __future__ import annotations

import html
import json
import math
import os
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _support import cli_process

from pyparbench.compare import smallest_p_at_least, u_test

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

pytest.importorskip("scipy.stats")

@pytest.fixture(scope="module")
def folders(main_job_runs: dict[str, Path]) -> dict[str, Path]:
    """Results folders of the main job: 'a' and 'b' on this machine, 'one' on CPU 0."""
    return main_job_runs


def compare(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_process("compare", *args, timeout=300)


def compare_json(*args: str) -> dict[str, Any]:
    done = compare(*args, "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_real_folders_hold_thousands_of_samples_a_row(folders: dict[str, Path]) -> None:
    res = compare_json(str(folders["a"]), str(folders["b"]))
    rows = res["comparisons"][0]["rows"]
    assert len(rows) >= 5
    sizes = [min(r["baseline"]["n"], r["other"]["n"]) for r in rows]
    # The size at which the old guard overflowed, on both sides of a row.
    assert max(sizes) > 600, sizes
    assert all(r["p_value"] is not None and 0 <= r["p_value"] <= 1 for r in rows)
    assert all(r["ratio"] > 0 for r in rows)


@pytest.mark.parametrize("how", ["folders", "summaries", "results", "mixed"])
def test_every_form_of_a_real_run_compares(folders: dict[str, Path], how: str) -> None:
    a, b = folders["a"], folders["b"]
    pick = {"folders": (a, b), "summaries": (a / "summary.json", b / "summary.json"),
            "results": (a / "results.jsonl", b / "results.jsonl"),
            "mixed": (a, b / "summary.json")}[how]
    res = compare_json(*map(str, pick))
    assert len(res["comparisons"][0]["rows"]) >= 5


@pytest.mark.parametrize("normalize", ["per-core", "per-peak"])
def test_real_folders_normalised(folders: dict[str, Path], normalize: str) -> None:
    res = compare_json(str(folders["a"]), str(folders["b"]), "--normalize", normalize)
    rows = res["comparisons"][0]["rows"]
    assert rows and all(r["ratio"] is not None for r in rows)


def test_real_folders_as_text_and_html(folders: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page = tmp_path / "cmp.html"
    done = compare(str(folders["a"]), str(folders["b"]), "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "B against A" in done.stdout
    assert page.stat().st_size > 1000


def test_a_one_cpu_run_is_another_machine(folders: dict[str, Path]) -> None:
    if "one" not in folders:
        pytest.skip("taskset is not installed")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("this process may use one CPU only: the runs would not differ")
    done = compare(str(folders["a"]), str(folders["one"]))
    assert done.returncode == 0, done.stderr
    # The fingerprint differences come above the table.
    head = done.stdout.split("against")[0]
    assert "machines differ in:" in head and "CPUs" in head, done.stdout
    res = compare_json(str(folders["a"]), str(folders["one"]))
    assert res["machine_differences"]
    assert res["comparisons"][0]["rows"]


def test_a_flagged_fma_ceiling_is_said_by_report_and_compare(folders: dict[str, Path],
                                                             tmp_path: Path) -> None:
    """Ceilings measured on CPUs that share FMA units (pyparbench.machine.peak
    flags them) reach the report and compare, which rest on them."""
    flagged = tmp_path / "flagged"
    shutil.copytree(folders["b"], flagged)
    warning = "CPUs sharing FMA units: 2 threads reached 1.04x of one thread's rate"
    for peak_file in flagged.glob("peak-*.json"):
        data = json.loads(peak_file.read_text())
        peak_file.write_text(json.dumps({**data, "fma_warning": warning}))
    done = cli_process("report", str(flagged))
    assert done.returncode == 0, done.stderr
    summary = json.loads((flagged / "summary.json").read_text())
    assert summary["peak"]["fma_warning"] == warning
    assert [h["peak"]["fma_shared"] for h in summary["hosts"]] == [True]
    assert f"warning: {warning}" in " ".join(done.stdout.split())
    assert f"<b>Warning:</b> {html.escape(warning)}" in (flagged / "report.html").read_text()
    res = compare_json(str(folders["a"]), str(flagged), "--normalize", "per-peak")
    assert any(f"its FMA ceiling is flagged: {warning}" in n for n in res["notes"]), res["notes"]
    assert not any("FMA ceiling" in n for n in compare_json(
        str(folders["a"]), str(folders["b"]))["notes"])


# -- the U test's guard, for any sample sizes ------------------------------------------

SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20, 50, 100, 515, 516, 1000, 9883, 100_000)


@pytest.mark.parametrize("alpha", [0.5, 0.05, 0.01, 1e-3, 1e-12])
def test_the_smallest_reachable_p_is_decided_exactly(alpha: float) -> None:
    for n1 in SIZES:
        for n2 in SIZES:
            got = smallest_p_at_least(n1, n2, alpha)
            if min(n1, n2) <= 1000:  # the exact figure is quick to compute
                exact = Fraction(2, math.comb(n1 + n2, n1))
                assert (got is not None) == (exact >= Fraction(alpha)), (n1, n2)
                if got is not None:
                    assert got == pytest.approx(float(exact), rel=1e-12)
            else:  # log C(n1 + n2, n1) is thousands: far above any log(2 / alpha)
                log_c = math.lgamma(n1 + n2 + 1) - math.lgamma(n1 + 1) - math.lgamma(n2 + 1)
                assert log_c > 1000 and got is None, (n1, n2)


@pytest.mark.parametrize("ties", [False, True])
def test_the_u_test_holds_for_any_sample_sizes(ties: bool) -> None:
    rng = np.random.default_rng(28)
    for n1, n2 in ((1, 100_000), (3, 3), (3, 4), (5, 5), (515, 515), (9883, 2000),
                   (100_000, 100_000)):
        a = rng.lognormal(0.0, 0.1, n1)
        b = rng.lognormal(0.02, 0.1, n2)
        if ties:  # timer ticks: many equal values
            a, b = np.round(a, 2), np.round(b, 2)
        p, why = u_test(a.tolist(), b.tolist(), 0.05)
        if p is None:
            assert "too few samples" in why and min(n1, n2) <= 4
        else:
            assert 0.0 <= p <= 1.0 and why == ""
    # Far apart, at real sizes: significant.
    p, _ = u_test([1.0 + i * 1e-6 for i in range(5000)], [2.0 + i * 1e-6 for i in range(5000)],
                  0.05)
    assert p is not None and p < 1e-100


def test_bad_sample_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="sample sizes must be >= 1, got 0 and 3"):
        smallest_p_at_least(0, 3, 0.05)
