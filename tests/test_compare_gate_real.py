"""The regression gate on results folders the main job really writes.

Six runs of a small quick suite (the Criteo-Kaggle-like DLRM at batch 1,
with the recommender, whose setting and confirmation rounds measure some
settings in several processes: the folder's spread between processes),
each in fresh processes: four of this machine, and two under ``taskset -c
0`` (three of them conftest's ``main_job_runs``, shared with
test_compare_real), where every setting that uses both cores on two CPUs gets one. Sides
of two runs (a folder of runs) test each row on its own processes.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from _support import MAIN_JOB_SUITE as SUITE
from _support import cli_process
from rich.console import Console
from test_compare_gate import check_rows_and_legend

from pyparbench.compare import compare, judge, print_text
from pyparbench.report.terminal import print_summary
from pyparbench.resultfiles import ResultFileError, load, merge_runs
from pyparbench.resultfiles.merged import MAX_RUNS
from pyparbench.stats import input_spread

pytestmark = pytest.mark.slow

pytest.importorskip("scipy.stats")

# SUITE is fp32 alone: the gate's power below is reckoned over its 8 rows
# (the other precisions' rows of tens of microseconds would add rows the
# span was not sized for).


# How many of the 2-CPU run's process sds (of ln process median) a row's
# slowdown beyond 5 % must span, with at least 3 degrees of freedom, for one
# or two processes a row to show it after Holm over 8 rows (t about 6 and
# more, one-sided p below 0.005).
SPAN = 8.0


@pytest.fixture(scope="module")
def runs(main_job_runs: dict[str, Path]) -> dict[str, Path]:
    out = dict(main_job_runs)
    if len(os.sched_getaffinity(0)) < 2:
        out.pop("one", None)  # CPU 0 is all this process has: no second machine
    return out


def _loaded() -> str:
    """Why the machine was too loaded for its runs to decide a verdict (its
    5-minute load average, the runs' time, above its CPUs), or ""."""
    cpus = len(os.sched_getaffinity(0))
    load = os.getloadavg()[1]
    return f"5-minute load average {load:.1f} on {cpus} CPUs" if load > cpus else ""


def gate(*args: str) -> tuple[int, dict[str, object]]:
    done = cli_process("compare", *args, "--json", timeout=300)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_two_runs_of_one_configuration_pass(runs: dict[str, Path], more_runs: list[Path],
                                            tmp_path: Path) -> None:
    # Two runs a side: every row tested on its own processes. (One run a
    # side cannot meet the gate's target here: the eigen-pool setting's
    # processes read 41 to 53 us, each steady within 0.3 %, so one process
    # a side fails about 1 pair in 12; see the README.)
    # Each side holds a run from each time runs were made (a and b, then c
    # and d, minutes apart): a change of the shared machine's speed between
    # those times falls on both sides, not between them.
    for side, folders in (("A", [runs["a"], more_runs[0]]), ("B", [runs["b"], more_runs[1]])):
        for f in folders:
            shutil.copytree(f, tmp_path / side / f.name)
    code, res = gate(str(tmp_path / "A"), str(tmp_path / "B"), "--fail-slower", "5%")
    g = res["gate"]
    assert isinstance(g, dict)
    if g["failed"] and _loaded():
        pytest.skip(f"the gate failed two runs of one configuration while other work loaded "
                    f"the machine ({_loaded()}): such runs cannot decide")
    assert code == 0 and not g["failed"] and g["rows"] >= 5, g
    # One run a side, as a folder or as its files: the same rows, the same verdict.
    a, b = runs["a"], runs["b"]
    verdicts = []
    for pick in ((a, b), (a / "summary.json", b / "results.jsonl")):
        code, res = gate(*map(str, pick), "--fail-slower", "5%")
        g = res["gate"]
        assert isinstance(g, dict) and g["rows"] >= 5 and code == int(g["failed"]), g
        verdicts.append((code, g["failing"]))
    assert verdicts[0] == verdicts[1]


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
        # A precision other than fp32 is named after the model.
        key = [m["model"], *([m["precision"]] if m["precision"] != "fp32" else []),
               str(m["batch"])]
        row = next(x for x in lines if x.split()[:len(key)] == key)
        names, _, setting = m["best"]["label"].partition(": ")
        assert row.split()[len(key) + 1] in (names.replace("recommended", "ours")
                                  .replace("tftuner", "tuner").replace("tensorflow", "tf"),
                                  ) or row.split()[len(key) + 1].startswith("s"), row
        assert any(setting in x for x in lines), (setting, buf.getvalue())


@pytest.fixture(scope="module")
def more_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two more runs of the suite on this machine: the second side of a
    comparison of two runs a side."""
    root = tmp_path_factory.mktemp("more")
    out = []
    for name in ("c", "d"):
        done = cli_process("run", *SUITE, "-o", str(root / name))
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        out.append(root / name)
    return out


def _setting(record: dict[str, object]) -> str:
    """A record's setting, the name it ran under aside."""
    config = record["config"]
    assert isinstance(config, dict)
    settings = {k: v for k, v in config["settings"].items() if k != "name"}
    return json.dumps([config["model"], config["batch"], settings], sort_keys=True)


def _slowed(run: Path, to: Path, setting: str, factor: float) -> None:
    """A copy of results folder ``run`` at ``to`` with every process of
    ``setting`` ``factor`` times slower, run by run (its noise its own)."""
    shutil.copytree(run, to)
    lines = []
    for line in (run / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["status"] == "ok" and _setting(r) == setting:
            r["ns"] = [x * factor for x in r["ns"]]
            r["summary"] = {k: v * factor if k != "n" else v for k, v in r["summary"].items()}
        lines.append(json.dumps(r))
    (to / "results.jsonl").write_text("\n".join(lines) + "\n")


def test_a_folder_of_runs_is_one_side_each_row_on_its_own_spread(
        runs: dict[str, Path], more_runs: list[Path], tmp_path: Path) -> None:
    sides = {"A": [runs["a"], runs["b"]], "B": more_runs}
    for side, folders in sides.items():
        for f in folders:
            shutil.copytree(f, tmp_path / side / f.name)
    a = load(tmp_path / "A")
    one, two = load(runs["a"]), load(runs["b"])
    for key, row in a.rows.items():
        if row.status == "ok":
            assert row.processes == one.rows[key].processes + two.rows[key].processes
    assert a.notes[0] == f"{tmp_path / 'A'}: 2 runs, each row with every run's processes"
    code, res = gate(str(tmp_path / "A"), str(tmp_path / "B"), "--fail-slower", "5%")
    rows = res["comparisons"][0]["rows"]  # type: ignore[index]
    assert len(rows) >= 5
    for r in rows:
        # Two processes a side at least: each row on its own spread.
        assert r["test"] == "processes" and r["own_spread"] is not None, r
    # A 1.5x change on the steadiest setting of the second side is caught:
    # what its own processes show leaves no doubt there.
    steady = min(rows, key=lambda r: r["own_spread"])
    if math.log(1.5 / 1.05) < SPAN * steady["own_spread"]:
        pytest.skip(f"even the steadiest row's processes are {steady['own_spread']:.0%} apart "
                    "(a loaded machine): the gate cannot tell 1.5x from noise")
    ident = json.loads(steady["key"])  # a preset's name, or the settings of a row

    def is_row(r: dict[str, Any]) -> bool:
        s = r["config"]["settings"]
        if "preset" in ident:
            return bool(s["name"] == ident["preset"])
        return not s["name"] and {k: v for k, v in s.items() if k != "name"} == ident["settings"]

    record = next(r for f in more_runs
                  for r in map(json.loads, (f / "results.jsonl").read_text().splitlines())
                  if r["status"] == "ok" and is_row(r))
    for f in more_runs:
        _slowed(f, tmp_path / "B15" / f.name, _setting(record), 1.5)
    code, res = gate(str(tmp_path / "A"), str(tmp_path / "B15"), "--fail-slower", "5%")
    planted = next(r for r in res["comparisons"][0]["rows"]  # type: ignore[index]
                   if r["key"] == steady["key"])
    # What the gate is asked about is the slowdown the two sides show, 1.5x
    # times however far the runs themselves moved (a loaded machine can make
    # the second side's runs faster or slower throughout): the data decide
    # only where that clears the row's own spread.
    if math.log(planted["ratio"] / 1.05) < SPAN * planted["own_spread"]:
        pytest.skip(f"the planted row measures {planted['ratio']:.2f}x with its processes "
                    f"{planted['own_spread']:.0%} apart (a loaded machine): too close to the "
                    "gate's 5 % for its processes to decide")
    g = res["gate"]
    assert isinstance(g, dict)
    if (code != 1 or g["failing"] != [steady["label"]]) and _loaded():
        pytest.skip(f"the gate's verdict on the planted row ({g['failing']}) came while other "
                    f"work loaded the machine ({_loaded()}): such runs cannot decide")
    assert code == 1, g
    assert steady["label"] in g["failing"], g
    # Too many runs to be a side, and a run of another machine (CPU 0 alone)
    # in a side, are refused, naming them.
    with pytest.raises(ResultFileError, match=f"{MAX_RUNS + 1} runs; at most {MAX_RUNS}"):
        merge_runs(tmp_path, [one] * (MAX_RUNS + 1))
    if "one" in runs:
        shutil.copytree(runs["one"], tmp_path / "A" / "one")
        done = cli_process("compare", str(tmp_path / "A"), str(tmp_path / "B"))
        assert done.returncode == 2 and "measured on another machine" in done.stderr, \
            done.stderr
        assert "one" in done.stderr


def test_two_one_cpu_runs_against_two_fail_on_the_thread_scaling_rows(
        runs: dict[str, Path], tmp_path: Path) -> None:
    if "one" not in runs:
        pytest.skip("taskset is missing or this process may use one CPU only")
    # A second run on CPU 0: two runs a side, each row on its own processes
    # (one run a side rests on the few settings a run measured twice).
    done = cli_process("run", *SUITE, "-o", str(tmp_path / "one2"), cpus="0")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for side, folders in (("two", [runs["a"], runs["b"]]),
                          ("one", [runs["one"], tmp_path / "one2"])):
        for f in folders:
            shutil.copytree(f, tmp_path / "sides" / side / f.name)
    base, other = load(tmp_path / "sides" / "two"), load(tmp_path / "sides" / "one")
    assert base.runs == other.runs == 2
    scaling = {k for k, r in base.rows.items()
               if k in other.rows and r.threads and r.threads >= 2
               and r.median_ns and other.rows[k].median_ns
               and other.rows[k].threads != r.threads}
    assert scaling
    c = compare([base, other], slower_than=1.05)
    rows = {r.key: r for r in c.pairs[0].rows}
    worst = max(rows[k].ratio or 0.0 for k in scaling)
    if worst < 1.5:
        pytest.skip(f"the thread-scaling rows are at most {worst:.2f}x slower on one CPU "
                    "(a loaded machine): nothing for the gate to find")
    # The data decide only on a row that is both 1.5x slower and steady on its
    # own processes (the slowest row and the steadiest one may differ).
    decisive = [k for k in scaling if _decides(rows[k].ratio, rows[k].own_spread)]
    if not decisive:
        shown = ", ".join(f"{rows[k].ratio or 0.0:.2f}x with processes "
                          f"{rows[k].own_spread or math.inf:.0%} apart" for k in sorted(scaling))
        pytest.skip(f"no thread-scaling row is both 1.5x slower and steady ({shown}; a loaded "
                    "machine): the gate cannot tell them from noise")
    code, res = gate(str(tmp_path / "sides" / "two"), str(tmp_path / "sides" / "one"),
                     "--fail-slower", "5%")
    g = res["gate"]
    assert isinstance(g, dict) and code == 1 and g["failed"], g
    labels = {rows[k].label for k in scaling}
    assert set(g["failing"]) <= labels, g
    # Every scaling row 1.5x slower or more, on its own steady processes, fails.
    for k in decisive:
        assert rows[k].label in g["failing"], (rows[k], g)


def _decides(ratio: float | None, own_spread: float | None) -> bool:
    """Whether a row ``ratio`` times slower, its processes ``own_spread``
    apart, is beyond doubt slower than the gate's 5 %."""
    return (ratio is not None and ratio >= 1.5 and own_spread is not None
            and math.log(ratio / 1.05) >= SPAN * own_spread)
