"""The OpenMP wait policy as a recommender knob: region costs, the simulation,
the candidates, the choice, the measuring children and verification.

Costs are injected (``WaitCosts`` by hand) wherever a choice is checked, so
the choices are deterministic; the children and the calibration run for
real, and are checked for what they return, never for how fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pyparbench as ppb
from pyparbench import models
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.recommender import Resources, TableCostModel, candidates, predict, simulate
from pyparbench.recommender import recommend
from pyparbench.recommender import calibrate as cal_mod
from pyparbench.recommender import decision, selection, side_by_side, waitpolicy
from pyparbench.recommender.children import ChildFailed, PolicyChildren
from pyparbench.recommender.costmodel import WaitCosts, wait_key, wait_policy
from pyparbench.recommender.side_by_side import MIN_ROUNDS, Verified
from pyparbench.settings import INTEL_SPINCOUNT, Settings, preset

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

TWO = Resources(cores=2, logical=2)
SYNC2 = Settings(intra_op=2, affinity="compact")


def cores() -> int:
    return ppb.settings.allowed_cores(ppb.topology())


def costs(**extra: tuple[float, float]) -> WaitCosts:
    """Region costs at gaps 0 and 1000 ns, teams of 1 and 2: the default
    policy 100 ns back to back and 1000 after a gap; each keyword a policy's
    (back to back, after the gap) for the team of 2."""
    regions: dict[str, dict[int, tuple[float, ...]]] = {
        "default": {1: (50.0, 50.0), 2: (100.0, 1000.0)}}
    for name, two in extra.items():
        regions[name.removeprefix("spin")] = {1: (50.0, 50.0), 2: two}
    return WaitCosts(gaps=(0.0, 1000.0), regions=regions)


def chain(n: int = 3) -> Graph:
    b = GraphBuilder("chain")
    x = b.input("x", (4, 64))
    for i in range(n):
        x = b.linear(x, 64, name=f"fc{i}")
    return b.build(x)


def fan() -> Graph:
    b = GraphBuilder("fan")
    x = b.input("x", (4, 64))
    return b.build(b.concat([b.linear(x, 64, name=f"br{i}") for i in range(2)], name="join"))


# ------------------------------------------------------------- region costs


def test_wait_costs_interpolate_between_gaps_and_teams() -> None:
    w = costs(passive=(900.0, 1100.0), active=(80.0, 3000.0))
    assert w.policies == ("passive", "active") and w.teams == (1, 2)
    assert w.region_ns(None, 2, 0.0) == 100.0
    assert w.region_ns(None, 2, 500.0) == pytest.approx(550.0)  # linear between the gaps
    assert w.region_ns(None, 2, 5e6) == 1000.0  # the last gap's beyond it
    assert w.region_ns("active", 8, 0.0) == 80.0  # the largest measured team at or below
    # What a policy adds over the default's: the simulation's per-region term.
    assert w.extra_ns("passive", 2, 0.0) == pytest.approx(800.0)
    # Over the default's back to back (the op times'): a gap costs the default too.
    assert w.extra_ns("active", 2, 1000.0) == pytest.approx(2900.0)
    assert w.extra_ns(None, 2, 1000.0) == pytest.approx(900.0)
    assert w.extra_ns("passive", 1, 0.0) == 0.0  # a team of one: nothing waits
    assert w.extra_ns(None, 2, 0.0) == 0.0
    with pytest.raises(KeyError, match="'20000' was not measured"):
        w.region_ns(INTEL_SPINCOUNT, 2, 0.0)
    assert WaitCosts.from_dict(json.loads(json.dumps(w.as_dict()))) == w


def test_wait_costs_name_bad_figures() -> None:
    with pytest.raises(ValueError, match=r"start at 0 and ascend, got \(10.0, 5.0\)"):
        WaitCosts(gaps=(10.0, 5.0), regions={"default": {2: (1.0, 1.0)}})
    with pytest.raises(ValueError, match="the default policy's figures"):
        WaitCosts(gaps=(0.0,), regions={"passive": {2: (1.0,)}})
    with pytest.raises(ValueError, match=r"regions\['active'\]\[2\] must be 2 figures"):
        WaitCosts(gaps=(0.0, 1.0), regions={"default": {2: (1.0, 1.0)}, "active": {2: (1.0,)}})
    with pytest.raises(ValueError, match="got 'sometimes'"):
        WaitCosts(gaps=(0.0,), regions={"default": {2: (1.0,)}, "sometimes": {2: (1.0,)}})
    with pytest.raises(ValueError, match="team sizes of the default"):
        WaitCosts(gaps=(0.0,), regions={"default": {2: (1.0,)}, "active": {4: (1.0,)}})
    for key, policy in (("default", None), ("passive", "passive"), ("20000", 20000)):
        assert wait_policy(key) == policy and wait_key(policy) == key


# --------------------------------------------------------------- simulation


def test_the_simulation_adds_each_regions_policy_cost() -> None:
    times = {f"fc{i}": {1: 2000.0, 2: 1000.0} for i in range(3)}
    model = TableCostModel(times, wait=costs(passive=(900.0, 1100.0)))
    g = chain(3)
    base = simulate(g, SYNC2, model, TWO).latency_ns
    assert base == pytest.approx(3000.0)
    # Sync: regions back to back, each 800 ns dearer when its threads sleep at once.
    passive = simulate(g, SYNC2.with_(omp_wait="passive"), model, TWO).latency_ns
    assert passive == pytest.approx(3000.0 + 3 * 800.0)
    # A region dearer than what the team saves: the executor's thread rule
    # runs the node alone, at its one-thread time.
    dear = TableCostModel(times, wait=costs(passive=(5000.0, 5000.0)))
    sim = simulate(g, SYNC2.with_(omp_wait="passive"), dear, TWO)
    assert sim.latency_ns == pytest.approx(3 * 2000.0)
    # Never for a policy whose regions cost no more than the default's.
    cheap = TableCostModel(times, wait=costs(active=(100.0, 100.0)))
    assert simulate(g, SYNC2.with_(omp_wait="active"), cheap, TWO).latency_ns == \
        pytest.approx(3000.0)
    # A team of one waits for nothing; framework mode on the std pool has no OpenMP team.
    one = Settings(intra_op=1, affinity="compact")
    assert simulate(g, one.with_(omp_wait="passive"), model, TWO).latency_ns == \
        simulate(g, one, model, TWO).latency_ns
    std = SYNC2.with_(operator="framework", pool="std")
    assert simulate(g, std.with_(omp_wait="passive"), model, TWO).latency_ns == \
        simulate(g, std, model, TWO).latency_ns
    # Not measured: the policy is not modelled.
    plain = TableCostModel({f"fc{i}": {2: 1000.0} for i in range(3)})
    assert simulate(g, SYNC2.with_(omp_wait="passive"), plain, TWO).latency_ns == base


def test_the_gap_before_a_region_is_its_workers_idle_time() -> None:
    # Async 2x2 on a fan: br0 and br1 start at once on their workers (gap 0),
    # the join on the worker that finished first after waiting for the other.
    g = fan()
    times: dict[str | int, Any] = {"br0": {2: 1000.0}, "br1": {2: 3000.0},
                                   "join": {2: 100.0}}
    s = Settings(scheduler="async", inter_op=2, intra_op=2, affinity="compact")
    res = Resources(cores=4, logical=4)
    base = simulate(g, s, TableCostModel(times), res)
    w = costs(active=(100.0, 3000.0))  # no dearer back to back, dearer after a gap
    model = TableCostModel(times, wait=w)
    sim = simulate(g, s.with_(omp_wait="active"), model, res)
    join = next(n.id for n in g if n.name == "join")
    # The join's worker was idle since br0 ended at 1000: gap 2000 ns, past
    # the last measured gap: 3000 ns against the default's 100 back to back.
    assert sim.latency_ns == pytest.approx(base.latency_ns + 2900.0)
    assert sim.start_ns[join] == pytest.approx(base.start_ns[join])
    # The default policy's team sleeps through that gap too: 1000 - 100 ns.
    assert simulate(g, s, model, res).latency_ns == pytest.approx(base.latency_ns + 900.0)


# --------------------------------------------------------- candidates, choice


def test_wait_variants_are_candidates_where_a_team_waits() -> None:
    g = chain(2)
    plain = TableCostModel({}, default_ns=1000.0)
    assert all(s.omp_wait is None for s in candidates(g, plain, TWO))
    wait = costs(passive=(900.0, 1100.0), spin20000=(100.0, 500.0))
    model = TableCostModel({}, default_ns=1000.0, wait=wait)
    got = candidates(g, model, TWO)
    variants = [s for s in got if s.omp_wait is not None]
    assert variants
    # Only settings whose ops run on an OpenMP team of two or more.
    assert all(s.intra_op > 1 and (s.operator == "library" or s.pool == "openmp")
               for s in variants)
    bases = {s.with_(omp_wait=None) for s in variants}
    assert {s.omp_wait for s in variants if s.with_(omp_wait=None) == SYNC2} == {
        "passive", INTEL_SPINCOUNT}
    assert bases <= set(got)
    assert waitpolicy.wait_variants(Settings(intra_op=1), ("passive",)) == []


def _preds(settings_ns: list[tuple[Settings, float]]) -> list[Any]:
    model = TableCostModel({"fc0": {1: 1.0, 2: 1.0}})
    g = chain(1)
    out = []
    for s, ns in settings_ns:
        p = predict(g, s, model, TWO)
        out.append(type(p)(s, ns, p.instance_batch, p.samples, p.simulation))
    return out


def test_another_wait_policy_needs_a_clear_predicted_gain() -> None:
    close = _preds([(SYNC2, 100.0),
                    (SYNC2.with_(omp_wait=INTEL_SPINCOUNT), 100.0 / (1 + selection.WAIT_MARGIN / 2))])
    assert selection.choose(close, "latency").settings == SYNC2
    clear = _preds([(SYNC2, 100.0),
                    (SYNC2.with_(omp_wait="passive"), 100.0 / (1 + 2 * selection.WAIT_MARGIN))])
    assert selection.choose(clear, "latency").settings.omp_wait == "passive"
    # Ties go to libgomp's default policy.
    tie = _preds([(SYNC2.with_(omp_wait="active"), 100.0), (SYNC2, 100.0)])
    assert selection.choose(tie, "latency").settings == SYNC2


def test_verification_adds_the_wait_variants_and_the_presets_differing_by_spin() -> None:
    one = Settings(intra_op=1, affinity="compact")
    async2 = Settings(scheduler="async", inter_op=2, intra_op=1, affinity="compact")
    known = [SYNC2, one, async2, *(SYNC2.with_(omp_wait=p)
                                   for p in ("passive", INTEL_SPINCOUNT, "active"))]
    intel = Settings(intra_op=2, affinity="compact", omp_wait=INTEL_SPINCOUNT, name="intel")
    policies = (None, "passive", INTEL_SPINCOUNT, "active")
    got = waitpolicy.to_verify([SYNC2, one], known, [intel], policies)
    # Intel's preset is the 20000 variant of SYNC2: measured once, as a variant.
    assert got == [SYNC2.with_(omp_wait=p) for p in ("passive", INTEL_SPINCOUNT, "active")]
    # No wait costs measured: Intel's preset, which differs only by spin, still is.
    assert waitpolicy.to_verify([SYNC2, one], [SYNC2, one], [intel], ()) == [intel]
    # A preset whose threads never wait (one per team) is not.
    lone = one.with_(omp_wait=INTEL_SPINCOUNT, name="intel")
    assert waitpolicy.to_verify([one, async2], known, [lone], policies) == []
    assert waitpolicy.spin_only(intel, SYNC2) and not waitpolicy.spin_only(intel, one)
    assert not waitpolicy.spin_only(intel, intel.with_(name="x"))


def _mlp_predictions() -> tuple[Graph, list[Any], Any, Settings]:
    """mlp-512 b1 with a 20,000 spin predicted cheaper: the graph, every
    candidate's prediction, SYNC2's, and Intel's preset on two cores."""
    g = models.build("mlp-512", 1)
    model = TableCostModel({}, default_ns=1000.0, wait=costs(spin20000=(100.0, 500.0)))
    preds = [predict(g, s, model, TWO) for s in candidates(g, model, TWO)]
    best = next(p for p in preds if p.settings == SYNC2)
    return g, preds, best, preset("intel", ppb.topology("package:1 core:2 pu:1"))


def test_verified_takes_a_measured_faster_wait_variant(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    g, preds, best, intel = _mlp_predictions()
    asked: list[list[Settings]] = []

    def fake(name: str, runs: list[tuple[Settings, int]], budget_ns: float = 0.0
             ) -> list[Verified]:
        asked.append([s for s, _ in runs])
        assert name == "mlp-512" and all(b == 1 for _, b in runs)
        return [Verified(s, 80.0 if s.omp_wait == INTEL_SPINCOUNT else 100.0, 3,
                         (80.0,) * 3 if s.omp_wait == INTEL_SPINCOUNT else (100.0,) * 3)
                for s, _ in runs]

    monkeypatch.setattr(selection, "measure_variants", fake)
    calibration: dict[str, Any] = {}
    win, why = selection.verified(best, preds, {1: g}, "latency", 2, calibration,
                                  presets=[intel], policies=(None, INTEL_SPINCOUNT))
    assert SYNC2.with_(omp_wait=INTEL_SPINCOUNT) in asked[0]
    assert win.settings == SYNC2.with_(omp_wait=INTEL_SPINCOUNT) and not win.settings.name
    assert "each wait policy in its own process" in why and "is taken" in why
    assert len(calibration["verified"]) == len(asked[0])

    def broken(*args: object, **kw: object) -> list[Verified]:
        raise ChildFailed("the measuring child of omp_wait=20000: the child died of SIGKILL")

    monkeypatch.setattr(selection, "measure_variants", broken)
    monkeypatch.setattr(side_by_side, "measure_whole",
                        lambda settings, graphs_of, budget_ns=0.0: [
                            Verified(s, 100.0, 2, (100.0, 100.0)) for s in settings])
    win, why = selection.verified(best, preds, {1: g}, "latency", 2, {},
                                  presets=[intel], policies=(None, INTEL_SPINCOUNT))
    assert win.settings.omp_wait is None and "could not be measured" in why


def _measured(per_round: dict[Settings, tuple[float, ...]]) -> list[Verified]:
    return [Verified(s, sorted(v)[len(v) // 2], len(v), v) for s, v in per_round.items()]


def test_spin_length_orders_the_policies_and_names_a_bad_one() -> None:
    order = ["passive", INTEL_SPINCOUNT, None, "active"]
    assert sorted(order, key=waitpolicy.spin_length) == order
    assert waitpolicy.spin_length(None) == waitpolicy.DEFAULT_SPINCOUNT
    with pytest.raises(ValueError, match="'sometimes'"):
        waitpolicy.spin_length("sometimes")


def test_a_shorter_spin_measured_alike_is_taken_a_slower_one_is_not() -> None:
    def ns(v: Verified) -> float:
        return v.ns

    short = SYNC2.with_(omp_wait=INTEL_SPINCOUNT)
    shorter = SYNC2.with_(omp_wait="passive")
    longer = SYNC2.with_(omp_wait="active")
    tie = 1 + waitpolicy.SPIN_TIE
    # Within SPIN_TIE (slower in every round by half of it): the shorter spin.
    alike = _measured({SYNC2: (100.0, 101.0, 99.0),
                       short: (100.0 * (1 + waitpolicy.SPIN_TIE / 2),) * 3})
    assert waitpolicy.shorter_spin(SYNC2, alike, ns, False) == short
    # Twice SPIN_TIE slower: the choice stays; so does it for a longer spin.
    slower = _measured({SYNC2: (100.0,) * 3, short: (100.0 * tie * tie,) * 3,
                        longer: (90.0,) * 3})
    assert waitpolicy.shorter_spin(SYNC2, slower, ns, False) == SYNC2
    # Of two shorter spins within the tie, the faster; per-round ratios decide
    # (a slow round that hit both sides cancels).
    shortest = SYNC2.with_(omp_wait=1000)
    both = _measured({SYNC2: (100.0, 200.0, 100.0), short: (100.5, 201.0, 100.5),
                      shortest: (99.9, 199.8, 99.9)})
    assert waitpolicy.shorter_spin(SYNC2, both, ns, False) == shortest
    # Passive, which sleeps at once and pays a wake on every region, is not a
    # shorter spin: measured alike, the choice stays (or a spin is taken).
    asleep = _measured({SYNC2: (100.0,) * 3, shorter: (99.0,) * 3})
    assert waitpolicy.shorter_spin(SYNC2, asleep, ns, False) == SYNC2
    asleep = _measured({SYNC2: (100.0,) * 3, shorter: (98.0,) * 3, short: (100.5,) * 3})
    assert waitpolicy.shorter_spin(SYNC2, asleep, ns, False) == short
    # Throughput (higher is better) reads the ratio the other way round.
    assert waitpolicy.shorter_spin(SYNC2, slower, lambda v: 1e9 / v.ns, True) == SYNC2
    assert waitpolicy.shorter_spin(SYNC2, alike, lambda v: 1e9 / v.ns, True) == short
    # No team waits (one thread), a setting not measured, another setting: no change.
    one = Settings(intra_op=1, affinity="compact")
    assert waitpolicy.shorter_spin(one, _measured({one: (100.0,), one.with_(
        omp_wait="passive"): (90.0,)}), ns, False) == one
    assert waitpolicy.shorter_spin(SYNC2, _measured({short: (90.0,)}), ns, False) == SYNC2
    other = Settings(scheduler="async", inter_op=2, affinity="compact", omp_wait="passive")
    assert waitpolicy.shorter_spin(SYNC2, _measured({SYNC2: (100.0,), other: (90.0,)}),
                                   ns, False) == SYNC2


def test_a_wait_variant_predicted_far_slower_is_not_measured(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    g = models.build("mlp-512", 1)
    # Passive predicted far dearer per region (its nodes then run alone, at
    # twice the time: beyond decision.MARGIN for the whole run), 20,000 alike.
    model = TableCostModel({n.name: (lambda t: 2000.0 / t) for n in g.nodes},
                           wait=costs(passive=(1e6, 1e6), spin20000=(100.0, 1000.0)))
    preds = [predict(g, s, model, TWO) for s in candidates(g, model, TWO)]
    best = next(p for p in preds if p.settings == SYNC2)
    passive = next(p for p in preds if p.settings == SYNC2.with_(omp_wait="passive"))
    assert passive.latency_ns > best.latency_ns * (1 + decision.MARGIN)
    asked: list[Settings] = []

    def fake(name: str, runs: list[tuple[Settings, int]], budget_ns: float = 0.0
             ) -> list[Verified]:
        asked.extend(s for s, _ in runs)
        return [Verified(s, 50.0 if s.omp_wait == "passive" else 100.0, 3,
                         (50.0 if s.omp_wait == "passive" else 100.0,) * 3) for s, _ in runs]

    monkeypatch.setattr(selection, "measure_variants", fake)
    win, _ = selection.verified(best, preds, {1: g}, "latency", 2, {},
                                policies=(None, "passive", INTEL_SPINCOUNT))
    assert SYNC2.with_(omp_wait=INTEL_SPINCOUNT) in asked
    assert SYNC2.with_(omp_wait="passive") not in asked and win.settings.omp_wait != "passive"


def test_verified_takes_intels_spin_where_it_measures_alike(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    g, preds, best, intel = _mlp_predictions()

    def fake(name: str, runs: list[tuple[Settings, int]], budget_ns: float = 0.0
             ) -> list[Verified]:
        slow = {None: 100.0, INTEL_SPINCOUNT: 100.4}  # alike: within SPIN_TIE
        return [Verified(s, slow.get(s.omp_wait, 150.0), 3, (slow.get(s.omp_wait, 150.0),) * 3)
                for s, _ in runs]

    monkeypatch.setattr(selection, "measure_variants", fake)
    win, why = selection.verified(best, preds, {1: g}, "latency", 2, {},
                                  presets=[intel], policies=(None, INTEL_SPINCOUNT, "active"))
    assert win.settings == SYNC2.with_(omp_wait=INTEL_SPINCOUNT) and not win.settings.name
    assert "predicted choice is kept" in why and "then its shorter spin" in why


# ------------------------------------------------------- children, for real


def test_each_child_runs_under_its_own_policy_and_failures_are_named() -> None:
    with PolicyChildren([None, "passive", INTEL_SPINCOUNT]) as kids:
        env = kids.ask_all({"default": {"do": "env"}, "passive": {"do": "env"},
                            "20000": {"do": "env"}})
        assert env["default"].env == {}
        assert env["passive"].env == {"OMP_WAIT_POLICY": "passive"}
        assert env["20000"].env == {"GOMP_SPINCOUNT": "20000"}
        got = kids.ask("passive", {"do": "gaps", "threads": [1], "gaps": [0.0, 1e4]})
        assert len(got.regions["1"]) == 2 and min(got.regions["1"]) > 0 and got.cpu_s > 0
        with pytest.raises(ChildFailed, match="omp_wait=passive: ValueError: gap_ns"):
            kids.ask("passive", {"do": "gaps", "threads": [1], "gaps": [-1.0]})
        with pytest.raises(ChildFailed, match="unknown request 'dance'"):
            kids.ask(None, {"do": "dance"})
        # A child that died is said to have, with how.
        proc = kids._sessions["20000"].proc
        proc.kill()
        proc.wait()
        with pytest.raises(ChildFailed, match="omp_wait=20000: the child died of SIGKILL"):
            kids.ask(INTEL_SPINCOUNT, {"do": "env"})


def test_measure_wait_gives_every_policy_team_and_gap() -> None:
    teams = (1, 2) if cores() >= 2 else (1,)
    w = waitpolicy.measure_wait(teams, gaps=(0.0, 1e4), rounds=1)
    assert set(w.policies) == {"passive", INTEL_SPINCOUNT, "active"}
    assert w.teams == teams and w.gaps == (0.0, 1e4)
    assert all(v > 0 for teams_ in w.regions.values() for ns in teams_.values() for v in ns)
    assert 0.0 <= w.load <= 1.0
    for bad, match in (((), "team sizes"), ((0,), "team sizes"), ((1,), "rounds")):
        with pytest.raises(ValueError, match=match):
            waitpolicy.measure_wait(bad, rounds=0 if bad == (1,) else 1)
    with pytest.raises(ValueError, match="default policy"):
        waitpolicy.measure_wait((1,), policies=("passive",))


def test_measure_variants_measures_each_policy_in_turn(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    if cores() < 2:
        pytest.skip("a team of two needs two cores")
    runs = [(SYNC2, 1), (SYNC2.with_(omp_wait="passive"), 1),
            (Settings(intra_op=1, affinity="compact"), 1)]
    # Every request but the imports goes to one child at a time: a child
    # that loads its model beside another may stay slow (see measure_variants).
    together: list[list[str]] = []
    ask_all = PolicyChildren.ask_all

    def spy(self: PolicyChildren, requests: Any) -> Any:
        together.append(sorted({str(r["do"]) for r in requests.values()})
                        if len(requests) > 1 else [])
        return ask_all(self, requests)

    monkeypatch.setattr(PolicyChildren, "ask_all", spy)
    got = waitpolicy.measure_variants("mlp-512", runs, budget_ns=2e8)
    assert together and not any({"load", "round"} & set(dos) for dos in together)
    assert [v.settings for v in got] == [s for s, _ in runs]
    assert all(v.ns > 0 and v.rounds >= MIN_ROUNDS and len(v.per_round) == v.rounds
               for v in got)
    with pytest.raises(ChildFailed, match="unknown model"):
        waitpolicy.measure_variants("alexnet", runs[:1], budget_ns=1e8)


# ------------------------------------------------ calibration and recommend


def test_the_wait_costs_are_calibrated_once_and_cached(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    g = chain(2)
    # A team of one only: no thread waits, nothing to measure.
    one = cal_mod.calibrate(g, threads=(1,), operators=("library",), directory=tmp_path)
    assert one.wait is None and "wait policies" not in one.measured
    if cores() < 2:
        pytest.skip("a team of two needs two cores")
    asked: list[tuple[int, ...]] = []
    fixed = costs(passive=(900.0, 1100.0))

    def measure(teams: tuple[int, ...]) -> WaitCosts:
        asked.append(teams)
        return fixed

    monkeypatch.setattr(cal_mod, "measure_wait", measure)
    first = cal_mod.calibrate(g, threads=(1, 2), operators=("library",), directory=tmp_path)
    assert asked == [(1, 2)] and "wait policies" in first.measured
    assert first.model().wait == fixed
    again = cal_mod.calibrate(g, threads=(1, 2), operators=("library",), directory=tmp_path,
                              retry_disturbed=False)
    assert asked == [(1, 2)] and again.wait == fixed  # from the cache file
    # A child that cannot measure leaves the costs out, and says why.

    def fail(teams: tuple[int, ...]) -> WaitCosts:
        raise ChildFailed("the measuring child of omp_wait=active: timed out after 1 s")

    monkeypatch.setattr(cal_mod, "measure_wait", fail)
    off = cal_mod.calibrate(g, threads=(1, 2), operators=("library",), directory=tmp_path,
                            recalibrate=True)
    assert "timed out" in off.wait_error


def test_recommend_explains_the_wait_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    if cores() < 2:
        pytest.skip("a team of two needs two cores")
    monkeypatch.setattr(cal_mod, "measure_wait",
                        lambda teams: costs(passive=(9000.0, 9000.0),
                                            spin20000=(100.0, 500.0)))
    rec = recommend(models.build("mlp-512", 1), cache_dir=tmp_path, verify=0)
    text = "\n".join(rec.reasons)
    assert "OpenMP wait policy, measured each in its own process" in text
    if rec.settings.intra_op > 1:
        assert "wait policy of the chosen setting" in text and "passive" in text
    else:
        assert "changes nothing for the chosen setting" in text
    assert "omp_wait=" in rec.format()
    # Without a calibration on this machine the policy is not modelled, and says so.
    analytic = recommend(models.build("mlp-512", 1), calibrate=False)
    assert any("not modelled" in r for r in analytic.reasons)
