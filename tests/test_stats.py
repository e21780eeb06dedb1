"""pyparbench.stats: the one paired ratio and everything that reads in pairs
(regret, the summary's speed-ups, confirmation, the recommender's
verification, lockstep runs).
Records are made by hand; nothing is timed."""

from __future__ import annotations

import math
import statistics

import pytest

from pyparbench.frameworks.lockstep import LockstepResult
from pyparbench.harness.confirm import _to_confirm
from pyparbench.recommender.side_by_side import Verified, paired_gain
from pyparbench.report.summary import summarize_run
from pyparbench.resultfiles import Result, RunConfig
from pyparbench.settings import Settings
from pyparbench.stats import (
    ProcessSpread,
    estimate_paired_ratio,
    median_interval,
    merge_settings,
    paired_ratio_of,
    regret_of,
    sign_test_p,
)
from pyparbench.timing import Summary

SYNC = Settings(intra_op=2, affinity="compact")
ASYNC = Settings(scheduler="async", inter_op=2, affinity="compact")
ONE = Settings(affinity="compact")


def _rec(s: Settings, ms: float, name: str = "", rnd: int = 0) -> Result:
    c = RunConfig("m", 1, s.with_(name=name), round=rnd)
    ns = ms * 1e6
    return Result(c.key, c, "ok", 0.0, summary=Summary(ns, ns, ns, ns, ns, 5))


# Two rounds whose ratios are 1 and 2: the plain median of the ratios is 1.5,
# the median of the log ratios sqrt(2) (and its inverse reads 1 / sqrt(2)).
EVEN = [(10.0, 10.0), (10.0, 20.0)]


def test_the_paired_ratio_is_the_median_of_log_ratios() -> None:
    est = estimate_paired_ratio(EVEN)
    assert est.ratio == pytest.approx(math.sqrt(2))
    assert est.ratio != pytest.approx(statistics.median(b / a for a, b in EVEN))
    back = estimate_paired_ratio([(b, a) for a, b in EVEN])
    assert est.ratio * back.ratio == pytest.approx(1.0)
    assert (est.pairs, est.above, est.share_above, est.method) == (2, 1, 0.5, "sign")
    odd = estimate_paired_ratio([(10.0, 11.0), (10.0, 30.0), (10.0, 9.0)])
    assert odd.ratio == pytest.approx(1.1)


def test_without_a_spread_the_interval_is_the_order_statistics_of_the_pairs() -> None:
    ratios = [1.0 + 0.01 * k for k in range(30)]
    pairs = [(10.0, 10.0 * r) for r in ratios]
    est = estimate_paired_ratio(pairs, level=0.9)
    lo, hi = median_interval(30, 0.9)
    assert (est.low, est.high) == (pytest.approx(ratios[lo]), pytest.approx(ratios[hi]))
    assert est.low <= est.ratio <= est.high
    # 29 pairs above 1 and a tie: the sign test leaves the tie out.
    assert est.p_value == pytest.approx(sign_test_p(29, 0)) and est.p_value < 1e-8


def test_with_a_spread_the_interval_is_students_t() -> None:
    spread = ProcessSpread(0.05, 10, 4)
    est = estimate_paired_ratio(EVEN, spread)
    assert est.method == "t" and est.df == 10.0
    assert est.low < est.ratio < est.high and est.ratio == pytest.approx(math.sqrt(2))
    assert math.log(est.high) - math.log(est.ratio) == pytest.approx(
        math.log(est.ratio) - math.log(est.low))


def test_the_sign_test() -> None:
    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(3, 3) == 1.0
    assert sign_test_p(5, 0) == pytest.approx(2 / 32)
    assert sign_test_p(2000, 0) == 0.0  # no overflow for many pairs
    with pytest.raises(ValueError):
        sign_test_p(-1, 2)


def test_regret_and_speedup_read_an_even_number_of_rounds_in_pairs() -> None:
    # The best: 10 ms, then 20 ms (figure 15); Intel's preset 20 ms in both
    # (figure 20). In pairs Intel's preset is sqrt(2) slower, by its figure 4/3.
    rs = [_rec(SYNC, 10.0, rnd=0), _rec(SYNC, 20.0, rnd=1),
          _rec(ASYNC, 20.0, "intel", 0), _rec(ASYNC, 20.0, "intel", 1)]
    merged = {m.settings.with_(name=""): m for m in merge_settings(rs)}
    best, intel = merged[SYNC], merged[ASYNC]
    assert best.median == 15e6 and intel.median == 20e6
    assert paired_ratio_of(intel, best) == pytest.approx(math.sqrt(2))
    assert regret_of(intel, best) == pytest.approx(math.sqrt(2) - 1)
    assert paired_ratio_of(best, best) == 1.0
    (m,) = summarize_run(rs)["models"]
    assert m["speedup"]["intel"] == pytest.approx(math.sqrt(2))
    assert m["regret"]["intel"] == pytest.approx(math.sqrt(2) - 1)
    # Without a shared round, the figures' ratio.
    apart = merge_settings([_rec(SYNC, 10.0, rnd=0), _rec(ASYNC, 20.0, "intel", 1)])
    assert paired_ratio_of(apart[1], apart[0]) == pytest.approx(2.0)


def test_confirmation_finds_a_rival_ahead_in_pairs_not_by_figures() -> None:
    # The study's tuner has the lower figure (11 ms against 20 ms) but in
    # two of the three rounds of both it was slower than the recommendation.
    rs = [_rec(SYNC, 10.0, "recommended", 0), _rec(SYNC, 20.0, "recommended", 1),
          _rec(SYNC, 20.0, "recommended", 2),
          _rec(ASYNC, 11.0, "tftuner", 0), _rec(ASYNC, 21.0, "tftuner", 1),
          _rec(ASYNC, 9.0, "tftuner", 2)]
    merged = merge_settings(rs)
    reach, todo = _to_confirm(merged, None, 0.03)
    assert (reach, todo) == (0.0, [])
    # The same figures with the tuner ahead in every round: confirmed.
    rs[4] = _rec(ASYNC, 19.0, "tftuner", 1)
    rs[3] = _rec(ASYNC, 9.5, "tftuner", 0)
    reach, todo = _to_confirm(merge_settings(rs), None, 0.03)
    assert reach > 0.03 and len(todo) == 2


def test_the_recommenders_verification_reads_rounds_in_pairs() -> None:
    mine = Verified(SYNC, 10.0, 2, (10.0, 10.0))
    other = Verified(ASYNC, 7.5, 2, (10.0, 5.0))
    gain, share = paired_gain(mine, other, lambda v: v.ns, higher_is_better=False)
    assert gain == pytest.approx(math.sqrt(2)) and share == 0.5
    rate = paired_gain(mine, other, lambda v: 1e9 / v.ns, higher_is_better=True)
    assert rate[0] == pytest.approx(math.sqrt(2)) and rate[1] == 0.5


def test_lockstep_reads_steps_in_pairs() -> None:
    r = LockstepResult(["a", "b"], {"a": [10.0, 10.0], "b": [10.0, 20.0]}).ratio("a", "b")
    assert r.median == pytest.approx(math.sqrt(2)) and r.a_faster == 1 and r.steps == 2
    assert (r.low, r.high) == (pytest.approx(1.0), pytest.approx(2.0))


def test_lockstep_keeps_its_interval_name() -> None:
    from pyparbench.frameworks.lockstep import median_interval as lockstep_interval

    assert lockstep_interval is median_interval
