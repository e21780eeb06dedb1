"""The per-node thread rule: each node's thread count, chosen when the plan
is prepared from the node's work and the calibrated cost of a team, shown
per node in traces and audits, and the results it gives at several thread
counts against the float64 reference."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from _support import RTOL, assert_close, needs_cores, rand
from pyparbench._core import graph as _g
from pyparbench.executor import compile_graph, resolve
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings
from pyparbench.threading import NodeThreads


def mixed_graph(batch: int = 64) -> Graph:
    """A product big enough for any machine's team beside tiny glue ops."""
    b = GraphBuilder("mixed", seed=0)
    x = b.input("x", (batch, 512))
    t = b.input("t", (1, 16))
    big = b.linear(x, 512, name="big")
    act = b.eltwise(big, "gelu", name="act")
    norm = b.layer_norm(act, name="norm")
    tiny = b.eltwise(t, "tanh", name="tiny")
    tiny2 = b.add(tiny, t, relu=True, name="tiny_add")
    probs = b.softmax(b.mul(tiny2, t, name="tiny_mul"), name="tiny_softmax")
    return b.build([norm, probs])


def inputs_of(g: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {g[i].name: rand(rng, *g[i].shape) for i in g.inputs}


def by_name(threads: list[NodeThreads]) -> dict[str, NodeThreads]:
    return {t.name: t for t in threads}


def _skip_if_teams_are_dear(big: NodeThreads) -> None:
    """The team's cost is measured in this process (a median of fork-joins):
    on a machine whose cores other work holds, it reads milliseconds, and
    the rule rightly runs even the big product alone."""
    if big.work_ns < big.threshold_ns:
        pytest.skip(f"a 2-thread team measured {big.team_ns / 1e3:.0f} us to start and join "
                    f"(a loaded machine), above what 'big' ({big.work_ns / 1e3:.0f} us) would "
                    "save: nothing to tell apart")


def test_tiny_nodes_run_alone_and_a_big_product_on_the_team() -> None:
    cg = compile_graph(mixed_graph())
    got = by_name(cg.node_threads(Settings(intra_op=2, graph_opt="none")))
    _skip_if_teams_are_dear(got["big"])
    assert got["big"].threads == 2 and not got["big"].alone
    assert got["big"].work_ns >= got["big"].threshold_ns > 0
    assert ">=" in got["big"].reason
    for name in ("tiny", "tiny_add", "tiny_mul", "tiny_softmax"):
        t = got[name]
        assert t.alone and t.threads == 1 and t.requested == 2, t
        assert 0 < t.work_ns < t.threshold_ns
        # The calibrated break-even of a team of 2: twice its cost.
        assert t.threshold_ns == pytest.approx(2 * t.team_ns)
        assert "< the break-even of a 2-thread team" in t.reason
    assert got["x"].reason == "computes nothing" and got["x"].threads == 0
    assert all(t.threads == (t.op != "input") and not t.alone
               for t in cg.node_threads(Settings(graph_opt="none")))


def test_a_big_node_alone_keeps_its_library_kernel() -> None:
    b = GraphBuilder("sizes", seed=0)
    small = b.eltwise(b.input("s", (1, 64)), "relu", name="small")
    big = b.eltwise(b.input("b", (256, 4096)), "relu", name="big")
    cg = compile_graph(b.build([small, big]))
    rec = cg.run(Settings(graph_opt="none"), repeats=1, warmup=0, trace=True)
    kernels = {e.name: e.kernel for e in rec.trace}
    assert kernels["small"].startswith("direct:") and kernels["big"] == ""
    work = by_name(rec.node_threads)
    assert work["big"].work_ns > 20_000 > work["small"].work_ns


def test_the_threshold_can_be_set_or_the_rule_turned_off() -> None:
    cg = compile_graph(mixed_graph())
    s = Settings(intra_op=2, graph_opt="none")
    off = cg.node_threads(s, alone_below_ns=0)
    assert all(t.threads == 2 for t in off if t.op != "input")
    assert all(t.reason == "the per-node rule is off" for t in off if t.op != "input")
    every = cg.node_threads(s, alone_below_ns=1e15)
    assert all(t.alone and "the threshold set, " in t.reason for t in every if t.op != "input")
    tiny = by_name(every)["tiny"].work_ns
    between = by_name(cg.node_threads(s, alone_below_ns=tiny * 1.5))
    assert between["tiny"].alone and not between["big"].alone
    # In framework mode a node that runs alone is one block (inputs: none).
    fw = s.with_(operator="framework")
    assert cg.blocks(fw, alone_below_ns=1e15) == [0 if t.op == "input" else 1 for t in every]
    assert cg.blocks(fw, alone_below_ns=0)[by_name(every)["big"].node] == 2


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("alone_below_ns", [None, 0.0, 50.0, 1e15])
@pytest.mark.parametrize("settings", [
    Settings(graph_opt="none"), Settings(), Settings(operator="framework", pool="std"),
    Settings(scheduler="async", inter_op=2, graph_opt="none")])
def test_results_at_several_thread_counts(threads: int, alone_below_ns: float | None,
                                          settings: Settings) -> None:
    g = mixed_graph(batch=8)
    x = inputs_of(g, seed=threads)
    want = reference_forward(g, x)
    cg = compile_graph(g)
    cg.set_inputs(x)
    rec = cg.run(settings.with_(intra_op=threads), repeats=2, warmup=0, trace=True,
                 alone_below_ns=alone_below_ns)
    got = cg.outputs()
    for k in want:
        assert_close(got[k], want[k], 50 * RTOL)
    # Every traced node ran on the threads the rule gave it.
    assert {e.node: e.threads for e in rec.trace} == {
        t.node: t.threads for t in rec.node_threads}


@needs_cores(2)  # a team of 2 pinned compact
def test_the_trace_and_the_audit_say_which_nodes_ran_alone() -> None:
    cg = compile_graph(mixed_graph())
    s = Settings(intra_op=2, graph_opt="none", affinity="compact")
    _skip_if_teams_are_dear(by_name(cg.node_threads(s))["big"])
    rec = cg.run(s, repeats=2, trace=True, audit=True, strict=True)
    assert rec.audit is not None and rec.mismatches == []
    alone = {n.name for n in rec.audit.alone}
    assert {"tiny", "tiny_add", "tiny_mul", "tiny_softmax"} <= alone and "big" not in alone
    lines = rec.audit.describe_alone()
    assert any(line.startswith("node ") and "'tiny' (eltwise) ran alone: work est." in line
               for line in lines)
    events = {e.name: e for e in rec.trace}
    assert events["tiny"].threads == 1 and events["big"].threads == 2
    assert events["tiny"].kernel.startswith("direct:")
    chrome = rec.chrome_trace()
    args = {e["name"]: e["args"] for e in chrome["traceEvents"] if e["ph"] == "X"}
    assert args["tiny"]["threads"] == 1 and args["big"]["threads"] == 2


@needs_cores(2)  # a team of 2 pinned compact
def test_a_plan_whose_nodes_all_run_alone_reports_a_team_of_one() -> None:
    cg = compile_graph(mixed_graph(batch=2))
    s = Settings(intra_op=2, graph_opt="none", affinity="compact")
    rec = cg.run(s, repeats=2, audit=True, strict=True, alone_below_ns=1e15)
    assert rec.audit is not None and rec.mismatches == []
    assert {r.omp_team_size for r in rec.audit.threads} == {1}
    assert len(rec.audit.alone) == len([n for n in cg.optimized(s).nodes if n.op != "input"])
    # With the rule off, the same plan runs every node on its team of 2.
    rec = cg.run(s, repeats=2, audit=True, strict=True, alone_below_ns=0)
    assert rec.audit is not None and rec.audit.alone == ()
    assert {r.omp_team_size for r in rec.audit.threads} == {2}


def test_a_node_alone_in_a_cpp_loop() -> None:
    cg = compile_graph(mixed_graph(batch=2))
    s = Settings(intra_op=2, graph_opt="none")
    cg.run(s, repeats=1, warmup=0)
    v = cg._variant(s)
    native = resolve(s, v.graph)
    tiny = v.graph["tiny"].id
    ns = v.plan.time_node(native, tiny, repeats=5, warmup=1, inner=50)
    assert len(ns) == 5 and all(t > 0 for t in ns)
    with pytest.raises(ValueError, match="node 'x' \\(input\\) computes nothing"):
        v.plan.time_node(native, v.graph["x"].id)
    with pytest.raises(IndexError, match="node 99 is not one of the plan's"):
        v.plan.time_node(native, 99)
    with pytest.raises(ValueError, match="inner must be >= 1, got 0"):
        v.plan.time_node(native, tiny, inner=0)


def test_the_calibration_is_reported() -> None:
    rates = _g.work_rates()
    assert rates["ns_per_byte"] > 0 and rates["ns_per_flop"] > 0
    assert _g.team_cost_ns("library", "openmp", 1) == 0.0
    assert _g.team_cost_ns("library", "openmp", 2) > 0
    assert _g.team_cost_ns("framework", "std", 2) > 0
    with pytest.raises(ValueError, match="got 'mkl'"):
        _g.team_cost_ns("library", "mkl", 2)
    with pytest.raises(ValueError, match="threads must be"):
        _g.team_cost_ns("library", "openmp", 0)


def test_bad_thresholds_are_named() -> None:
    cg = compile_graph(mixed_graph(batch=2))
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match=f"alone_below_ns must be .*, got {bad}"):
            cg.run(Settings(intra_op=2), repeats=1, alone_below_ns=bad)
    s = _g.ExecSettings()
    s.alone_below_ns = math.nan
    with pytest.raises(ValueError, match="alone_below_ns must be a finite number of ns, got nan"):
        cg._plan.run(s, repeats=1)


def test_no_warning_from_an_audited_run_with_lone_nodes() -> None:
    cg = compile_graph(mixed_graph(batch=2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rec = cg.run(Settings(intra_op=2, graph_opt="none"), repeats=1, audit=True)
    assert rec.mismatches == []
