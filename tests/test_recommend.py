"""The thread-setting recommender: simulation, choices, analytic model, calibration.

Most tests inject op times (``TableCostModel``) so the choices are
deterministic; the last ones calibrate small models on this machine and
check the recommendation against settings measured side by side.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pyparbench as ppb
from pyparbench import models
from pyparbench.executor import compile_graph
from pyparbench.frameworks import dispatch_graph
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.recommender import (
    FRAMEWORK_MARGIN,
    ExecutorCosts,
    Resources,
    TableCostModel,
    candidates,
    predict,
    recommend,
    simulate,
)
from pyparbench.recommender import calibrate as cal_mod
from pyparbench.recommender.costmodel import (
    AnalyticCostModel,
    interpolate_threads,
    op_key,
)
from pyparbench.settings import Settings

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

EIGHT = "package:1 core:8 pu:1"


def chain(n: int = 5, width: int = 64) -> Graph:
    b = GraphBuilder("chain")
    x = b.input("x", (4, width))
    for i in range(n):
        x = b.linear(x, width, name=f"fc{i}")
    return b.build(x)


def branches(k: int = 4) -> Graph:
    b = GraphBuilder("branches")
    x = b.input("x", (4, 64))
    ys = [b.linear(x, 64, name=f"br{i}") for i in range(k)]
    return b.build(b.concat(ys, name="join"))


def diamond() -> Graph:
    b = GraphBuilder("diamond")
    x = b.input("x", (2, 8))
    a = b.linear(x, 8, name="a")
    left = b.linear(a, 8, name="b")
    right = b.linear(a, 8, name="c")
    return b.build(b.add(left, right, name="d"))


# ------------------------------------------------------------- simulation


def test_simulated_latency_equals_the_hand_computation() -> None:
    g = diamond()
    model = TableCostModel({"a": {1: 10.0}, "b": {1: 30.0}, "c": {1: 20.0}, "d": {1: 5.0}},
                           executor=ExecutorCosts(async_node_ns=((1, 1.0), (2, 1.0))))
    res = Resources(cores=2, logical=2)
    sync = simulate(g, Settings(), model, res)
    assert sync.latency_ns == pytest.approx(65.0)  # 10 + 30 + 20 + 5, no per-node cost
    two = simulate(g, Settings(scheduler="async", inter_op=2), model, res)
    # x: [0, 1]; a: [1, 12]; b on one worker [12, 43], c on the other [12, 33]; d: [43, 49]
    assert two.latency_ns == pytest.approx(49.0)
    ids = {n.name: n.id for n in g}
    assert two.start_ns[ids["b"]] == pytest.approx(12.0)
    assert two.end_ns[ids["c"]] == pytest.approx(33.0)
    assert two.worker[ids["b"]] != two.worker[ids["c"]]
    assert two.start_ns[ids["d"]] == pytest.approx(43.0)


def test_serialised_dispatch_and_corun_are_hand_computable() -> None:
    g = diamond()
    ex = ExecutorCosts(async_node_ns=((1, 1.0), (2, 1.0)), async_serial_ns=((1, 0.0), (2, 2.0)))
    model = TableCostModel({"a": {1: 10.0}, "b": {1: 30.0}, "c": {1: 20.0}, "d": {1: 5.0}},
                           executor=ex)
    res = Resources(cores=2, logical=2)
    s = Settings(scheduler="async", inter_op=2)
    # x: lock [0, 2] + 1 -> 3; a: lock [3, 5] + 1 + 10 -> 16; b: lock [16, 18] + 1 + 30
    # -> 49; c waits for the lock: [18, 20] + 1 + 20 -> 41; d: lock [49, 51] + 1 + 5 -> 57
    assert simulate(g, s, model, res).latency_ns == pytest.approx(57.0)
    # Two equal ops at once on two cores, each slowed by half while the other runs.
    both = TableCostModel({"b": {1: 10.0}, "c": {1: 10.0}},
                          executor=ExecutorCosts(corun_compute=0.5, corun_memory=0.5))
    assert simulate(g, s, both, res).latency_ns == pytest.approx(15.0)


def test_oversubscription_stretches_ops_and_adds_the_node_penalty() -> None:
    g = chain(2)
    model = TableCostModel({"fc0": {1: 100.0, 2: 50.0}, "fc1": {1: 100.0, 2: 50.0}},
                           executor=ExecutorCosts(oversub_node_ns=7.0))
    res = Resources(cores=2, logical=2)
    fits = simulate(g, Settings(intra_op=2, affinity="compact"), model, res)
    assert fits.latency_ns == pytest.approx(100.0)
    # A team of 4 threads on 2 CPUs owns the 2 cores (the 2-thread time) and
    # pays 7 ns x (4 / 2 - 1) per node; two teams of 2 (async 2x2) own one
    # core each (the 1-thread time).
    over = simulate(g, Settings(intra_op=4, affinity="compact"), model, res)
    assert over.latency_ns == pytest.approx(2 * (50.0 + 7.0))
    two = simulate(g, Settings(scheduler="async", inter_op=2, intra_op=2, affinity="compact"),
                   model, res)
    assert two.latency_ns == pytest.approx(2 * (100.0 + 7.0))


class _InstanceTable(TableCostModel):
    """A table model with a measured co-run factor for 2 instances."""

    def instance_factor(self, graph: Graph, instances: int) -> float | None:
        return 1.25 if instances == 2 else None


def test_a_measured_instance_factor_replaces_the_corun_penalty() -> None:
    g = chain(2)
    times = {"fc0": {1: 100.0}, "fc1": {1: 60.0}}
    res = Resources(cores=2, logical=2)
    two = Settings(instances=2, affinity="compact")
    # Without a measured factor, the other instance's thread makes every op
    # co-run with a busy core: x (1 + 0.5), memory-bound or not.
    costs = ExecutorCosts(corun_compute=0.5, corun_memory=0.5)
    penalised = TableCostModel(times, executor=costs)
    assert simulate(g, two, penalised, res).latency_ns == pytest.approx(160.0 * 1.5)
    # With one, the instance runs as if alone, scaled by it.
    measured = _InstanceTable(times, executor=costs)
    sim = simulate(g, two, measured, res)
    assert sim.latency_ns == pytest.approx(160.0 * 1.25)
    assert sim.end_ns[-1] == pytest.approx(sim.latency_ns)


def test_thread_interpolation() -> None:
    pts = {1: 100.0, 4: 25.0}
    assert interpolate_threads(pts, 2) == pytest.approx(50.0)  # power law between points
    assert interpolate_threads(pts, 8) == 25.0  # no gain beyond what was measured
    with pytest.raises(ValueError, match="no measured"):
        interpolate_threads({}, 2)


# ---------------------------------------------------------------- choices


def test_a_chain_gets_one_worker() -> None:
    g = chain()
    model = TableCostModel({f"fc{i}": (lambda t: 100.0 / t) for i in range(5)},
                           executor=ExecutorCosts(async_node_ns=((1, 1.0), (8, 1.0))))
    rec = recommend(g, EIGHT, model=model)
    assert rec.settings.inter_op == 1 and rec.settings.scheduler == "sync"
    assert rec.settings.intra_op == 8
    assert rec.model == "table"
    assert any("no parallel branches" in r for r in rec.reasons)


def test_four_equal_branches_on_eight_cores_get_four_workers_of_two() -> None:
    g = branches(4)
    # Each branch scales to 2 threads, then hardly at all.
    scaling = {1: 100.0, 2: 52.0, 4: 40.0, 8: 36.0}
    model = TableCostModel({f"br{i}": scaling for i in range(4)},
                           executor=ExecutorCosts(async_node_ns=((1, 0.5), (8, 0.5))))
    rec = recommend(g, EIGHT, model=model)
    s = rec.settings
    assert (s.scheduler, s.inter_op, s.intra_op) == ("async", 4, 2)
    assert rec.predicted.latency_ns == pytest.approx(52.0 + 0.5 * 2, rel=0.05)
    assert any("4 branches" in r for r in rec.reasons)


def test_four_branches_that_scale_perfectly_keep_one_worker() -> None:
    # The model proves otherwise: with perfect intra-op scaling the branches
    # gain nothing from running at once, and the async dispatch costs.
    g = branches(4)
    model = TableCostModel({f"br{i}": (lambda t: 800.0 / t) for i in range(4)},
                           executor=ExecutorCosts(async_node_ns=((1, 5.0), (8, 5.0))))
    rec = recommend(g, EIGHT, model=model)
    assert (rec.settings.inter_op, rec.settings.intra_op) == (1, 8)


@pytest.mark.parametrize("framework_gain, mode", [(1.01, "library"), (1.10, "framework")])
def test_framework_mode_needs_a_clear_predicted_margin(framework_gain: float, mode: str) -> None:
    g = chain()
    lib = {f"fc{i}": (lambda t: 100.0 / t) for i in range(5)}
    fw = {f"fc{i}": (lambda t, k=framework_gain: 100.0 / t / k) for i in range(5)}
    rec = recommend(g, EIGHT, model=TableCostModel(lib, framework=fw), instances=False)
    assert rec.settings.operator == mode
    assert FRAMEWORK_MARGIN == 0.03


def test_one_huge_op_gets_every_core() -> None:
    b = GraphBuilder("huge")
    x = b.input("x", (8, 256, 56, 56))
    g = b.build(b.conv2d(x, 256, 3, padding=1, name="conv"))
    model = TableCostModel({"conv": (lambda t: 1e9 / t ** 0.95)})
    rec = recommend(g, EIGHT, model=model)
    assert (rec.settings.inter_op, rec.settings.intra_op, rec.settings.instances) == (1, 8, 1)


def test_candidates_never_oversubscribe() -> None:
    g = branches(4)
    model = TableCostModel({f"br{i}": {1: 1.0} for i in range(4)})
    res = Resources(cores=6, logical=12, sockets=2)
    cands = candidates(g, model, res, instances=(1, 2, 3))
    assert cands
    assert all(s.threads <= 6 and not s.smt for s in cands)
    # Non-divisor combinations are tried too (4 workers x 1 thread on 6 cores).
    assert any(s.inter_op == 4 and s.intra_op == 1 for s in cands)
    assert all(s.scheduler == ("sync" if s.inter_op == 1 else "async") for s in cands)


def test_recommendation_reports_presets_and_serialises() -> None:
    g = branches(4)
    model = TableCostModel({f"br{i}": {1: 100.0, 2: 52.0, 8: 36.0} for i in range(4)})
    rec = recommend(g, EIGHT, model=model)
    assert set(rec.presets) == {"tensorflow", "intel", "tftuner"}
    assert rec.settings.name == "recommended"
    d = json.loads(json.dumps(rec.as_dict()))
    assert d["settings"]["inter_op"] == rec.settings.inter_op
    text = rec.format()
    for knob in ("scheduler=", "inter_op=", "intra_op=", "operator=", "library=", "pool=",
                 "affinity=", "instances=", "tftuner", "why:"):
        assert knob in text


# ----------------------------------------------------------------- analytic


@pytest.mark.parametrize("name,batch", [("googlenet", 1), ("resnet50", 8),
                                        ("dlrm-kaggle", 1), ("mlp-512", 8)])
def test_analytic_model_on_a_two_socket_server_is_sane(name: str, batch: int) -> None:
    rec = recommend(models.build(name, batch), "package:2 core:28 pu:2")
    s = rec.settings
    assert rec.model == "analytic"
    assert any("analytic" in r and "56 cores" in r for r in rec.reasons)
    assert s.threads <= 56 and not s.smt and s.affinity == "compact"
    # The tuner's setting is among the candidates: ours is never predicted worse.
    assert rec.predicted.latency_ns <= rec.presets["tftuner"].latency_ns * (1 + 1e-9)
    # TensorFlow's 112 x 112 threads on 56 cores are predicted far slower.
    assert rec.presets["tensorflow"].latency_ns > 2 * rec.predicted.latency_ns


def test_analytic_scaling_stops_for_small_ops_not_for_large() -> None:
    model = AnalyticCostModel(cores_per_socket=28)
    big = models.build("resnet50", 8)
    conv = next(n for n in big if n.op == "conv2d" and n.name.startswith("conv2"))
    assert model.op_ns(big, conv, 28) < model.op_ns(big, conv, 1) / 15
    small = models.build("dlrm-kaggle", 1)
    emb = next(n for n in small if n.op == "embedding_bag")
    assert model.op_ns(small, emb, 28) >= model.op_ns(small, emb, 1)


@pytest.mark.parametrize("operator", ["library", "framework"])
def test_analytic_model_runs_a_small_node_alone_as_the_executor_does(operator: str) -> None:
    # The executor's per-node rule: a node whose work on one core is below
    # its team's fork/join x t / (t - 1) runs alone, so more threads cost it
    # nothing; the analytic model predicts the same, and a big node scales.
    model = AnalyticCostModel(cores_per_socket=28)
    small = dispatch_graph(4)  # ReLU and tanh on (1, 16)
    tiny = [n for n in small if n.op != "input"]
    for n in tiny:
        assert all(model.op_ns(small, n, t, operator) == model.op_ns(small, n, 1, operator)
                   for t in (2, 8, 56)), n.name
    big = models.build("resnet50", 8)
    conv = next(n for n in big if n.op == "conv2d" and n.name.startswith("conv2"))
    assert model.op_ns(big, conv, 8, operator) < model.op_ns(big, conv, 1, operator) / 4


def test_no_calibrate_uses_the_analytic_model_here() -> None:
    rec = recommend(models.build("mlp-512", 1), calibrate=False)
    assert rec.model == "analytic"
    assert any("calibration turned off" in r for r in rec.reasons)
    assert rec.settings.threads <= ppb.settings.allowed_cores(ppb.topology())


def test_throughput_objective_tries_instances() -> None:
    g = chain(3)
    model = TableCostModel({f"fc{i}": {1: 100.0, 8: 90.0} for i in range(3)})
    rec = recommend(g, EIGHT, "throughput", model=model)
    # Ops that do not scale: eight instances of one thread serve 8x the samples.
    assert rec.settings.instances == 8 and rec.settings.intra_op == 1
    assert rec.predicted.throughput == pytest.approx(8 * 4 / 300e-9, rel=1e-6)


# --------------------------------------------------------------- bad input


def test_bad_input_is_a_value_error_naming_it() -> None:
    g = chain(2)
    with pytest.raises(ValueError, match="'fastest'"):
        recommend(g, objective="fastest")
    with pytest.raises(ValueError, match="'core:banana'"):
        recommend(g, topology="core:banana")
    with pytest.raises(ValueError, match="got 0"):
        recommend(models.build("mlp-512", batch=0))
    with pytest.raises(ValueError, match="got -2"):
        recommend(models.build("mlp-512", batch=-2))
    with pytest.raises(ValueError, match="'alexnet'"):
        recommend(models.build("alexnet"))
    with pytest.raises(TypeError, match="Graph"):
        recommend("mlp-512")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cores=0"):
        Resources(cores=0, logical=2)
    with pytest.raises(ValueError, match="'gpu'"):
        cal_mod.calibrate(g, operators=("gpu",))
    with pytest.raises(ValueError, match="thread counts"):
        cal_mod.calibrate(g, threads=(10_000,))


def test_cli_bad_input_exits_with_the_message() -> None:
    for args, msg in ((("--batch", "0"), "batch must be >= 1, got 0"),
                      (("--objective", "fast"), "invalid choice: 'fast'"),
                      (("--topology", "core:banana", "--no-calibrate"), "'core:banana'")):
        out = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "recommend", "mlp-512", *args],
                             check=False, capture_output=True, text=True, timeout=300)
        assert out.returncode == 2, (args, out.stderr)
        assert msg in out.stderr and "Traceback" not in out.stderr


def test_cli_json_on_a_synthetic_server() -> None:
    out = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "recommend", "googlenet",
                          "--batch", "1", "--topology", "package:2 core:28 pu:2", "--json"],
                         check=False, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["model"] == "analytic" and d["settings"]["name"] == "recommended"
    assert set(d["presets"]) == {"tensorflow", "intel", "tftuner"}
    assert d["reasons"]


# -------------------------------------------------------------- calibration


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ppb-cache")


def test_calibration_is_cached(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g = chain(3)
    first = cal_mod.calibrate(g, threads=(1,), operators=("library",), directory=cache)
    assert "executor" in first.measured and "library/onednn/-/1" in first.measured
    assert first.path is not None and first.path.exists()
    keys = {op_key(g, n) for n in g if n.op == "linear"}
    assert keys <= first.tables["library/onednn/-/1"].keys()

    def must_not_run(*args: object, **kw: object) -> None:
        raise AssertionError("measured again although the cache has everything")

    monkeypatch.setattr(cal_mod, "measure_graph", must_not_run)
    monkeypatch.setattr(cal_mod, "measure_executor", must_not_run)
    # (Figures that other processes disturbed would be measured again: a
    # busy machine must not make this check fail.)
    second = cal_mod.calibrate(g, threads=(1,), operators=("library",), directory=cache,
                               retry_disturbed=False)
    assert second.measured == []
    assert second.tables["library/onednn/-/1"] == first.tables["library/onednn/-/1"]
    # A new shape is measured; what was cached is not.
    monkeypatch.undo()
    third = cal_mod.calibrate(chain(4, width=32), threads=(1,), operators=("library",),
                              directory=cache, retry_disturbed=False)
    assert third.measured == ["library/onednn/-/1"]


def test_instance_corun_factor_is_measured_and_cached(cache: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if ppb.settings.allowed_cores(ppb.topology()) < 2:
        pytest.skip("two instances need two cores")
    g = models.build("mlp-512", 1)
    cal = cal_mod.calibrate(g, threads=(1,), operators=("library",), directory=cache,
                            instances=2)
    assert "instances x2" in cal.measured
    run = ppb.graph.passes.executed_graph(g, Settings())
    factor = cal.model().instance_factor(run, 2)
    # Two copies on their own cores: never much faster than one alone.
    assert factor is not None and 0.8 < factor < 10.0
    monkeypatch.setattr(cal_mod, "measure_instances", lambda *a, **k: pytest.fail("measured"))
    again = cal_mod.calibrate(g, threads=(1,), operators=("library",), directory=cache,
                              instances=2, retry_disturbed=False)
    assert again.model().instance_factor(run, 2) == factor
    with pytest.raises(ValueError, match="instances must be an int >= 1, got 0"):
        cal_mod.calibrate(g, threads=(1,), directory=cache, instances=0)


def conv_block() -> Graph:
    b = GraphBuilder("conv-block")
    x = b.input("x", (1, 16, 12, 12))
    for i in range(2):
        x = b.eltwise(b.batch_norm(b.conv2d(x, 16, 3, padding=1, name=f"conv{i}"),
                                   name=f"bn{i}"), "relu", name=f"act{i}")
    return b.build(x)


def test_calibration_times_the_nodes_of_the_optimised_graph(cache: Path) -> None:
    g = conv_block()
    run = ppb.graph.passes.executed_graph(g, Settings())
    # The passes fold BN and fuse the activation into each conv.
    assert len(run) < len(g) and all(n.attrs.get("activation") == "relu"
                                     for n in run if n.op == "conv2d")
    cal = cal_mod.calibrate(g, threads=(1,), operators=("library",), directory=cache,
                            retry_disturbed=False)
    table = cal.tables["library/onednn/-/1"]
    fused = {op_key(run, n) for n in run if n.op == "conv2d"}
    assert fused <= table.keys()
    assert cal.missing(g, ["library/onednn/-/1"], retry_disturbed=False) == []
    # The graph as built (graph_opt none) has other nodes, not measured yet.
    assert cal.missing(g, ["library/onednn/-/1"], retry_disturbed=False,
                       graph_opt="none") == ["library/onednn/-/1"]
    # The prediction simulates the optimised graph, node for node.
    model = cal.model()
    res = Resources(cores=1, logical=1, sockets=1)
    p = predict(g, Settings(), model, res)
    assert len(p.simulation.start_ns) == len(run)
    none = cal_mod.calibrate(g, threads=(1,), operators=("library",), directory=cache,
                             retry_disturbed=False, graph_opt="none")
    unopt = predict(g, Settings(graph_opt="none"), none.model(), res)
    assert len(unopt.simulation.start_ns) == len(g)


def test_disturbed_figures_are_measured_again_keeping_the_lower(cache: Path) -> None:
    g = chain(2, width=48)
    first = cal_mod.calibrate(g, threads=(1,), operators=("library",), directory=cache,
                              retry_disturbed=False)
    assert first.path is not None
    table = first.tables["library/onednn/-/1"]
    key = op_key(g, g["fc0"])
    # Mark the figure as disturbed and far too slow, as a busy machine leaves it.
    data = json.loads(first.path.read_text())
    data["tables"]["library/onednn/-/1"][key] = [table[key][0] * 50, 3.0, 1.0, 1.0]
    first.path.write_text(json.dumps(data))
    assert cal_mod.load_calibration(cache).missing(g, ["library/onednn/-/1"]) == [
        "library/onednn/-/1"]
    again = cal_mod.calibrate(g, threads=(1,), operators=("library",), directory=cache,
                              retry_disturbed=True)
    assert "library/onednn/-/1" in again.measured
    entry = again.tables["library/onednn/-/1"][key]
    assert entry[0] < table[key][0] * 50 and entry[3] == 2.0
    # After MAX_ATTEMPTS measurements a disturbed figure is taken as it is,
    # unless the machine is quiet now.
    entry[2], entry[3] = 1.0, float(cal_mod.MAX_ATTEMPTS)
    assert again.missing(g, ["library/onednn/-/1"]) == []
    assert again.missing(g, ["library/onednn/-/1"], quiet=lambda: False) == []
    assert again.missing(g, ["library/onednn/-/1"], quiet=lambda: True) == [
        "library/onednn/-/1"]
    assert again.disturbed(g, ["library/onednn/-/1"]) == ["library/onednn/-/1"]
    # A quiet measurement clears the mark, even when it is not the lower figure.
    assert cal_mod._merge([1.0, 3.0, 1.0, 3.0], [2.0, 3.0, 0.0, 1.0]) == [1.0, 6.0, 0.0, 4.0]
    assert cal_mod._merge([1.0, 3.0, 1.0, 1.0], [2.0, 3.0, 1.0, 1.0])[2] == 1.0


def _measure(graph: Graph, settings: list[Settings], rounds: int = 7) -> list[list[float]]:
    """Latency samples of each setting (the median of 5 runs per round),
    measured in interleaved rounds so that a disturbance hits every setting
    alike."""
    compiled = compile_graph(graph)
    for s in settings:
        compiled.run(s, repeats=2, warmup=2)
    samples: list[list[float]] = [[] for _ in settings]
    for _ in range(rounds):
        for i, s in enumerate(settings):
            samples[i].append(statistics.median(compiled.run(s, repeats=5, warmup=1).ns))
    return samples


@pytest.mark.parametrize("name", ["googlenet", "dlrm-kaggle"])
def test_calibrated_recommendation_is_not_measurably_worse_than_the_best(
        name: str, cache: Path) -> None:
    cores = ppb.settings.allowed_cores(ppb.topology())
    if cores < 2:
        pytest.skip("needs two cores to have a choice")
    graph = models.build(name, 1)
    rec = recommend(graph, cache_dir=cache)
    for _ in range(2):  # figures other processes disturbed are measured again
        if not rec.calibration["disturbed"]:
            break
        rec = recommend(graph, cache_dir=cache)
    if rec.calibration["disturbed"]:
        pytest.skip(f"other processes kept disturbing the calibration of "
                    f"{rec.calibration['disturbed']}: nothing to judge the recommender on")
    assert rec.model == "calibrated"
    ours = rec.settings.with_(name="")
    rivals = [Settings(), Settings(intra_op=cores, affinity="compact"),
              Settings(scheduler="async", inter_op=2, intra_op=cores // 2, affinity="compact"),
              Settings(intra_op=cores, operator="framework", pool="eigen", affinity="compact"),
              ppb.settings.preset("tftuner", graph=graph).with_(name="")]
    tried = [ours] + [s for s in dict.fromkeys(rivals) if s != ours]
    samples = _measure(graph, tried)
    best, noise = _best_and_noise(samples)
    if best != 0 and min(samples[0]) > min(samples[best]) * (1 + 2 * noise):
        # A burst of other work can hit one setting's rounds and not the
        # other's: a real loss persists when the two are measured again,
        # head to head, in more rounds.
        tried = [ours, tried[best]]
        samples = _measure(graph, tried, rounds=15)
        best, noise = _best_and_noise(samples)
    low = [min(v) for v in samples]
    assert low[0] <= low[best] * (1 + 2 * noise), (
        f"recommended {ours.label()} measured {low[0] / 1e6:.3f} ms, best "
        f"{tried[best].label()} {low[best] / 1e6:.3f} ms (noise {noise:.1%})\n"
        + rec.format())


def _best_and_noise(samples: list[list[float]]) -> tuple[int, float]:
    """The setting whose least disturbed round is fastest, and the noise: the
    larger relative spread (IQR) of its rounds and the first setting's, at
    least 5 %."""
    best = min(range(len(samples)), key=lambda i: min(samples[i]))

    def spread(v: list[float]) -> float:
        q = statistics.quantiles(v, n=4)
        return (q[2] - q[0]) / statistics.median(v)

    return best, max(0.05, spread(samples[best]), spread(samples[0]))


def test_recommended_settings_for_the_suite(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYPARBENCH_CACHE", str(cache))
    graph = models.build("mlp-512", 1)
    # ppb.recommend is the recommender's one entry point, a plain function.
    assert ppb.recommend is recommend
    rec = ppb.recommend(graph)
    s = rec.settings
    assert isinstance(s, Settings) and s.name == "recommended" and "recommended" in s.label()
    assert s.threads <= ppb.settings.allowed_cores(ppb.topology())
    assert rec.model == "calibrated"
    assert rec.calibration["path"].startswith(str(cache))


def test_verify_choice_switches_only_to_a_clearly_faster_setting() -> None:
    from pyparbench.recommender.decision import SWITCH
    from pyparbench.recommender.side_by_side import Verified, verify_choice

    a, b = Settings(intra_op=2, affinity="compact"), Settings(intra_op=1, affinity="compact")

    def ns(v: Verified) -> float:
        return v.ns

    close = [Verified(a, 100.0, 3), Verified(b, 100.0 / (1 + SWITCH / 2), 3)]
    assert verify_choice(a, close, ns, higher_is_better=False) == a
    clear = [Verified(a, 100.0, 3), Verified(b, 100.0 / (1 + 2 * SWITCH), 3)]
    assert verify_choice(a, clear, ns, higher_is_better=False) == b
    # Throughput: the higher value wins.
    assert verify_choice(a, clear, lambda v: 1e9 / v.ns, higher_is_better=True) == b
    # A choice that could not be measured stays.
    assert verify_choice(a, clear[1:], ns, higher_is_better=False) == a
    # Rounds are paired: one round in which the choice hit a slow spell does
    # not make the other setting win; a consistent lead does.
    spell = [Verified(a, 100.0, 3, (100.0, 160.0, 100.0)),
             Verified(b, 101.0, 3, (101.0, 102.0, 101.0))]
    assert verify_choice(a, spell, ns, higher_is_better=False) == a
    lead = [Verified(a, 100.0, 3, (100.0, 160.0, 110.0)),
            Verified(b, 95.0, 3, (95.0, 150.0, 100.0))]
    assert verify_choice(a, lead, ns, higher_is_better=False) == b
    # A large median gain from rounds that disagree is no lead: here the other
    # setting is faster in 3 of 5 rounds only.
    split = [Verified(a, 100.0, 5, (100.0, 130.0, 130.0, 100.0, 130.0)),
             Verified(b, 100.0, 5, (120.0, 100.0, 100.0, 120.0, 100.0))]
    assert verify_choice(a, split, ns, higher_is_better=False) == a


def test_measure_whole_runs_each_setting_and_skips_what_cannot_run() -> None:
    from pyparbench.recommender.side_by_side import MAX_ROUNDS, MIN_ROUNDS, measure_whole

    cores = ppb.settings.allowed_cores(ppb.topology())
    one = models.build("mlp-512", 2)
    halves = [models.build("mlp-512", 1) for _ in range(2)]
    settings = [Settings(intra_op=cores, affinity="compact"),
                Settings(intra_op=1, affinity="compact"),
                Settings(intra_op=1, affinity="compact", instances=2)]

    def graphs_of(s: Settings) -> list[Graph] | None:
        if s.instances == 1:
            return [one]
        return halves if cores >= 2 else None

    got = measure_whole(settings, graphs_of, budget_ns=2e8)
    assert [v.settings for v in got] == (settings if cores >= 2 else settings[:2])
    assert all(v.ns > 0 and MIN_ROUNDS <= v.rounds <= MAX_ROUNDS for v in got)
    assert measure_whole(settings, lambda s: None) == []


def test_measure_whole_warms_each_setting_up_in_every_round(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The first run of a setting after another's is cold: every round's
    # timed runs follow an untimed one, whatever the graph's length.
    from pyparbench.recommender import side_by_side as verify

    calls: list[tuple[Settings, int, int]] = []

    def fake_runner(graphs: Any) -> Any:
        def run(s: Settings, repeats: int, warmup: int) -> list[float]:
            calls.append((s, repeats, warmup))
            return [50e6 if s.intra_op == 1 else 30e6] * repeats
        return run

    monkeypatch.setattr(verify, "runner", fake_runner)
    settings = [Settings(intra_op=1), Settings(intra_op=2)]
    got = verify.measure_whole(settings, lambda s: [models.build("mlp-512", 1)], budget_ns=1e9)
    timed = calls[len(settings):]  # after each setting's estimate
    assert len(timed) == len(settings) * got[0].rounds
    assert all(warmup >= 1 for _, _, warmup in timed)
    # The budget counts the untimed runs: 1e9 / (2 x (50 + 30) ms) rounds.
    assert got[0].rounds == max(verify.MIN_ROUNDS, min(verify.MAX_ROUNDS, 6))
    assert [v.ns for v in got] == [50e6, 30e6]


def test_recommend_measures_its_best_candidates_whole(cache: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cores = ppb.settings.allowed_cores(ppb.topology())
    if cores < 2:
        pytest.skip("needs two cores to have a choice")
    # Every candidate is near enough to be measured, so three are.
    monkeypatch.setattr("pyparbench.recommender.decision.MARGIN", 100.0)
    from pyparbench.recommender import selection as sel_mod
    from pyparbench.recommender import side_by_side as verify_mod

    seen: list[list[verify_mod.Verified]] = []
    real_verify_choice = verify_mod.verify_choice

    def spy(chosen: Settings, measured: list[verify_mod.Verified], *a: Any, **k: Any) -> Settings:
        seen.append(list(measured))
        return real_verify_choice(chosen, measured, *a, **k)
    monkeypatch.setattr(sel_mod.side_by_side, "verify_choice", spy)
    graph = models.build("mlp-512", 8)
    rec = recommend(graph, cache_dir=cache)
    verified = rec.calibration.get("verified")
    # The three best predicted, and the wait variants of those whose ops run
    # on an OpenMP team (each policy in its own process).
    assert verified and len([v for v in verified if "omp_wait" not in v["label"]]) == 3
    assert all(v["ns"] > 0 and v["rounds"] >= 2 for v in verified)
    labels = [v["label"] for v in verified]
    assert rec.settings.with_(name="").label() in labels
    assert any(r.startswith("measured whole, side by side") for r in rec.reasons)
    # The measured figures decide, by the paired per-round rule (not the
    # medians over rounds, which one slow spell moves): the predicted choice
    # (measured first) is kept unless another beats it by more than SWITCH in
    # CONSISTENT of the rounds (then the one that beats it most), and of that
    # one a shorter spin measured within SPIN_TIE of it may be taken.
    from pyparbench.recommender.decision import CONSISTENT, SWITCH
    from pyparbench.recommender.side_by_side import paired_gain
    from pyparbench.recommender.waitpolicy import SPIN_TIE, spin_length, spin_only

    assert len(seen) == 1
    measured = seen[0]
    assert [v.settings.label() for v in measured] == labels
    assert all(len(v.per_round) == v.rounds for v in measured)

    def gain(a: verify_mod.Verified, b: verify_mod.Verified) -> tuple[float, float]:
        return paired_gain(a, b, lambda v: v.ns, higher_is_better=False)
    predicted = measured[0]
    beating = [(gain(predicted, o)[0], k) for k, o in enumerate(measured[1:], 1)
               if gain(predicted, o)[0] > 1 + SWITCH and gain(predicted, o)[1] >= CONSISTENT]
    faster = measured[max(beating, key=lambda g: (g[0], -g[1]))[1]] if beating else predicted
    pick = next(v for v in measured if v.settings.with_(name="") == rec.settings.with_(name=""))
    if pick is not faster:
        assert spin_only(pick.settings, faster.settings)
        assert 0 < spin_length(pick.settings.omp_wait) < spin_length(faster.settings.omp_wait)
        assert gain(faster, pick)[0] >= 1 - SPIN_TIE
    off = recommend(graph, cache_dir=cache, verify=0)
    assert "verified" not in off.calibration
    assert not any(r.startswith("measured whole") for r in off.reasons)
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="verify must be an int >= 0"):
            recommend(graph, cache_dir=cache, verify=bad)  # type: ignore[arg-type]


def test_verify_measures_openmp_and_std_pools_side_by_side_but_not_eigens() -> None:
    from pyparbench.recommender.selection import may_share_a_process as _may_share_a_process

    lib = Settings(intra_op=2)
    std = Settings(intra_op=2, operator="framework", pool="std")
    eigen = Settings(intra_op=2, operator="framework", pool="eigen")
    omp_fw = Settings(intra_op=2, operator="framework", pool="openmp")
    assert _may_share_a_process(lib, std) and _may_share_a_process(std, omp_fw)
    assert _may_share_a_process(lib, omp_fw) and _may_share_a_process(eigen, eigen)
    # Eigen's spinning workers slow another pool's runs in the same process.
    for other in (lib, std, omp_fw):
        assert not _may_share_a_process(eigen, other)
        assert not _may_share_a_process(other, eigen)
    # An eigen-pool setting in library mode runs on OpenMP's threads.
    assert _may_share_a_process(Settings(intra_op=2, pool="eigen"), lib)
