"""The process as the unit of significance (pyparbench.stats.spread): the
statistics, compare's test, the summary's regret intervals and the
confirmation rounds that target wide intervals. Records are made by hand
or drawn from a seeded model of processes; nothing is timed."""

from __future__ import annotations

import io
import json
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from pyparbench.compare import compare, print_text, to_json, u_test
from pyparbench.harness.confirm import confirmations
from pyparbench.harness.runner import Config
from pyparbench.report.html import render_html
from pyparbench.report.summary import summarize_run
from pyparbench.report.terminal import print_summary
from pyparbench.resultfiles import Result, load
from pyparbench.settings import Settings
from pyparbench.stats import (
    ProcessSpread,
    estimate_paired_ratio,
    estimate_ratio,
    holm,
    input_spread,
    pooled_spread,
    row_spread,
    se_of_interval,
    t_quantile,
    t_two_sided_p,
)
from pyparbench.timing import Summary, summarize

scipy_stats = pytest.importorskip("scipy.stats")

SYNC = Settings(intra_op=2, affinity="compact")
ONE = Settings(affinity="compact")
ASYNC = Settings(scheduler="async", inter_op=2, affinity="compact")

# -- the statistics ------------------------------------------------------------------


@pytest.mark.parametrize("df", [0.7, 1, 2, 3.5, 7, 30, 1000])
def test_student_t_is_two_sided_and_its_quantile_inverts_it(df: float) -> None:
    for t in (0.0, 0.3, 1.0, 2.0, 4.5, 12.0, 80.0):
        assert t_two_sided_p(t, df) == pytest.approx(2 * scipy_stats.t.sf(t, df), rel=1e-9,
                                                     abs=1e-300)
    for p in (0.5, 0.1, 0.05, 0.01, 1e-4):
        assert t_quantile(p, df) == pytest.approx(scipy_stats.t.isf(p / 2, df), rel=1e-9)
    with pytest.raises(ValueError, match="degrees of freedom must be > 0, got 0"):
        t_two_sided_p(1.0, 0)
    with pytest.raises(ValueError, match="p must be between 0 and 1, got 1.5"):
        t_quantile(1.5, df)
    for t in (0.3, 2.0, 12.0):
        assert t_quantile(t_two_sided_p(t, df), df) == pytest.approx(t, rel=1e-6)


def test_a_standard_error_backed_out_of_an_interval_says_its_distribution() -> None:
    spread = ProcessSpread(0.05, 4, 2)
    est = estimate_ratio([10.0], [12.0], spread)
    se = 0.05 * math.sqrt(2)
    # A t interval read with its t gives back the standard error it was built from...
    assert se_of_interval(est.low, est.high, est.level, est.df) == pytest.approx(se)
    # ...and read as normal, the wider one a normal test needs to be as wide.
    wide = se_of_interval(est.low, est.high, est.level)
    assert wide == pytest.approx(se * scipy_stats.t.isf(0.025, 4) / scipy_stats.norm.isf(0.025))
    with pytest.raises(ValueError, match=r"0 < low <= high, got \[2.0, 1.0\]"):
        se_of_interval(2.0, 1.0, 0.95)
    with pytest.raises(ValueError, match="level must be between 0 and 1, got 95"):
        se_of_interval(1.0, 2.0, 95)


def test_the_spread_pools_the_settings_measured_in_several_processes() -> None:
    e = math.exp
    spread = pooled_spread([[1.0], [e(0.0), e(0.2)], [e(1.0), e(1.1), e(1.3)], []])
    assert spread is not None and (spread.df, spread.settings) == (3, 2)
    ss = 0.2 ** 2 / 2 + sum((x - 1.1333333333333333) ** 2 for x in (1.0, 1.1, 1.3))
    assert spread.sigma == pytest.approx(math.sqrt(ss / 3))
    assert pooled_spread([[5.0], [6.0]]) is None  # no setting measured twice
    with pytest.raises(ValueError, match="a process median must be a positive time, got -1"):
        pooled_spread([[1.0, -1.0]])


def test_a_ratio_reads_each_side_as_the_median_of_its_processes() -> None:
    spread = ProcessSpread(0.05, 10, 4)
    est = estimate_ratio([10.0], [12.0], spread)
    se = 0.05 * math.sqrt(2)
    d = math.log(1.2)
    assert est.ratio == pytest.approx(1.2) and est.df == 10
    assert est.p_value == pytest.approx(2 * scipy_stats.t.sf(d / se, 10))
    half = scipy_stats.t.isf(0.025, 10) * se
    assert (est.low, est.high) == pytest.approx((math.exp(d - half), math.exp(d + half)))
    # Three processes: the median of three wanders 1.346 / 3 as much as one.
    three = estimate_ratio([10.0, 9.0, 30.0], [12.0], spread)
    assert three.ratio == pytest.approx(1.2)
    se3 = 0.05 * math.sqrt(1.346 / 3 + 1)
    assert three.p_value == pytest.approx(2 * scipy_stats.t.sf(d / se3, 10))
    # Two inputs, two spreads: Welch-Satterthwaite degrees of freedom.
    other = ProcessSpread(0.1, 4, 2)
    two = estimate_ratio([10.0], [12.0], spread, other)
    va, vb = 0.05 ** 2, 0.1 ** 2
    assert two.df == pytest.approx((va + vb) ** 2 / (va ** 2 / 10 + vb ** 2 / 4))
    # Processes that never differed: only the difference is left.
    flat = estimate_ratio([10.0], [12.0], ProcessSpread(0.0, 3, 3))
    assert flat.p_value == 0.0 and flat.low == flat.high == pytest.approx(1.2)
    assert estimate_ratio([10.0], [10.0], ProcessSpread(0.0, 3, 3)).p_value == 1.0
    with pytest.raises(ValueError, match="each side needs a process at least, got 0 and 1"):
        estimate_ratio([], [1.0], spread)
    with pytest.raises(ValueError, match="level must be between 0 and 1, got 1.0"):
        estimate_ratio([1.0], [1.0], spread, level=1.0)


def test_a_paired_ratio_is_the_median_of_its_rounds_ratios() -> None:
    spread = ProcessSpread(0.05, 10, 4)
    # Three rounds: the machine drifted by 1.4x in the first; the pairs agree.
    pairs = [(22.1, 31.15), (22.5, 22.6), (29.8, 29.9)]
    est = estimate_paired_ratio(pairs, spread)
    d = statistics.median(math.log(b / a) for a, b in pairs)
    assert est.ratio == pytest.approx(22.6 / 22.5) and est.df == 10
    se = 0.05 * math.sqrt(2 * 1.346 / 3)  # each pair as two processes, the median of 3
    assert est.p_value == pytest.approx(2 * scipy_stats.t.sf(d / se, 10))
    half = scipy_stats.t.isf(0.025, 10) * se
    assert (est.low, est.high) == pytest.approx((math.exp(d - half), math.exp(d + half)))
    one = estimate_paired_ratio([(10.0, 12.0)], spread)
    assert (one.low, one.high) == pytest.approx(
        (estimate_ratio([10.0], [12.0], spread).low, estimate_ratio([10.0], [12.0], spread).high))
    flat = estimate_paired_ratio([(10.0, 12.0)], ProcessSpread(0.0, 3, 3))
    assert flat.p_value == 0.0 and flat.low == flat.high == pytest.approx(1.2)
    with pytest.raises(ValueError, match="a paired ratio needs a pair at least"):
        estimate_paired_ratio([], spread)
    with pytest.raises(ValueError, match="level must be between 0 and 1, got 0"):
        estimate_paired_ratio(pairs, spread, level=0)
    with pytest.raises(ValueError, match="positive time"):
        estimate_paired_ratio([(10.0, -1.0)], spread)


def _processes(rng: np.random.Generator, shift: float, k: int, tau: float,
               runs: int) -> list[np.ndarray]:
    """k processes of one setting: each one's level drawn around ``shift``
    (``tau`` between processes, on the log scale), its runs a little around it."""
    return [np.exp(rng.normal(shift, tau) + rng.normal(0.0, 0.01, runs)) * 1e6
            for _ in range(k)]


def test_per_run_tests_call_process_differences_significant_process_tests_do_not() -> None:
    # The decision in numbers: rows of one setting measured by two runs of the
    # same suite differ by what differs between processes. Tested on per-run
    # times, nearly every row is "significant"; tested on processes against
    # the pooled spread, about alpha of them are.
    rng = np.random.default_rng(33)
    tau, rows, alpha = 0.05, 400, 0.05
    spread_runs = []
    by_runs = by_processes = 0
    for run in range(2):
        # Each run measures 20 settings twice: that is its spread.
        spread_runs.append(pooled_spread(
            [[float(np.median(p)) for p in _processes(rng, 0.0, 2, tau, 300)]
             for _ in range(20)]))
    sa, sb = spread_runs
    assert sa is not None and sb is not None
    for _ in range(rows):
        a, b = _processes(rng, 0.0, 1, tau, 300), _processes(rng, 0.0, 1, tau, 300)
        p, _ = u_test(a[0].tolist(), b[0].tolist(), alpha)
        by_runs += p is not None and p < alpha
        est = estimate_ratio([float(np.median(a[0]))], [float(np.median(b[0]))], sa, sb)
        by_processes += est.p_value < alpha
    assert by_runs / rows > 0.8
    assert by_processes / rows < 2 * alpha
    # Power: a setting 1.5x slower is marked, one process a side.
    for _ in range(50):
        a, b = _processes(rng, 0.0, 1, tau, 300), _processes(rng, math.log(1.5), 1, tau, 300)
        est = estimate_ratio([float(np.median(a[0]))], [float(np.median(b[0]))], sa, sb)
        assert est.p_value < alpha and est.low > 1.0


# -- records made by hand ----------------------------------------------------------------

MACHINE: dict[str, Any] = {"cpu_model": "Test CPU", "cpus": {"logical": 2, "physical_cores": 2}}


def _result(model: str, s: Settings, ms: float | list[float], name: str = "", rnd: int = 0,
            predicted: float | None = None) -> Result:
    c = Config(model, 1, s.with_(name=name), repeats=3, predicted_ns=predicted, round=rnd)
    runs = [ms] * 3 if isinstance(ms, float) else ms
    ns = [x * 1e6 for x in runs]
    return Result(c.key, c, "ok", 0.0, MACHINE, ns=ns, summary=summarize(ns))


def _write(folder: Path, results: list[Result]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r.as_dict()) + "\n"
                                                  for r in results))
    return folder


def _run(scale: float, jitter: tuple[float, float]) -> list[Result]:
    """A run of two models: every setting once, the recommended one (the
    same setting as a grid one) and the tuner's in a second round."""
    j0, j1 = jitter
    return [
        _result("m", SYNC, 10.0 * scale * j0, "recommended", predicted=9e6),
        _result("m", SYNC, 10.0 * scale * j1),
        _result("m", SYNC, 10.0 * scale * j1, "recommended", rnd=1, predicted=9e6),
        _result("m", ASYNC, 14.0 * scale, "tftuner"),
        _result("m", ASYNC, 14.0 * scale * j0, "tftuner", rnd=1),
        _result("m", ONE, 20.0 * scale),
        _result("n", SYNC, 5.0 * scale * j1, "tftuner"),
        _result("n", SYNC, 5.0 * scale * j0),
    ]


def test_a_rows_own_spread_pools_its_two_sides() -> None:
    a, b = [10.0, 11.0, 12.1], [20.0, 22.0]
    la, lb = np.log(a), np.log(b)
    ss = ((la - la.mean()) ** 2).sum() + ((lb - lb.mean()) ** 2).sum()
    s = row_spread(a, b)
    assert s.df == 3 and s.settings == 1 and s.sigma == pytest.approx(np.sqrt(ss / 3))
    with pytest.raises(ValueError, match="two processes a side, got 1 and 2"):
        row_spread([10.0], b)
    with pytest.raises(ValueError, match="positive time"):
        row_spread([10.0, -1.0], b)


def test_compare_tests_processes_where_both_inputs_measured_settings_twice(
        tmp_path: Path) -> None:
    a = load(_write(tmp_path / "a", _run(1.0, (1.0, 1.04))))
    b = load(_write(tmp_path / "b", _run(1.02, (1.03, 0.99))))
    # m's sync 1x2 in 3 processes, its async 2x1 and n's sync 1x2 in 2 each.
    spread_a, spread_b = input_spread(a), input_spread(b)
    assert spread_a is not None and spread_a.settings == 3 and spread_a.df == 4
    # Rounds are processes of their row, not a row measured twice; so are the
    # processes of the same setting under another name.
    assert not a.notes
    rows = {r.label: r for r in a.rows.values()}
    rec = rows["m b1 recommended sync 1x2 library/onednn/openmp compact"]
    assert sorted(rec.processes) == [10e6, 10.4e6, 10.4e6] and rec.median_ns == 10.4e6
    assert len(rec.samples_ns) == 9
    c = compare([a, b])
    for r in c.pairs[0].rows:
        assert r.test == "processes" and r.low is not None and r.high is not None
        ra, rb = a.rows[r.key], b.rows[r.key]
        assert spread_b is not None
        if len(ra.processes) >= 2 and len(rb.processes) >= 2:
            # Processes of its own a side: its own spread, not the inputs'.
            assert r.own_spread is not None
            est = estimate_ratio(ra.processes, rb.processes,
                                 row_spread(ra.processes, rb.processes))
        else:
            assert r.own_spread is None
            est = estimate_ratio(ra.processes, rb.processes, spread_a, spread_b)
        assert r.p_value == pytest.approx(est.p_value) and r.ratio == pytest.approx(est.ratio)
        assert r.p_adjusted is not None and r.p_adjusted >= r.p_value
        assert r.significant == (r.p_adjusted < 0.05)
    # 2 % apart, inside the spread: nothing significant.
    assert not any(r.significant for r in c.pairs[0].rows)
    out = io.StringIO()
    print_text(c, file=out)
    text = out.getvalue()
    assert "95% interval" in text and "Student's t" in text and "Mann-Whitney" not in text
    got = to_json(c)
    assert got["inputs"][0]["spread"] == spread_a.as_dict()
    assert got["comparisons"][0]["rows"][0]["test"] == "processes"


def test_compare_marks_a_real_difference_of_single_processes(tmp_path: Path) -> None:
    a = load(_write(tmp_path / "a", _run(1.0, (1.0, 1.04))))
    b = load(_write(tmp_path / "b", _run(1.6, (1.03, 0.99))))
    c = compare([a, b])
    one = next(r for r in c.pairs[0].rows if r.label.startswith("m b1 sync 1x1"))
    assert a.rows[one.key].processes == (20e6,)  # one process a side
    assert one.ratio == pytest.approx(1.6) and one.significant
    assert all(r.significant for r in c.pairs[0].rows)


def test_an_input_that_never_measured_twice_falls_back_to_per_run_times(
        tmp_path: Path) -> None:
    single = [_result("m", SYNC, [10.0, 10.1, 10.2, 10.3, 10.4]),
              _result("m", ONE, [20.0, 20.1, 20.2, 20.3, 20.4])]
    a = load(_write(tmp_path / "a", _run(1.0, (1.0, 1.04))))
    b = load(_write(tmp_path / "b", single))
    assert input_spread(b) is None
    c = compare([a, b])
    row = next(r for r in c.pairs[0].rows if r.label.startswith("m b1 sync 1x1"))
    assert row.test == "runs" and row.low is None
    assert row.p_value == pytest.approx(u_test(a.rows[row.key].samples_ns,
                                               b.rows[row.key].samples_ns, 0.05)[0])
    assert any("no setting measured in two processes" in n and str(tmp_path / "b") in n
               for n in c.notes)


def test_a_framework_run_is_its_own_row(tmp_path: Path) -> None:
    native = _result("m", SYNC, 10.0)
    fw = Config("m", 1, SYNC, repeats=3, framework="onnxruntime", mode="all")
    ns = [30e6] * 3
    a = load(_write(tmp_path / "a", [native, Result(fw.key, fw, "ok", 0.0, MACHINE, ns=ns,
                                                    summary=summarize(ns))]))
    labels = sorted(r.label for r in a.rows.values())
    assert labels == ["m b1 sync 1x2 library/onednn/openmp compact",
                      "onnxruntime (all) m b1 sync 1x2 library/onednn/openmp compact"]
    assert not a.notes


# -- the summary's regret intervals ---------------------------------------------------------


def test_each_regret_has_its_interval_over_processes() -> None:
    records = _run(1.0, (1.0, 1.04))
    summary = summarize_run(records, fingerprint={"host": "h"})
    spread = summary["spread"]
    assert spread["settings"] == 3 and spread["df"] == 4
    m = next(e for e in summary["models"] if e["model"] == "m")
    # Ours (3 processes: 10.0 and 10.4 ms in round 0, 10.4 in round 1; its
    # figure the median over rounds of each round's median, 10.3 ms) is the
    # best: no regret, and no doubt of it.
    assert m["regret"]["recommended"] == 0.0
    assert m["regret_interval"]["recommended"]["low"] == 0.0
    tuner = m["regret_interval"]["tftuner"]
    # The tuner's regret, paired by round: 14 / 10.2 in round 0, 14 / 10.4 in
    # round 1, their median (geometric mean) less 1.
    assert m["regret"]["tftuner"] == pytest.approx(math.sqrt(14 / 10.2 * 14 / 10.4) - 1)
    assert tuner["processes"] == [2, 3] and tuner["level"] == 0.95
    sigma = spread["sigma"]
    est = estimate_paired_ratio([(10.2e6, 14e6), (10.4e6, 14e6)], ProcessSpread(sigma, 4, 3))
    assert est.ratio - 1 == pytest.approx(m["regret"]["tftuner"])
    assert (tuner["low"], tuner["high"]) == pytest.approx((est.low - 1, est.high - 1))
    assert tuner["includes_zero"] == (est.low <= 1.0)
    json.dumps(summary, allow_nan=False)


def test_the_tables_mark_a_regret_whose_interval_includes_zero() -> None:
    # Processes of one setting 20-30 % apart: a 22 % regret cannot be told from 0.
    records = [_result("m", SYNC, 10.0, "tftuner"), _result("m", ONE, 11.0, "recommended"),
               _result("m", ONE, 13.5, "recommended", rnd=1),
               _result("m", ASYNC, 9.0), _result("m", ASYNC, 12.0, rnd=1)]
    summary = summarize_run(records, fingerprint={"host": "h"})
    (m,) = summary["models"]
    iv = m["regret_interval"]["recommended"]
    assert m["regret"]["recommended"] > 0 and iv["low"] < 0 < iv["high"]
    assert iv["includes_zero"]
    out = io.StringIO()
    print_summary(summary, Console(file=out, width=80))
    row = next(line for line in out.getvalue().splitlines() if line.lstrip().startswith("m "))
    assert f"{100 * m['regret']['recommended']:.0f}%?" in row
    page = render_html(summary)
    assert f"{100 * m['regret']['recommended']:.1f}%? [{100 * iv['low']:+.1f}" in page
    # The same regret from processes that agree is not marked.
    tight = [_result("m", SYNC, 10.0, "tftuner"), _result("m", ONE, 11.0, "recommended"),
             _result("m", ONE, 11.01, "recommended", rnd=1),
             _result("m", ASYNC, 10.5), _result("m", ASYNC, 10.51, rnd=1)]
    (t,) = summarize_run(tight, fingerprint={"host": "h"})["models"]
    assert not t["regret_interval"]["recommended"]["includes_zero"]
    # No setting measured twice: no interval, nothing marked.
    alone = summarize_run(records[:2] + records[3:4], fingerprint={"host": "h"})
    assert alone["spread"] is None and alone["models"][0]["regret_interval"] == {
        "tftuner": None, "recommended": None}


# -- confirmation rounds target wide intervals ----------------------------------------


def test_confirmation_targets_rows_whose_interval_is_wide() -> None:
    # Model a: ours 2 % off the best (under the 3 % threshold). Model w: the
    # same. The run's processes differ a lot (model s's repeated settings),
    # so both intervals reach past 3 %: both rows are confirmed, though
    # neither is over 3 %.
    noisy = [_result("s", SYNC, 10.0), _result("s", SYNC, 13.0, rnd=1),
             _result("s", ONE, 20.0), _result("s", ONE, 15.0, rnd=1)]
    rows = [_result("a", SYNC, 10.2, "recommended"), _result("a", ONE, 10.0),
            _result("w", SYNC, 10.2, "recommended"), _result("w", ONE, 10.0)]
    todo = confirmations(rows + noisy, rounds=1)
    assert {(c.model, c.settings.with_(name=""), c.round) for c in todo} == {
        ("a", SYNC, 1), ("a", ONE, 1), ("w", SYNC, 1), ("w", ONE, 1)}
    # Processes that agree: a tight interval under 3 %, nothing to confirm.
    quiet = [_result("s", SYNC, 10.0), _result("s", SYNC, 10.01, rnd=1),
             _result("s", ONE, 20.0), _result("s", ONE, 20.01, rnd=1)]
    assert confirmations(rows + quiet, rounds=1) == []
    # Wider intervals first: the row with fewer processes leads.
    more = rows + noisy + [_result("w", SYNC, 10.2, "recommended", rnd=1),
                           _result("w", ONE, 10.0, rnd=1)]
    todo = confirmations(more, rounds=2)
    assert [c.model for c in todo[:2]] == ["a", "a"]


def test_rows_of_identical_code_are_marked_after_holms_correction(tmp_path: Path) -> None:
    # Many comparisons of identical code, 48 rows each measured in three
    # processes a side (5 % apart): p < alpha alone marks about alpha of the
    # rows; after Holm's correction over the pair's rows some row is marked
    # in at most about alpha of the comparisons. A real 2x change still is.
    rng = np.random.default_rng(7)
    raw = marked = comparisons_marked = 0
    trials, rows = 12, 48

    def side(folder: Path, slow: float) -> Path:
        return _write(folder, [_result(f"m{k}", SYNC, float(10.0 * math.exp(rng.normal(0, 0.05)))
                                       * (slow if k == 0 else 1.0), rnd=r)
                               for k in range(rows) for r in range(3)])

    for t in range(trials):
        c = compare([load(side(tmp_path / f"a{t}", 1.0)), load(side(tmp_path / f"b{t}", 1.0))])
        got = c.pairs[0].rows
        assert len(got) == rows and all(r.test == "processes" for r in got)
        assert [r.p_adjusted for r in got] == pytest.approx(holm([r.p_value for r in got]))
        assert all(r.significant == (r.p_adjusted < c.alpha) for r in got)
        raw += sum(r.p_value < c.alpha for r in got)
        marked += sum(r.significant for r in got)
        comparisons_marked += any(r.significant for r in got)
    assert raw >= 5  # what unadjusted marks would have shown (13 of 576 with this seed)
    assert marked <= raw and comparisons_marked <= 2, (raw, marked, comparisons_marked)
    c = compare([load(side(tmp_path / "a", 1.0)), load(side(tmp_path / "b", 2.0))])
    changed = next(r for r in c.pairs[0].rows if r.label.startswith("m0 "))
    assert changed.ratio == pytest.approx(2.0, rel=0.15) and changed.significant
