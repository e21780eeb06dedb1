"""Confirmation rounds and the merging of a setting's processes, on records
made by hand (deterministic)."""

from __future__ import annotations

import math

import pytest

from pyparbench.harness.confirm import confirmations
from pyparbench.report.summary import merge_settings, summarize_run
from pyparbench.harness.runner import Config
from pyparbench.resultfiles import Result
from pyparbench.settings import Settings
from pyparbench.timing import Summary

SYNC = Settings(intra_op=2, affinity="compact")
ASYNC = Settings(scheduler="async", inter_op=2, affinity="compact")
ONE = Settings(affinity="compact")


def _rec(model: str, s: Settings, ms: float, name: str = "", rnd: int = 0,
         batch: int = 1) -> Result:
    c = Config(model, batch, s.with_(name=name), predicted_ns=1e6 if name == "recommended"
               else None, round=rnd)
    ns = ms * 1e6
    return Result(c.key, c, "ok", 0.0, summary=Summary(ns, ns, ns, ns, ns, 5))


def test_a_setting_under_several_names_is_one_setting_with_the_median_of_its_processes(
        ) -> None:
    rs = [_rec("m", SYNC, 10.0, "recommended"), _rec("m", SYNC, 30.0, "tftuner"),
          _rec("m", SYNC, 12.0), _rec("m", ASYNC, 11.0)]
    merged = {m.config.name: m for m in merge_settings(rs)}
    assert set(merged) == {"recommended/tftuner", ""}
    both = merged["recommended/tftuner"]
    assert both.processes == 3 and both.median == 12e6 and both.names == ("recommended",
                                                                          "tftuner")
    assert (both.summary.q1, both.summary.q3) == (10e6, 30e6)
    (m,) = summarize_run(rs)["models"]
    # The best is the async setting (11 ms) against the synchronous one's 12.
    assert m["best"]["median_ms"] == 11.0
    assert m["regret"]["recommended"] == pytest.approx(12 / 11 - 1)
    assert m["chosen"]["tftuner"]["processes"] == 3
    assert m["prediction"]["measured_ms"] == 12.0


def test_confirmation_measures_the_settings_a_regret_rests_on() -> None:
    rs = [
        # a: ours is the best: nothing to confirm.
        _rec("a", SYNC, 10.0, "recommended"), _rec("a", ASYNC, 11.0, "tftuner"),
        # b: ours is 10 % off the best; the tuner is slower than ours.
        _rec("b", SYNC, 11.0, "recommended"), _rec("b", ONE, 10.0),
        _rec("b", ASYNC, 20.0, "tftuner"),
        # c: ours is 50 % off, and the tuner beat it.
        _rec("c", SYNC, 15.0, "recommended"), _rec("c", ONE, 10.0),
        _rec("c", ASYNC, 12.0, "tftuner"),
        # d: within the threshold.
        _rec("d", SYNC, 10.2, "recommended"), _rec("d", ONE, 10.0),
    ]
    todo = confirmations(rs, rounds=2)
    rows = [(c.model, c.settings.with_(name=""), c.round) for c in todo]
    # Round-major, the row furthest off first; rec, best (and tuner) each twice.
    assert rows == [
        ("c", SYNC, 1), ("c", ONE, 1), ("c", ASYNC, 1), ("b", SYNC, 1), ("b", ONE, 1),
        ("c", SYNC, 2), ("c", ONE, 2), ("c", ASYNC, 2), ("b", SYNC, 2), ("b", ONE, 2)]
    # Names and predictions stay with their configuration.
    assert todo[0].settings.name == "recommended" and todo[0].predicted_ns == 1e6
    assert todo[2].settings.name == "tftuner"
    assert len({c.key for c in todo}) == len(todo)
    # Once they ran, nothing more; a round already run is not asked again.
    first = {(r.config.model, r.config.name, r.config.settings.inter_op,
              r.config.settings.intra_op): r.timing.median / 1e6 for r in rs}
    done = rs + [_rec(c.model, c.settings.with_(name=""),
                      first[(c.model, c.settings.name, c.settings.inter_op,
                             c.settings.intra_op)], c.settings.name, c.round)
                 for c in todo]
    assert confirmations(done, rounds=2) == []
    more = confirmations(done, rounds=3)
    assert {c.round for c in more} == {3} and len(more) == 5
    # A second pass: rows still off get `rounds` more of each setting.
    deeper = confirmations(done, rounds=2, depth=2)
    assert len(deeper) == 10 and {c.round for c in deeper} == {3, 4}
    assert [c.round for c in deeper[:5]] == [3] * 5
    assert confirmations(rs, rounds=0) == []


def test_intels_preset_measured_faster_than_ours_is_confirmed_with_it() -> None:
    intel = SYNC.with_(omp_wait=20_000)
    # Ours within the threshold of the best, but Intel's preset (another
    # setting) measured faster: both, and the best, are measured again.
    rs = [_rec("m", SYNC, 10.2, "recommended"), _rec("m", intel, 10.0, "intel"),
          _rec("m", ONE, 10.1)]
    todo = confirmations(rs, rounds=1)
    assert sorted(c.settings.name for c in todo) == ["intel", "recommended"]
    # Intel's preset as our setting itself (one merged setting), or slower: nothing.
    same = [_rec("m", SYNC, 10.0, "recommended"), _rec("m", SYNC, 10.1, "intel")]
    assert confirmations(same, rounds=1) == []
    slower = [_rec("m", SYNC, 10.0, "recommended"), _rec("m", intel, 10.5, "intel")]
    assert confirmations(slower, rounds=1) == []


def test_a_config_round_is_part_of_its_identity() -> None:
    a, b = Config("m", 1, SYNC), Config("m", 1, SYNC, round=2)
    assert a.key != b.key and Config.from_dict(b.as_dict()) == b
    assert "round" not in a.as_dict() and "(round 3)" in b.what
    with pytest.raises(ValueError, match="round must be an int >= 0, got -1"):
        Config("m", 1, SYNC, round=-1)


def test_a_drift_between_the_suite_and_its_confirmation_is_no_regret() -> None:
    # The suite ran ours under two names (ours is Intel's preset's setting),
    # the best once; the machine then got 30 % faster for the confirmation.
    rs = [_rec("m", SYNC, 13.0, "recommended"), _rec("m", SYNC, 13.1, "intel"),
          _rec("m", ONE, 12.6)]
    todo = confirmations(rs, rounds=1)
    # Both sides of the regret in round 1, ours although it has two processes.
    assert {(c.settings.with_(name=""), c.round) for c in todo} == {(SYNC, 1), (ONE, 1)}
    assert len(todo) == 2
    assert {c.settings.name for c in todo} == {"recommended", ""}
    done = rs + [_rec("m", SYNC, 10.0, "recommended", 1), _rec("m", ONE, 10.0, rnd=1)]
    merged = {m.settings.with_(name=""): m for m in merge_settings(done)}
    # By round: ours (13.05 in round 0, 10 in round 1), the best (12.6, 10).
    assert merged[SYNC].median == pytest.approx((13.05e6 + 10e6) / 2)
    assert merged[ONE].median == pytest.approx((12.6e6 + 10e6) / 2)
    assert merged[SYNC].round_medians == pytest.approx((13.05e6, 10e6))
    (m,) = summarize_run(done)["models"]
    # Paired by round: 13.05 / 12.6 in round 0, 10 / 10 in round 1, their
    # median (geometric mean) less 1: 1.8 %. By process the figures were 13 ms
    # against 11.3, a 15 % regret of drift alone.
    assert m["regret"]["recommended"] == pytest.approx(math.sqrt(13.05 / 12.6) - 1)
    assert m["regret"]["recommended"] < 0.03
    assert confirmations(done, rounds=1) == []
