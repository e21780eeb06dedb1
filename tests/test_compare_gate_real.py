"""The regression gate on results folders the main job really writes.

Three runs of a small quick suite (the Criteo-Kaggle-like DLRM at batch 1,
with the recommender, whose setting and confirmation rounds measure some
settings in several processes: the folder's spread between processes),
each in fresh processes: two of this machine, and one under ``taskset -c
0``, where every setting that uses both cores on two CPUs gets one.
"""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import pytest
from rich.console import Console

from pyparbench.compare import compare, judge, print_text
from pyparbench.report.terminal import print_summary
from pyparbench.resultfiles import load
from pyparbench.stats import input_spread
from test_compare_gate import check_rows_and_legend
from test_compare_real import main_job_folders, pyparbench

pytestmark = pytest.mark.slow

pytest.importorskip("scipy.stats")

SUITE = ("--quick", "--models", "dlrm-kaggle", "--batches", "1", "--no-operators",
         "--no-frameworks", "--repeats", "3")


# How many of the 2-CPU run's process sds (of ln process median) a row's
# slowdown beyond 5 % must span, with at least 3 degrees of freedom, for one
# or two processes a row to show it after Holm over 8 rows (t about 6 and
# more, one-sided p below 0.005).
SPAN = 8.0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = main_job_folders(tmp_path_factory.mktemp("gate"), SUITE)
    if len(os.sched_getaffinity(0)) < 2:
        out.pop("one", None)  # CPU 0 is all this process has: no second machine
    return out


def gate(*args: str) -> tuple[int, dict[str, object]]:
    done = pyparbench("compare", *args, "--json", timeout=300)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_two_runs_of_one_configuration_pass(runs: dict[str, Path]) -> None:
    a, b = runs["a"], runs["b"]
    for pick in ((a, b), (a / "summary.json", b / "results.jsonl")):
        code, res = gate(*map(str, pick), "--fail-slower", "5%")
        g = res["gate"]
        assert isinstance(g, dict)
        assert code == 0 and not g["failed"] and g["rows"] >= 5, g


def test_one_cpu_against_two_fails_on_the_thread_scaling_rows(runs: dict[str, Path]) -> None:
    if "one" not in runs:
        pytest.skip("taskset is missing or this process may use one CPU only")
    base = load(runs["a"])
    other = load(runs["one"])
    # The thread-scaling rows: a setting that used both cores, with fewer
    # threads on one CPU (the suite's grid follows the cores, so only the
    # presets match across the two runs).
    scaling = [(r, other.rows[k]) for k, r in base.rows.items()
               if k in other.rows and r.threads and r.threads >= 2
               and r.median_ns and other.rows[k].median_ns
               and other.rows[k].threads != r.threads]
    assert scaling
    worst = max((b.median_ns or 0.0) / (a.median_ns or 1.0) for a, b in scaling)
    if worst < 1.5:
        # Other work on the two cores: the second core bought nothing.
        pytest.skip(f"the thread-scaling rows are at most {worst:.2f}x slower on one CPU "
                    "(a loaded machine): nothing for the gate to find")
    spread = input_spread(base)
    assert spread is not None  # the recommender's rounds measured settings twice
    if input_spread(other) is not None and (math.log(worst / 1.05) < SPAN * spread.sigma
                                            or spread.df < 3):
        # Processes of one setting this far apart on the 2-CPU run: such a
        # row is within what one or two processes a row can make, and the
        # gate rightly passes. (Without a spread on the one-CPU run, the
        # rows are tested on per-run times, which show a 1.5x row easily.)
        pytest.skip(f"the 2-CPU run's processes of one setting are {spread.sigma:.0%} apart "
                    f"({spread.df} degrees of freedom; a loaded machine): the gate cannot "
                    f"tell {worst:.2f}x from noise")
    code, res = gate(str(runs["a"]), str(runs["one"]), "--fail-slower", "5%")
    g = res["gate"]
    assert isinstance(g, dict) and code == 1 and g["failed"], g
    assert set(g["failing"]) <= {a.label for a, _ in scaling}, g


def test_real_tables_fit_80_columns(runs: dict[str, Path]) -> None:
    a, b = load(runs["a"]), load(runs["b"])
    c = compare([a, b], slower_than=1.05)
    buf = io.StringIO()
    print_text(c, file=buf, gate=judge(c), width=80)
    lines = buf.getvalue().splitlines()
    assert max(map(len, lines)) <= 80, buf.getvalue()
    check_rows_and_legend(c.pairs[0].rows, lines)
    summary = json.loads((runs["a"] / "summary.json").read_text())
    buf = io.StringIO()
    print_summary(summary, Console(file=buf, width=80))
    lines = buf.getvalue().splitlines()
    assert max(map(len, lines)) <= 80
    for m in summary["models"]:
        row = next(x for x in lines if x.split()[:2] == [m["model"], str(m["batch"])])
        names, _, setting = m["best"]["label"].partition(": ")
        assert row.split()[3] in (names.replace("recommended", "ours")
                                  .replace("tftuner", "tuner").replace("tensorflow", "tf"),
                                  ) or row.split()[3].startswith("s"), row
        assert any(setting in x for x in lines), (setting, buf.getvalue())
