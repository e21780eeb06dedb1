"""``pyparbench compare --fail-slower PCT``: the regression gate, on the stored
results of two made-up machines (tests/data/compare, described in
tests/test_compare.py) and on pytest-benchmark files.

A vs B, rows and what the gate makes of them at 5 %:

  mlp-512 b1 tensorflow  A 10 .. 12 (5), B 20 .. 24 (5): 2x slower, every B run
                         above every A run x 1.05: one-sided U p = 1 / C(10, 5)
  mlp-512 b1 sync 1x1    0.985: not slower
  mlp-512 b1 sync 1x2    0.59: faster
  mlp-512 b8 sync 1x2    3 runs a side: untested, 0.83 by its ratio
  op gemm t1, t2         medians only: untested, 0.82 and 0.83
"""

from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _support import cli_main
from pyparbench.compare import compare, holm, judge, print_text
from pyparbench.resultfiles import load

pytest.importorskip("scipy.stats")

DATA = Path(__file__).resolve().parent / "data" / "compare"
A, B = str(DATA / "machine_a"), str(DATA / "machine_b")
TF = "mlp-512 b1 tensorflow async 2x2 library/onednn/openmp none smt"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return cli_main(capsys, "compare", *args)


def test_holm_by_hand() -> None:
    # Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> 0.06
    # (the adjusted p never falls along the sorted order).
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == [1.0, 1.0]
    assert holm([]) == []


def test_a_row_twice_as_slow_fails_the_gate(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, A, B, "--fail-slower", "5%")
    assert code == 1, err
    lines = out.splitlines()
    assert " ".join(out.split()).endswith(f"1 of 6 rows slower beyond 5%: {TF}"), out
    tf = next(line for line in lines if line.strip().startswith("tensorflow"))
    assert tf.rstrip().endswith("slow"), tf
    res = json.loads(run(capsys, A, B, "--fail-slower", "5%", "--json")[1])
    gate = res["gate"]
    assert gate["failed"] and gate["slower"] == 1 and gate["rows"] == 6
    assert gate["failing"] == [TF] and gate["untested"] == []
    by = {r["label"]: r for r in res["comparisons"][0]["rows"]}
    tested = [r for r in by.values() if r["gate"]["tested"]]
    assert len(tested) == 3  # tensorflow, sync 1x1, sync 1x2; b8 and the ops are untested
    # Every B run above every A run x 1.05: one-sided p 1 / C(10, 5); Holm over 3 rows.
    assert by[TF]["slower_p"] == pytest.approx(1 / math.comb(10, 5))
    assert by[TF]["gate"]["p_holm"] == pytest.approx(3 / math.comb(10, 5))
    assert by[TF]["gate"]["slower"] is True
    assert all(not r["gate"]["slower"] for k, r in by.items() if k != TF)


def test_the_page_shows_the_gate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page = tmp_path / "gate.html"
    code, _, err = run(capsys, A, B, "--fail-slower", "5%", "--html", str(page))
    assert code == 1, err
    html = page.read_text()
    assert "<h2>Regression gate: failed</h2>" in html
    assert f"1 of 6 rows slower beyond 5%: {TF}" in html
    rows = [r for r in html.split("<tr") if "<td" in r]
    slow = [r for r in rows if "slower (tested)" in r]
    assert len(slow) == 1 and TF in slow[0] and "class='slow'" in slow[0], slow
    # Untested rows slower by their ratio stay under 5 % here: every other row passes.
    assert sum("<td>pass</td>" in r for r in rows) == 5
    run(capsys, A, B, "--html", str(page))  # without the option: no gate on the page
    assert "Regression gate" not in page.read_text()


def test_the_threshold_is_a_ratio_not_a_difference(capsys: pytest.CaptureFixture[str]) -> None:
    # tensorflow is 2.0x: every B run is above every A run x 1.6 (shown slower
    # beyond 60 %), not above every A run x 1.99 (not shown beyond 99 %), and
    # the median ratio is not beyond 100 %.
    assert run(capsys, A, B, "--fail-slower", "60%")[0] == 1
    assert run(capsys, A, B, "--fail-slower", "99%")[0] == 0
    code, out, _ = run(capsys, A, B, "--fail-slower", "100%")
    assert code == 0 and "0 of 6 rows slower beyond 100%" in " ".join(out.split())


def test_untested_rows_count_by_their_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    # B as the baseline: A's sync 1x2 is 1.69x (tested, 10 runs a side);
    # mlp-512 b8 (3 runs a side) and the operator rows (medians) by their ratios.
    res = json.loads(run(capsys, B, A, "--fail-slower", "10%", "--json")[1])
    gate = res["gate"]
    assert gate["failed"]
    untested = sorted(gate["untested"])
    assert untested == ["mlp-512 b8 sync 1x2 library/onednn/openmp none",
                        "op gemm 1024x700x512 t1", "op gemm 1024x700x512 t2"]
    assert "mlp-512 b1 sync 1x2 library/onednn/openmp none" in gate["failing"]
    assert "mlp-512 b1 sync 1x1 library/onednn/openmp none" not in gate["failing"]
    code, out, _ = run(capsys, B, A, "--fail-slower", "10%")
    said = " ".join(out.split())
    assert code == 1 and "(untested: by its ratio alone)" in said
    b8 = out.splitlines()[next(i for i, x in enumerate(out.splitlines())
                               if x.strip() == "mlp-512 b8") + 1]
    assert b8.rstrip().endswith("slow?"), b8
    # Beyond every ratio (the largest is 1.69): it passes.
    assert run(capsys, B, A, "--fail-slower", "70%")[0] == 0


def test_holm_controls_the_error_over_the_rows() -> None:
    # The same one-sided p on every row: below alpha alone, not after Holm
    # over three rows (0.02 x 3 = 0.06).
    c = compare([load(A), load(B)], slower_than=1.05)
    from dataclasses import replace

    for pair in c.pairs:
        pair.rows = [replace(r, ratio=2.0, slower_p=0.02) if r.slower_p is not None else r
                     for r in pair.rows]
    gate = judge(c)
    assert not any(v.slower for v in gate.verdicts[0] if v.tested)
    for pair in c.pairs:
        pair.rows = [replace(r, slower_p=0.01) if r.slower_p is not None else r
                     for r in pair.rows]
    assert sum(v.slower for v in judge(c).verdicts[0]) == 3  # 0.01 x 3 < 0.05


def test_summaries_results_and_pytest_benchmark_files(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    # A summary on its own holds medians: its rows are untested, by their ratios.
    shutil.copy(DATA / "machine_a" / "summary.json", tmp_path / "summary.json")
    res = json.loads(run(capsys, str(tmp_path / "summary.json"),
                         str(DATA / "machine_b" / "results.jsonl"),
                         "--fail-slower", "5%", "--json")[1])
    assert res["gate"]["failed"] and res["gate"]["failing"] == res["gate"]["untested"]
    assert any(x.startswith("mlp-512 b1 tensorflow") for x in res["gate"]["failing"])
    # The same summary beside its results.jsonl: its rows are tested.
    res = json.loads(run(capsys, str(DATA / "machine_a" / "summary.json"),
                         str(DATA / "machine_b" / "results.jsonl"),
                         "--fail-slower", "5%", "--json")[1])
    assert res["gate"]["failing"] == [TF] and res["gate"]["untested"] == []
    # pytest-benchmark: test_gemm[t2] 1.19x; test_relu (no samples) 2x by its ratio.
    bench = [str(DATA / "bench_a.json"), str(DATA / "bench_b.json")]
    code, out, _ = run(capsys, *bench, "--fail-slower", "5%", "--json")
    gate = json.loads(out)["gate"]
    assert code == 1 and "test_user.py::test_relu" in gate["untested"]
    assert run(capsys, *bench, "--fail-slower", "150%")[0] == 0


@pytest.mark.parametrize("bad", ["5", "5 %%", "abc%", "0%", "-3%", "nan%", "inf%", "%"])
def test_a_bad_percentage_is_one_line_exit_2(capsys: pytest.CaptureFixture[str],
                                             bad: str) -> None:
    code, out, err = run(capsys, A, B, f"--fail-slower={bad}")
    assert code == 2 and out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("pyparbench compare: error: argument --fail-slower:")
    assert repr(bad) in last, last


def test_without_the_option_nothing_changes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, A, B, "--json")
    res = json.loads(out)
    assert code == 0 and "gate" not in res
    assert all("gate" not in r and r["slower_p"] is None for r in res["comparisons"][0]["rows"])


def test_the_exit_status_in_a_fresh_process() -> None:
    cmd = [sys.executable, "-P", "-m", "pyparbench", "compare", A, B, "--fail-slower"]
    assert subprocess.run([*cmd, "5%"], capture_output=True, timeout=120).returncode == 1
    assert subprocess.run([*cmd, "150%"], capture_output=True, timeout=120).returncode == 0


def test_rows_fit_80_columns_with_the_settings_in_the_legend() -> None:
    c = compare([load(A), load(B)], slower_than=1.05)
    buf = io.StringIO()
    print_text(c, file=buf, gate=judge(c), width=80)
    lines = buf.getvalue().splitlines()
    assert max(map(len, lines)) <= 80
    check_rows_and_legend(c.pairs[0].rows, lines)


def check_rows_and_legend(rows: Any, lines: list[str]) -> None:
    """Each row of the table is one line, its key there with its ratio; each
    row's full setting is in the legend under the table."""
    legend = lines[next(i for i, x in enumerate(lines) if x.startswith("settings of the rows")):]
    said = " ".join(" ".join(legend).split())
    for r in rows:
        if r.ratio is None:
            continue
        assert any(f"{r.ratio:.3f}" in x for x in lines), r.label
        setting = r.label.split(" ", 2)[2]  # "model bN [name ]setting"
        words = setting.split()
        if words[0] in ("tensorflow", "intel", "tftuner", "recommended"):
            # A preset's entry lists each setting it resolved to, with its rows.
            assert f"{words[0]}: " in said and " ".join(words[1:]) in said, (r.label, said)
        elif not r.label.startswith("op "):
            assert f": {setting}" in said, (r.label, said)
