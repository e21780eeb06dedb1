"""compare on pytest-benchmark files, one process a side: batch means, widened by the rows.

The files are made here by real pytest runs of the pyparbench plugin
(``ppb_bench`` timing real Gemm kernels in blocks), as a user's suite
writes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

from pyparbench.compare import compare
from pyparbench.compare.batch_means import MIN_BLOCKS, batch_means_test, blocks_for
from pyparbench.compare.between_spread import MIN_ROWS, between_spread, p_with_spread
from pyparbench.compare.match import OWN_SPREAD_NOTE
from pyparbench.resultfiles import load
from _support import IMPORTED_FROM

# Slow (pytest runs in processes of their own): left out of the quick run.
pytestmark = pytest.mark.slow

pytest.importorskip("pytest_benchmark")

ROOT = Path(__file__).resolve().parents[1]

# Ten rows the same on both sides, four that do 27x the work where SCALE=3
# (a loaded machine moves whole processes by 1.2-1.9x: the change is far
# beyond that, so that the test holds there).
SUITE = '''
import os
import numpy as np
import pytest
import pyparbench as ppb

SIZES = [96, 112, 128, 144, 160, 176, 192, 208, 224, 240]
CHANGED = [64, 80, 88, 104]

def _gemm(ppb_bench, n):
    g = ppb.ops.Gemm(n, n, n, threads=1)
    a = np.ones(g.a_shape, np.float32)
    b = np.ones(g.b_shape, np.float32)
    out = np.empty(g.output_shape, np.float32)
    ppb_bench(g, a, b, None, out, rounds=16, blocks=4, pause=0.01)
    assert (out == n).all()

@pytest.mark.parametrize("n", SIZES)
def test_same(ppb_bench, n):
    _gemm(ppb_bench, n)

@pytest.mark.parametrize("n", CHANGED)
def test_changed(ppb_bench, n):
    _gemm(ppb_bench, n * int(os.environ.get("SCALE", "1")))
'''


def _installed() -> bool:
    return any(ep.value == "pyparbench.pytest_plugin" for ep in entry_points(group="pytest11"))


# An installed pyparbench loads the plugin through its entry point.
PLUGIN: tuple[str, ...] = () if _installed() else ("-p", "pyparbench.pytest_plugin")


def _run(where: Path, name: str, scale: int) -> Path:
    out = where / f"{name}.json"
    env = {**os.environ, "SCALE": str(scale), "PYTHONPATH": IMPORTED_FROM}
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "pytest", *PLUGIN, "-p", "no:cacheprovider", "-q",
         "test_suite.py", f"--benchmark-json={out}", "--benchmark-save-data"],
        cwd=where, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bench")
    (d / "test_suite.py").write_text(SUITE)
    return {name: _run(d, name, 3 if name.startswith("changed") else 1)
            for name in ("a", "b", "changed", "a2", "b2", "changed2")}


def test_the_plugin_records_its_blocks_and_pytest_benchmark_still_reads_the_files(
        files: dict[str, Path]) -> None:
    saved = json.loads(files["a"].read_text())
    assert len(saved["benchmarks"]) == 14
    for b in saved["benchmarks"]:
        assert b["extra_info"]["ppb_blocks"] == [4, 4, 4, 4]
        assert len(b["stats"]["data"]) == 16 and b["stats"]["rounds"] == 16
    # pytest-benchmark's own command (its module has no __main__).
    cli = "import sys; from pytest_benchmark.cli import main; sys.exit(main())"
    proc = subprocess.run([sys.executable, "-P", "-c", cli, "compare", str(files["a"]),
                           str(files["b"])],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "test_same[96]" in proc.stdout and "test_changed[104]" in proc.stdout


def test_same_code_rows_carry_the_spread_between_processes(files: dict[str, Path]) -> None:
    a, b = load(files["a"]), load(files["b"])
    assert a.rows["test_suite.py::test_same[96]"].blocks == (4, 4, 4, 4)
    c = compare([a, b])
    pair = c.pairs[0]
    assert len(pair.rows) == 14 and all(r.test == "blocks" for r in pair.rows)
    tau = pair.between_spread
    assert tau is not None and tau >= 0
    tests = []
    for r in pair.rows:
        # The p of this row's own blocks, then with the processes' spread added.
        ra, rb = a.rows[r.key], b.rows[r.key]
        p, _, bt = batch_means_test(ra.samples_ns, rb.samples_ns, ra.blocks, rb.blocks)
        assert bt is not None and bt.baseline.blocks >= MIN_BLOCKS
        assert r.p_within == pytest.approx(p)
        assert r.p_value == pytest.approx(p_with_spread(bt.log_ratio, bt.se, tau))
        assert r.significant == (r.p_adjusted is not None and r.p_adjusted < c.alpha)
        assert "one process per side: batch means" in r.note
        tests.append(bt)
    from pyparbench.compare import to_json

    assert to_json(c)["comparisons"][0]["between_spread"] == tau
    assert tau == pytest.approx(between_spread([t.log_ratio for t in tests],
                                               [t.se for t in tests]))
    # With tau, the lower quartile of the rows' |z| is a standard normal's.
    z = sorted(abs(t.log_ratio) / np.hypot(t.se, tau) for t in tests)
    if tau > 0:
        assert float(np.quantile(z, 0.25)) == pytest.approx(0.3186, abs=1e-3)


def test_many_times_the_work_is_found(files: dict[str, Path]) -> None:
    c = compare([load(files["a"]), load(files["changed"])])
    changed = [r for r in c.pairs[0].rows if "test_changed" in r.key]
    assert len(changed) == 4
    assert all(r.ratio is not None and r.ratio > 5 for r in changed), changed
    # A loaded machine may slow one row of a side by as much: three of four.
    assert sum(r.significant for r in changed) >= 3, changed


def test_too_few_rows_leave_the_rows_untested(files: dict[str, Path], tmp_path: Path) -> None:
    for name in ("a", "b"):
        d = json.loads(files[name].read_text())
        d["benchmarks"] = d["benchmarks"][:MIN_ROWS - 1]
        (tmp_path / f"{name}.json").write_text(json.dumps(d))
    c = compare([load(tmp_path / "a.json"), load(tmp_path / "b.json")])
    assert len(c.pairs[0].rows) == MIN_ROWS - 1 and c.pairs[0].between_spread is None
    for r in c.pairs[0].rows:
        assert r.p_value is None and not r.significant and r.p_within is not None
        assert r.note.startswith("untested: one process per side")


def test_a_folder_of_files_is_one_side_each_file_a_process(files: dict[str, Path],
                                                           tmp_path: Path) -> None:
    import shutil

    from pyparbench.resultfiles import ResultFileError

    sides = {"A": ("a", "a2"), "B": ("b", "b2"), "C": ("changed", "changed2")}
    for side, names in sides.items():
        (tmp_path / side).mkdir()
        for n in names:  # as --benchmark-autosave names its files
            shutil.copy(files[n], tmp_path / side / f"000{names.index(n) + 1}_{n}.json")
    a, b = load(tmp_path / "A"), load(tmp_path / "B")
    row = a.rows["test_suite.py::test_same[96]"]
    one, two = (load(files[n]).rows[row.key].median_ns for n in ("a", "a2"))
    assert row.processes == (one, two) and len(row.samples_ns) == 32
    assert a.notes == [f"{tmp_path / 'A'}: 2 pytest-benchmark files, each a process"]
    c = compare([a, b])
    assert len(c.pairs[0].rows) == 14
    # Two processes a side: each row on its own spread, with 2 degrees of freedom.
    assert all(r.test == "processes" and r.p_value is not None and r.own_spread is not None
               and r.note == OWN_SPREAD_NOTE for r in c.pairs[0].rows)
    changed = [r for r in compare([a, load(tmp_path / "C")]).pairs[0].rows
               if "test_changed" in r.key]
    assert len(changed) == 4 and all(r.ratio is not None and r.ratio > 5 for r in changed)
    assert sum(r.significant for r in changed) >= 3, changed
    # One file in the folder is that file; others than pytest-benchmark's, another
    # machine's file, or no file at all are refused, naming the file.
    (tmp_path / "one").mkdir()
    shutil.copy(files["a"], tmp_path / "one" / "a.json")
    assert load(tmp_path / "one").rows.keys() == load(files["a"]).rows.keys()
    other = json.loads(files["b"].read_text())
    other["machine_info"]["pyparbench"]["cpu_model"] = "another CPU"
    (tmp_path / "A" / "0003_other.json").write_text(json.dumps(other))
    with pytest.raises(ResultFileError, match="0003_other.json: measured on another machine"):
        load(tmp_path / "A")
    (tmp_path / "A" / "0003_other.json").write_text('{"config": {}}\n')
    with pytest.raises(ResultFileError, match="0003_other.json"):
        load(tmp_path / "A")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultFileError, match="nor pytest-benchmark JSON files"):
        load(tmp_path / "empty")


def test_blocks_grow_until_their_medians_are_uncorrelated() -> None:
    rng = np.random.default_rng(0)
    noise = 1 + 0.01 * rng.standard_normal(64)
    # Independent runs: pairs of runs already pass.
    bm = blocks_for(list(1000 * noise))
    assert bm is not None and bm.size == 2 and bm.blocks == 32
    # Slow spells of 16 runs: blocks of 2 and 4 follow them (lag-1 about 0.9
    # and 0.75), blocks of 8 alternate two by two (lag-1 about 0).
    spells = np.where((np.arange(128) // 16) % 2 == 0, 1.0, 1.3)
    bm = blocks_for(list(1000 * (1 + 0.01 * rng.standard_normal(128)) * spells))
    assert bm is not None and bm.size == 8 and bm.blocks == 16
    assert abs(bm.lag1) <= 2 / np.sqrt(16)
    # Recorded blocks are the first blocks.
    bm = blocks_for(list(1000 * noise[:20]), recorded=(4, 4, 4, 4, 4))
    assert bm is not None and bm.size == 4 and bm.blocks == 5
    # Fewer than 4 blocks of 2: none.
    assert blocks_for(list(1000 * noise[:7])) is None
    p, why, _ = batch_means_test([1.0] * 6, [2.0] * 6)
    assert p is None and "6 runs; 8 at least" in why


@pytest.mark.parametrize("blocks, message", [
    ([4, 4, 4], "adds up to 12 runs, but stats.data holds 16"),
    ([8, "8"], "must be a list of run counts"),
    ([16, 0], "must be a list of run counts"),
])
def test_bad_recorded_blocks_are_one_line(files: dict[str, Path], tmp_path: Path,
                                          blocks: list[object], message: str) -> None:
    from pyparbench.resultfiles import ResultFileError

    d = json.loads(files["a"].read_text())
    d["benchmarks"][3]["extra_info"]["ppb_blocks"] = blocks
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    with pytest.raises(ResultFileError, match=message) as info:
        load(bad)
    assert "benchmarks[3]" in str(info.value) and "\n" not in str(info.value)
