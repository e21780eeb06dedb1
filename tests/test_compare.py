"""`pyparbench compare` on stored results of two made-up machines (tests/data/compare).

machine_a's records predate the ``schema`` field, machine_b's carry schema 1:
both are read.

machine_a: 2 cores, peak 50 / 100 GFLOP/s at 1 / 2 threads; machine_b: 4 cores,
peak 60 / 120 / 240. Their per-run times (ms) are chosen so that the expected
ratios and p-values can be worked out by hand:

  mlp-512 b1 tensorflow preset  A 10 10.5 11 11.5 12      B 20 21 22 23 24
  mlp-512 b1 sync 1x1           A 30 .. 35 (6)            B 29.5 .. 34.5 (6)
  mlp-512 b1 sync 1x2           A 20 .. 29 (10)           B 10 .. 19 (10)
  mlp-512 b8 sync 1x2           A 5 6 7                   B 4 5 6
  resnet50 (A only), dlrm-kaggle (B only), googlenet (failed on A)

Each folder's summary.json has the report's shape: the measured peak per
thread count, the settings' medians, and one operator's scaling (a GEMM of
0.734 GFLOP; A at 1 and 2 threads: 14.68 and 7.5 ms, B at 1, 2 and 4:
12.0, 6.2 and 3.3 ms).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _support import cli_main

from pyparbench.resultfiles import load

scipy_stats = pytest.importorskip("scipy.stats")

DATA = Path(__file__).resolve().parent / "data" / "compare"
A, B = str(DATA / "machine_a"), str(DATA / "machine_b")
TF = "mlp-512 b1 tensorflow"
ONE = "mlp-512 b1 sync 1x1"
TWO = "mlp-512 b1 sync 1x2"
B8 = "mlp-512 b8 sync 1x2"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return cli_main(capsys, "compare", *args)


def compare_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return dict(json.loads(out))


def rows(result: dict[str, Any], pair: int = 0) -> dict[str, dict[str, Any]]:
    """Rows of one comparison by the start of their label."""
    out = {}
    for r in result["comparisons"][pair]["rows"]:
        for prefix in (TF, ONE, TWO, B8):
            if r["label"].startswith(prefix):
                out[prefix] = r
    return out


def exact_p_fully_separated(n1: int, n2: int) -> float:
    """Two-sided exact U test p when every sample of one side is below the other's:
    only the two extreme orderings out of C(n1 + n2, n1) are as extreme."""
    return 2 / math.comb(n1 + n2, n1)


def normal_p_fully_separated(n1: int, n2: int) -> float:
    """The same by the normal approximation with continuity correction (n > 8)."""
    mu, sigma = n1 * n2 / 2, math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    z = (n1 * n2 - mu - 0.5) / sigma
    return math.erfc(z / math.sqrt(2))


def test_medians_ratios_p_values_and_marks(capsys: pytest.CaptureFixture[str]) -> None:
    res = compare_json(capsys, A, B)
    r = rows(res)
    # A preset matches by name although it resolves to other thread counts on B.
    tf = r[TF]
    assert tf["baseline"]["median"] == 11e6 and tf["other"]["median"] == 22e6
    assert tf["ratio"] == pytest.approx(2.0)
    assert tf["p_value"] == pytest.approx(exact_p_fully_separated(5, 5))  # 2/252
    assert tf["significant"] is True
    one = r[ONE]
    assert one["ratio"] == pytest.approx(32.0 / 32.5)
    want = scipy_stats.mannwhitneyu([30, 31, 32, 33, 34, 35],
                                    [29.5, 30.5, 31.5, 32.5, 33.5, 34.5]).pvalue
    assert one["p_value"] == pytest.approx(want) and one["p_value"] > 0.5
    assert one["significant"] is False
    two = r[TWO]
    assert two["ratio"] == pytest.approx(14.5 / 24.5)
    assert two["p_value"] == pytest.approx(normal_p_fully_separated(10, 10), rel=1e-9)
    assert two["significant"] is True
    few = r[B8]
    assert few["ratio"] == pytest.approx(5 / 6) and few["p_value"] is None
    assert not few["significant"]
    assert "too few samples" in few["note"] and "smallest p possible is 0.1" in few["note"]
    pair = res["comparisons"][0]
    assert [x.split(" ")[0] for x in pair["only_in_baseline"]] == ["resnet50"]
    assert pair["only_in_other"] == ["dlrm-kaggle b1 sync 1x2 library/onednn/openmp none",
                                     "op gemm 1024x700x512 t4"]
    assert len(pair["failed"]) == 1 and pair["failed"][0].startswith("googlenet")
    assert "MemoryError" in pair["failed"][0]


def test_alpha_moves_the_marks(capsys: pytest.CaptureFixture[str]) -> None:
    r = rows(compare_json(capsys, A, B, "--alpha", "0.001"))
    # 2/252 = 0.0079 is no longer below alpha; 0.00018 still is.
    assert not r[TF]["significant"] and r[TWO]["significant"]
    # With alpha 0.2, 3 against 3 samples can reach p = 2/20 = 0.1: the test runs.
    r = rows(compare_json(capsys, A, B, "--alpha", "0.2"))
    assert exact_p_fully_separated(3, 3) == pytest.approx(0.1)
    want = scipy_stats.mannwhitneyu([5, 6, 7], [4, 5, 6]).pvalue  # ties: not separated
    assert r[B8]["p_value"] == pytest.approx(want) and not r[B8]["significant"]


def test_fingerprint_differences_skip_noise(capsys: pytest.CaptureFixture[str]) -> None:
    res = compare_json(capsys, A, B)
    diffs = {d["field"]: d["values"] for d in res["machine_differences"]}
    assert diffs == {
        "cpu_model": ["AMD EPYC 7B13", "Intel Xeon Platinum 8480+"],
        "onednn.isa": ["avx512_core_bf16", "avx512_core_amx"],
        "onednn.version": ["2.6.3", "3.4.1"],
        "cpus.physical_cores": ["2", "4"],
        "cpus.logical": ["2", "4"],
        "cpus.allowed": ["2", "4"],
        "governor": ["(no cpufreq)", "performance"],
    }
    # Host names, OpenMP's max threads, oneDNN's hash and the libgomp install
    # path differ in the files too, and are not reported.
    assert [i["cores"] for i in res["inputs"]] == [2, 4]


def test_per_core_normalisation(capsys: pytest.CaptureFixture[str]) -> None:
    res = compare_json(capsys, A, B, "--normalize", "per-core")
    assert res["unit"] == "core-ns"
    r = rows(res)
    # tensorflow preset: 2x2 threads on 2 cores against 4x4 threads on 4 cores.
    assert r[TF]["baseline"]["cores"] == 2 and r[TF]["other"]["cores"] == 4
    assert r[TF]["baseline"]["median"] == 11e6 * 2 and r[TF]["other"]["median"] == 22e6 * 4
    assert r[TF]["ratio"] == pytest.approx(4.0)
    assert r[TF]["p_value"] == pytest.approx(exact_p_fully_separated(5, 5))
    assert r[TWO]["ratio"] == pytest.approx(14.5 / 24.5)  # 2 threads on both
    # Scaled samples: 1x1 keeps its ranks, so its p-value too.
    assert r[ONE]["p_value"] == pytest.approx(rows(compare_json(capsys, A, B))[ONE]["p_value"])


def test_per_peak_normalisation(capsys: pytest.CaptureFixture[str]) -> None:
    r = rows(compare_json(capsys, A, B, "--normalize", "per-peak"))
    assert r[TF]["ratio"] == pytest.approx((22 * 240) / (11 * 100))  # at 4 and 2 cores
    assert r[ONE]["ratio"] == pytest.approx((32.0 * 60) / (32.5 * 50))  # at 1 thread
    assert r[TWO]["ratio"] == pytest.approx((14.5 * 120) / (24.5 * 100))


def test_per_peak_without_a_peak_says_so(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    shutil.copy(DATA / "machine_b" / "results.jsonl", tmp_path / "results.jsonl")
    code, _, err = run(capsys, A, str(tmp_path), "--normalize", "per-peak")
    assert code == 2
    assert f"{tmp_path}: no measured peak" in err and "per-core does not" in err
    assert err.count("\n") == 1


def test_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, A, B)
    assert code == 0
    assert "machines differ in:" in out and "ISA oneDNN dispatches to" in out
    assert "node-a" not in out and "max_threads" not in out
    lines = out.splitlines()
    tf = next(line for line in lines if "tensorflow" in line)
    assert "11 ms" in tf and "22 ms" in tf and "2.000" in tf and tf.rstrip(" │").endswith("*")
    # Rows under their model and batch, a setting by its key (the legend
    # below gives it in full).
    head = next(i for i, line in enumerate(lines) if line.strip() == "mlp-512 b8")
    b8 = lines[head + 1]
    key = b8.split()[0]
    assert "n=3,3" in b8 and not b8.rstrip(" │").endswith("*")
    assert f"  {key}: sync 1x2 library/onednn/openmp none" in lines
    assert "only in A (1):" in out and "only in B (2):" in out
    assert "not compared, a side has no timing (1):" in out


def test_pytest_benchmark_files(capsys: pytest.CaptureFixture[str]) -> None:
    res = compare_json(capsys, str(DATA / "bench_a.json"), str(DATA / "bench_b.json"))
    by = {r["label"]: r for r in res["comparisons"][0]["rows"]}
    t1 = by["test_user.py::test_gemm[t1]"]
    assert t1["baseline"]["median"] == pytest.approx(10.2e6)
    assert t1["ratio"] == pytest.approx(0.0082 / 0.0102)
    # One process a side and 5 runs: too few for 4 blocks of batch means.
    assert t1["p_value"] is None and not t1["significant"]
    assert "untested: one process per side" in t1["note"] and "5 runs; 8 at least" in t1["note"]
    assert by["test_user.py::test_gemm[t2]"]["ratio"] == pytest.approx(0.0062 / 0.0052)
    # In the terminal, the p column says so too (the reason in the notes below).
    code, out, _ = run(capsys, str(DATA / "bench_a.json"), str(DATA / "bench_b.json"))
    line = next(x for x in out.splitlines() if "test_gemm[t1]" in x)
    assert code == 0 and "untested" in line and "n=" not in line, line
    assert "untested: one process per side" in out
    relu = by["test_user.py::test_relu"]  # saved without --benchmark-save-data
    assert relu["p_value"] is None and "0 and 0" in relu["note"]
    assert relu["ratio"] == pytest.approx(2.0)
    diffs = {d["field"] for d in res["machine_differences"]}
    assert diffs == {"cpu_model", "cpus.logical"}  # Python 3.11.7 vs 3.11.9: same 3.11
    assert any("without the pyparbench plugin" in n for n in res["notes"])
    # per-core uses the ppb_threads parameter; test_relu has no thread count.
    r = compare_json(capsys, str(DATA / "bench_a.json"), str(DATA / "bench_b.json"),
                     "--normalize", "per-core")["comparisons"][0]["rows"]
    by = {x["label"]: x for x in r}
    assert by["test_user.py::test_gemm[t2]"]["baseline"]["median"] == pytest.approx(2 * 5.2e6)
    assert by["test_user.py::test_relu"]["ratio"] is None
    assert "thread count unknown" in by["test_user.py::test_relu"]["note"]


def test_three_inputs_each_against_the_first(capsys: pytest.CaptureFixture[str]) -> None:
    res = compare_json(capsys, A, B, A)
    assert [(c["baseline"], c["other"]) for c in res["comparisons"]] == [(A, B), (A, A)]
    same = rows(res, 1)
    assert all(r["ratio"] == 1.0 and not r["significant"] for r in same.values())
    assert same[TF]["p_value"] == pytest.approx(1.0)


def test_summary_json_reads_the_results_beside_it(capsys: pytest.CaptureFixture[str]) -> None:
    res = compare_json(capsys, str(DATA / "machine_a" / "summary.json"),
                       str(DATA / "machine_b" / "results.jsonl"))
    assert res["inputs"][0]["source"].endswith("machine_a/results.jsonl")
    assert res["inputs"][0]["peak_gflops"] == {"1": 50.0, "2": 100.0}
    assert res["inputs"][1]["peak_gflops"] is None
    assert rows(res)[TF]["ratio"] == pytest.approx(2.0)


def test_operator_scaling_rows_from_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    res = compare_json(capsys, A, B)
    by = {r["label"]: r for r in res["comparisons"][0]["rows"]}
    t1, t2 = by["op gemm 1024x700x512 t1"], by["op gemm 1024x700x512 t2"]
    assert t1["ratio"] == pytest.approx(12.0 / 14.68) and t2["ratio"] == pytest.approx(6.2 / 7.5)
    assert t1["p_value"] is None and "0 and 0" in t1["note"]  # medians only
    # per-core: the points' thread counts.
    r = {x["label"]: x for x in compare_json(capsys, A, B, "--normalize", "per-core")[
        "comparisons"][0]["rows"]}
    assert r["op gemm 1024x700x512 t2"]["baseline"]["median"] == pytest.approx(2 * 7.5e6)


def test_a_summary_on_its_own(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    shutil.copy(DATA / "machine_a" / "summary.json", tmp_path / "summary.json")
    res = compare_json(capsys, str(tmp_path / "summary.json"), B)
    assert res["inputs"][0]["source"] == str(tmp_path / "summary.json")
    assert res["inputs"][0]["fingerprint"]["cpu_model"] == "AMD EPYC 7B13"
    r = rows(res)
    assert r[TF]["ratio"] == pytest.approx(2.0) and r[TWO]["ratio"] == pytest.approx(14.5 / 24.5)
    assert r[TF]["p_value"] is None and "0 and 5" in r[TF]["note"]  # no per-run samples
    pair = res["comparisons"][0]
    # A summary lists failures without their settings: googlenet is B's only.
    assert any(x.startswith("googlenet b1") for x in pair["only_in_other"])
    res = compare_json(capsys, str(tmp_path / "summary.json"), B, "--normalize", "per-peak")
    assert rows(res)[TF]["ratio"] == pytest.approx((22 * 240) / (11 * 100))


def test_html_page(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    line = (DATA / "machine_b" / "results.jsonl").read_text().splitlines()[2]
    rec = json.loads(line)
    rec["config"]["model"] = "<script>alert(1)</script>"
    (hostile / "results.jsonl").write_text(json.dumps(rec) + "\n")
    page = tmp_path / "cmp.html"
    code, out, err = run(capsys, A, B, str(hostile), "--html", str(page))
    assert code == 0, err
    html = page.read_text()
    # B's ratio chart (the hostile file matches no row of A: no chart), the
    # 1xT thread sweep of mlp-512 b1 (1 and 2 threads on A and B) and the
    # operator's scaling.
    assert html.count("data:image/png;base64,") == 3
    assert "Thread sweeps" in html and "<script>" not in html
    assert "<h3>Only in C (1)</h3><ul><li>&lt;script&gt;alert(1)&lt;/script&gt; b1" in html
    assert "ISA oneDNN dispatches to" in html
    bench_page = tmp_path / "bench.html"
    code, _, err = run(capsys, str(DATA / "bench_a.json"), str(DATA / "bench_b.json"),
                       "--html", str(bench_page))
    assert code == 0, err
    # GFLOP/s curves: the benchmarks carry extra_info["gflop"].
    assert bench_page.read_text().count("data:image/png;base64,") == 2


# -- bad files ---------------------------------------------------------------------

GOOD = json.loads((DATA / "machine_a" / "results.jsonl").read_text().splitlines()[0])


def _record(**changes: Any) -> str:
    rec = json.loads(json.dumps(GOOD))
    for path, value in changes.items():
        d = rec
        *parents, last = path.split("__")
        for p in parents:
            d = d[p]
        d[last] = value
    return json.dumps(rec)


BENCH = (DATA / "bench_a.json").read_text()

BAD: list[tuple[str, bytes, str]] = [
    ("other-shape.json", b'{"hello": 1}', "a JSON object that is not a result file"),
    ("array.json", b"[1, 2, 3]", "a JSON array, not a result file"),
    ("string.json", b'"results"', "a JSON string, not a result file"),
    ("truncated.json", BENCH[: len(BENCH) // 2].encode(), "not complete JSON"),
    ("truncated.jsonl", (_record() + "\n" + _record()[:90]).encode(), ":2: not complete JSON"),
    ("binary.bin", bytes(range(256)) * 4, "binary data, not JSON text"),
    ("latin1.json", b'{"config": "\xe9t\xe9"}', "not UTF-8 text"),
    ("empty.jsonl", b"", "empty file"),
    ("nested.json", b"[" * 200_000, "JSON nested too deeply"),
    ("batch-string.jsonl", _record(config__batch="8").encode(),
     'config.batch must be an integer from 1 to 1048576, got "8"'),
    ("median-string.jsonl", _record(summary__median="fast").encode(),
     'summary.median must be a finite number, got "fast"'),
    ("ns-object.jsonl", _record(ns={"a": 1}).encode(), "ns must be a list of durations"),
    ("negative.jsonl", _record(ns=[1.0, -5.0]).encode(), "ns[1] = -5.0 is not a plausible"),
    ("huge-float.jsonl", _record(summary__median=1e300).encode(),
     "summary.median = 1e+300 is not a plausible duration"),
    ("overflow.jsonl", _record().replace('"median": 11000000.0', '"median": 1e400').encode(),
     "summary.median must be a finite number, got Infinity"),
    ("huge-int.jsonl", _record().replace('"batch": 1', '"batch": 1' + "0" * 40).encode(),
     "config.batch must be an integer from 1 to 1048576, got a huge integer"),
    ("digits.jsonl", _record().replace('"batch": 1', '"batch": 1' + "0" * 5000).encode(),
     "a number with thousands of digits"),
    ("nan.jsonl", _record().replace('"median": 11000000.0', '"median": NaN').encode(),
     "NaN is not a number JSON allows"),
    ("status.jsonl", _record(status="great").encode(), "status must be one of ok, error"),
    ("schema.jsonl", _record(schema=2).encode(), "a record of schema 2; this pyparbench reads "
                                                 "schema 1"),
    ("settings.jsonl", _record(config__settings__scheduler="warp").encode(),
     "config.settings: scheduler must be one of"),
    ("machines.jsonl", (_record() + "\n" + _record(machine__cpu_model="Other CPU")).encode(),
     ":2: measured on another machine than"),
    ("bench-types.json", BENCH.replace('"median": 0.0102', '"median": "0.0102"').encode(),
     'benchmarks[0]: stats.median must be a finite number, got "0.0102"'),
    ("bench-list.json", b'{"benchmarks": {}, "machine_info": {}}', "benchmarks must be a list"),
    ("summary-models.json", b'{"models": {"a": 1}}', "models must be a list, got a JSON object"),
    ("summary-config.json", b'{"models": [{"model": "m", "batch": 1, "configs": '
                            b'[{"settings": {}, "median_ns": -1}]}]}',
     "models[0].configs[0]: median_ns = -1 is not a plausible duration"),
    ("summary-peak.json", b'{"models": [], "peak": {"points": [{"threads": 1, '
                          b'"fma_gflops": "fast"}]}}',
     'peak.points[0]: fma_gflops must be a positive GFLOP/s figure, got "fast"'),
    ("summary-ops.json", b'{"models": [], "operators": {"scaling": [{"name": "g", '
                         b'"points": [{"threads": 0, "median_ns": 5}]}]}}',
     "operators.scaling[0].points[0]: threads must be an integer from 1"),
    ("summary-empty.json", b'{"models": []}', "a summary with no measured settings or operators"),
    ("escape.jsonl", _record(config__model="a\x1b[2Jb").encode() + b"\n{",
     ":2: not complete JSON"),
]


@pytest.mark.parametrize("name,content,message", BAD, ids=[b[0] for b in BAD])
def test_bad_files_are_one_line_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                       name: str, content: bytes, message: str) -> None:
    bad = tmp_path / name
    bad.write_bytes(content)
    code, out, err = run(capsys, A, str(bad))
    assert code == 2
    assert err.startswith(f"pyparbench compare: error: {bad}") and err.count("\n") == 1, err
    assert message in err, err
    assert out == ""


def test_other_bad_inputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cases = [([str(tmp_path / "nope.json")], "nope.json: no such file or folder"),
             ([str(tmp_path)], "a folder with neither results.jsonl nor summary.json"),
             (["/dev/zero"], "/dev/zero: not a regular file"),
             ([str(DATA / "bench_a.json"), "--max-bytes", "1K"], "over the 1024-byte limit"),
             ([], "compare needs at least two inputs")]
    for args, message in cases:
        code, _, err = run(capsys, A, *args)
        assert code == 2 and message in err and err.count("\n") == 1, (args, err)


def test_a_control_character_in_a_label_is_escaped(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    f = tmp_path / "results.jsonl"
    f.write_text(_record(config__model="evil\x1b[2J") + "\n")
    code, out, err = run(capsys, A, str(f))
    assert code == 0, err
    assert "\x1b" not in out and "evil\\x1b[2J" in out


def test_the_command_line_exit_status_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "junk.json"
    bad.write_bytes(b"\x00\x01junk")
    out = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "compare", A, str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr == f"pyparbench compare: error: {bad}: binary data, not JSON text\n"
    ok = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "compare", A, B, "--json"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["comparisons"][0]["baseline"] == A


def _with_bf16_rows(tmp_path: Path, name: str, scale: float,
                    bf16_gflops: dict[int, float] | None, precision: str = "bf16",
                    ceiling: str = "bf16_gflops") -> str:
    """A copy of machine ``name`` with a run at ``precision`` (bf16) of each
    mlp-512 b1 sync 1x2 record (its times x ``scale``) and, when given,
    that precision's ceilings (``ceiling``) in its peak."""
    folder = tmp_path / f"{name}-{precision}"
    shutil.copytree(DATA / name, folder)
    lines = (folder / "results.jsonl").read_text().splitlines()
    for line in list(lines):
        r = json.loads(line)
        s = r["config"]["settings"]
        if r["config"]["model"] == "mlp-512" and r["config"]["batch"] == 1 and not s.get("name") \
                and s["intra_op"] == 2 and r["status"] == "ok":
            s["precision"] = precision
            r["key"] = r["key"].replace('"smt"', f'"precision": "{precision}", "smt"')
            r["ns"] = [x * scale for x in r["ns"]]
            r["summary"] = {**r["summary"], "median": r["summary"]["median"] * scale}
            lines.append(json.dumps(r))
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    if bf16_gflops is not None:
        summary = json.loads((folder / "summary.json").read_text())
        for p in summary["peak"]["points"]:
            p[ceiling] = bf16_gflops.get(p["threads"])
        (folder / "summary.json").write_text(json.dumps(summary))
    return str(folder)


def test_fp32_and_bf16_rows_line_up_per_precision(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    a = _with_bf16_rows(tmp_path, "machine_a", 0.5, None)
    b = _with_bf16_rows(tmp_path, "machine_b", 0.25, {1: 300.0, 2: 600.0, 4: 1200.0})
    res = compare_json(capsys, a, b)
    by_label = {r["label"]: r for r in res["comparisons"][0]["rows"]}
    bf16 = [lb for lb in by_label if lb.endswith(" bf16")]
    assert bf16 == [TWO + " library/onednn/openmp none bf16"], list(by_label)
    # The fp32 row is the one the files had before, with its ratio; the bf16
    # row is its own, against the other machine's bf16 row.
    fp32 = rows(compare_json(capsys, A, B))[TWO]
    assert by_label[TWO + " library/onednn/openmp none"]["ratio"] == pytest.approx(fp32["ratio"])
    assert by_label[bf16[0]]["ratio"] == pytest.approx(fp32["ratio"] * 0.25 / 0.5)
    # per-peak: a bf16 row divides by the bf16 ceiling where the input has
    # one (B: 600 at 2 threads), else the FMA's (A: 100 at 2 threads).
    peak = {r["label"]: r for r in compare_json(capsys, a, b, "--normalize", "per-peak")
            ["comparisons"][0]["rows"]}
    assert peak[bf16[0]]["ratio"] == pytest.approx((14.5 * 0.25 * 600) / (24.5 * 0.5 * 100))
    assert peak[TWO + " library/onednn/openmp none"]["ratio"] == pytest.approx(
        (14.5 * 120) / (24.5 * 100))
    inputs = compare_json(capsys, a, b)["inputs"]
    assert inputs[0]["peak_bf16_gflops"] is None
    assert inputs[1]["peak_bf16_gflops"] == {"1": 300.0, "2": 600.0, "4": 1200.0}


def test_int8_rows_line_up_apart_and_per_peak_takes_the_int8_ceiling(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a = _with_bf16_rows(tmp_path, "machine_a", 0.5, None, "int8", "int8_gops")
    b = _with_bf16_rows(tmp_path, "machine_b", 0.2, {1: 1000.0, 2: 2000.0, 4: 4000.0}, "int8",
                        "int8_gops")
    res = compare_json(capsys, a, b)
    by_label = {r["label"]: r for r in res["comparisons"][0]["rows"]}
    int8 = [lb for lb in by_label if lb.endswith(" int8")]
    assert int8 == [TWO + " library/onednn/openmp none int8"], list(by_label)
    fp32 = rows(compare_json(capsys, A, B))[TWO]
    assert by_label[int8[0]]["ratio"] == pytest.approx(fp32["ratio"] * 0.2 / 0.5)
    # per-peak: B's int8 row divides by its int8 ceiling (GOP/s, 2000 at 2
    # threads), A's (none measured) by the FMA's (100).
    peak = {r["label"]: r for r in compare_json(capsys, a, b, "--normalize", "per-peak")
            ["comparisons"][0]["rows"]}
    assert peak[int8[0]]["ratio"] == pytest.approx((14.5 * 0.2 * 2000) / (24.5 * 0.5 * 100))
    inputs = compare_json(capsys, a, b)["inputs"]
    assert inputs[0]["peak_int8_gops"] is None
    assert inputs[1]["peak_int8_gops"] == {"1": 1000.0, "2": 2000.0, "4": 4000.0}
    # A file without precision reads fp32: its rows match the int8 file's fp32 ones only.
    plain = {r["label"] for r in compare_json(capsys, A, b)["comparisons"][0]["rows"]}
    assert TWO + " library/onednn/openmp none" in plain


def test_a_preset_at_bf16_is_grouped_apart_in_the_table(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    """A preset's short key is its name at every precision: the group above
    it says which precision the row is (it read 'tensorflow' under
    'mlp-512 b1' for both the fp32 and the bf16 run)."""
    folders = []
    for name, scale in (("machine_a", 0.5), ("machine_b", 0.25)):
        folder = tmp_path / name
        shutil.copytree(DATA / name, folder)
        lines = (folder / "results.jsonl").read_text().splitlines()
        for line in list(lines):
            r = json.loads(line)
            if r["config"]["settings"].get("name") == "tensorflow":
                r["config"]["settings"]["precision"] = "bf16"
                r["ns"] = [x * scale for x in r["ns"]]
                r["summary"] = {**r["summary"], "median": r["summary"]["median"] * scale}
                lines.append(json.dumps(r))
        (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
        folders.append(str(folder))
    code, out, err = run(capsys, *folders)
    assert code == 0, err
    table = [line.strip() for line in out.splitlines()]
    fp32_at, bf16_at = table.index("mlp-512 b1"), table.index("mlp-512 b1 bf16")
    # Each group has its own tensorflow row, with its own ratio.
    for start in (fp32_at, bf16_at):
        group = table[start + 1:]
        first = next(i for i, line in enumerate(group) if line.startswith("tensorflow"))
        assert all(line and not line.startswith("mlp-") for line in group[:first]), group
    bf16_row = next(line for line in table[bf16_at:] if line.startswith("tensorflow"))
    fp32_row = next(line for line in table[fp32_at:] if line.startswith("tensorflow"))
    assert float(bf16_row.split()[5]) == pytest.approx(float(fp32_row.split()[5]) * 0.5,
                                                       rel=0.01)


def test_rows_of_a_file_without_precision_read_fp32() -> None:
    rs = load(A)
    assert rs.rows and all(r.precision == "fp32" for r in rs.rows.values())
    assert not any("precision" in key for key in rs.rows)


def test_openvino_hints_on_one_setting_are_rows_of_their_own(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """OpenVINO's LATENCY and THROUGHPUT hints run under the same settings;
    each is its own row with its own processes (they were pooled into one
    group, both rows reading one ratio), keyed short enough for one line."""
    folders = []
    for name, scales in (("machine_a", (1.0, 0.5)), ("machine_b", (0.8, 0.2))):
        folder = tmp_path / name
        shutil.copytree(DATA / name, folder)
        lines = (folder / "results.jsonl").read_text().splitlines()
        first = json.loads(lines[0])
        for preset, scale in zip(("openvino-latency", "openvino-throughput"), scales):
            for rnd in range(3):
                r = json.loads(json.dumps(first))
                r["config"].update(framework="openvino", mode="f32", round=rnd)
                r["config"]["settings"]["name"] = preset
                r["ns"] = [x * scale * (1 + 0.01 * rnd) for x in r["ns"]]
                r["summary"] = {**r["summary"],
                                "median": r["summary"]["median"] * scale * (1 + 0.01 * rnd)}
                lines.append(json.dumps(r))
        (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
        folders.append(str(folder))
    res = compare_json(capsys, *folders)
    ov = {r["label"]: r for r in res["comparisons"][0]["rows"] if r["label"].startswith("openvino")}
    assert len(ov) == 2, list(ov)
    by_hint = {h: next(r["ratio"] for lb, r in ov.items() if f"openvino-{h}" in lb)
               for h in ("latency", "throughput")}
    # B's throughput run is 0.2 / 0.5 of A's, its latency run 0.8 / 1.0.
    assert by_hint["throughput"] / by_hint["latency"] == pytest.approx(0.5, rel=0.02)
    code, out, err = run(capsys, *folders)
    assert code == 0, err
    table = [line.strip() for line in out.splitlines()]
    for hint, ratio in by_hint.items():
        row = next(line for line in table if line.startswith(f"ov:f32 {hint} "))
        assert float(row.split()[6]) == pytest.approx(ratio, rel=0.01), row
    assert not any(line in ("openvino-latency", "openvino-throughput") for line in table)
