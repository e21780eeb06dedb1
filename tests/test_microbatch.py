"""The micro-batch pass: which leading nodes it cuts into micro-batches, the
values it leaves unchanged under every scheduler and library, the order it
puts the micro-batches in, and the native plan's ``slice`` view."""

from __future__ import annotations

import numpy as np
import pytest
from _support import assert_lifetimes_disjoint, node_spec

from pyparbench import executor, models
from pyparbench._core import graph as _g
from pyparbench.executor import compile_graph, team_budget_bytes
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.graph import passes
from pyparbench.graph.passes import (
    MAX_MICRO_BATCHES,
    PASSES,
    layout_nhwc,
    microbatch,
    microbatch_plan,
    optimize,
)
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings, allowed_cores
from pyparbench.threading.topology import topology

RTOL = 2e-4


def _err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))


def _mobile(batch: int = 4) -> Graph:
    """A small MobileNet-like stem (wide activations, few weights) with a
    residual block, then a wide-weight conv and a classifier; two outputs,
    one of them a value inside the stem."""
    b = GraphBuilder("mobile", seed=7)
    x = b.input("x", (batch, 3, 40, 40))
    s = b.eltwise(b.conv2d(x, 16, 3, stride=2, padding=1), "relu6")
    d = b.eltwise(b.conv2d(s, 16, 3, padding=1, groups=16), "relu6")
    p = b.conv2d(d, 8, 1)
    e = b.eltwise(b.conv2d(p, 24, 1), "relu6")
    e = b.eltwise(b.conv2d(e, 24, 3, padding=1, groups=24), "relu6")
    r = b.add(b.conv2d(e, 8, 1), p)
    w = b.eltwise(b.conv2d(r, 96, 3, stride=2, padding=1), "relu")  # 8*96*9 weights
    y = b.linear(b.global_avg_pool(w), 10)
    return b.build([b.softmax(y), r])


def _bytes(g: Graph, i: int) -> int:
    n = g[i]
    return 4 * (int(np.prod(n.shape)) + sum(int(np.prod(g[j].shape)) for j in n.inputs))


def test_plan_cuts_the_activation_bound_stem_into_micro_batches() -> None:
    g = layout_nhwc(_mobile(4))
    stem = max(_bytes(g, n.id) for n in g if n.op == "conv2d")
    plan = microbatch_plan(g, stem // 4)
    assert plan is not None
    # One row per micro-batch brings the stem's largest conv within budget.
    assert (plan.count, plan.rows) == (4, 1)
    assert plan.largest_bytes == max(_bytes(g, n.id) for n in g if n.id <= plan.last)
    # The 8 -> 96 conv reads 27 KiB of weights against a few KiB of
    # activations per micro-batch: the micro-batched part ends before it.
    wide = next(n for n in g if n.op == "conv2d" and n.shape[1] == 96)
    assert plan.last < wide.id
    assert plan.nodes == sum(1 for n in g if n.id <= plan.last and n.op != "input")
    # A budget the whole batch fits in, and batch 1: nothing to do.
    assert microbatch_plan(g, stem * 2) is None
    assert microbatch_plan(layout_nhwc(_mobile(1)), 1) is None


def test_micro_batches_divide_the_batch_and_stay_few() -> None:
    g = _mobile(6)
    plan = microbatch_plan(g, 1)  # nothing fits: as many as allowed
    assert plan is not None and (plan.count, plan.rows) == (6, 1)
    big = _mobile(2 * MAX_MICRO_BATCHES)
    plan = microbatch_plan(big, 1)
    assert plan is not None and (plan.count, plan.rows) == (MAX_MICRO_BATCHES, 2)
    # Half the batch fits: two micro-batches (6 rows: 2 x 3).
    stem = max(_bytes(g, n.id) for n in g if n.op == "conv2d")
    plan = microbatch_plan(g, stem // 2)
    assert plan is not None and (plan.count, plan.rows) == (2, 3)


def test_rewrite_slices_copies_and_concats_in_order() -> None:
    g = layout_nhwc(_mobile(4))
    stem = max(_bytes(g, n.id) for n in g if n.op == "conv2d")
    plan = microbatch_plan(g, stem // 4)
    assert plan is not None
    f = microbatch(g, stem // 4)
    slices = [n for n in f if n.op == "slice"]
    assert [n.attrs["start"] for n in slices] == [0, 1, 2, 3]
    assert all(n.shape == (1, *g[g.inputs[0]].shape[1:]) for n in slices)
    # Each micro-batch's slice also waits for the one before it: their
    # values read past the micro-batched part.
    assert len(slices[0].inputs) == 1
    for prev, nxt in zip(slices, slices[1:], strict=False):
        for token in nxt.inputs[1:]:
            assert f[token].id < nxt.id and f[token].id > prev.id
    # The stem's copies run one micro-batch after the other.
    copies = [n for n in f if n.name.endswith("/mb0") and n.op != "slice"]
    assert len(copies) == plan.nodes
    last_mb0 = max(n.id for n in f if n.name.endswith("/mb0"))
    first_mb1 = min(n.id for n in f if n.name.endswith("/mb1"))
    assert last_mb0 < first_mb1
    # Values read later (and the graph output inside the stem) are joined
    # under their own names; the output keeps its name and shape.
    joins = [n for n in f if n.op == "concat" and n.attrs["axis"] == 0]
    assert joins and all(len(n.inputs) == 4 for n in joins)
    assert {f[o].name for o in f.outputs} == {g[o].name for o in g.outputs}
    assert [f[o].shape for o in f.outputs] == [g[o].shape for o in g.outputs]
    assert f.flops == g.flops
    inputs = g.random_inputs(seed=1)
    want, got = reference_forward(g, inputs), reference_forward(f, inputs)
    for k in want:
        assert _err(got[k], want[k]) <= 1e-12, k


def test_graphs_it_cannot_cut_are_left_alone() -> None:
    # The first node mixes rows of the batch (softmax over axis 0).
    b = GraphBuilder("mixed", seed=1)
    x = b.input("x", (4, 8, 10, 10))
    g = b.build(b.conv2d(b.softmax(x, axis=0), 8, 3, padding=1))
    assert microbatch_plan(g, 1) is None and microbatch(g, 1) is g
    # An MLP's weights outweigh its activations.
    mlp = models.build("mlp-512", 8)
    assert microbatch_plan(mlp, 1) is None


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> int:
    """The executor's cache budget shrunk so that _mobile(4)'s stem overflows it."""
    g = layout_nhwc(_mobile(4))
    budget = max(_bytes(g, n.id) for n in g if n.op == "conv2d") // 4
    monkeypatch.setattr(executor, "team_budget_bytes", lambda settings, topo=None: budget)
    return budget


def test_executor_runs_the_micro_batches_right(small_budget: int) -> None:
    g = _mobile(4)
    inputs = g.random_inputs(seed=2)
    want = reference_forward(g, inputs)
    cg = compile_graph(g)
    cg.set_inputs(inputs)
    opt = cg.optimization(Settings())
    assert "microbatch" in opt.applied
    assert opt.details["microbatch"]["micro_batches"] == 4
    assert opt.details["microbatch"]["budget_bytes"] == small_budget
    for s in (Settings(), Settings(intra_op=2),
              Settings(scheduler="async", inter_op=2, intra_op=1),
              Settings(scheduler="async", inter_op=3, intra_op=1),
              Settings(graph_opt="microbatch"), Settings(graph_opt="layout+microbatch"),
              Settings(operator="framework", intra_op=2),
              Settings(library="eigen"), Settings(library="blas", intra_op=2)):
        rec = cg.run(s, repeats=2, warmup=0)
        info = rec.resolved["graph_opt"]
        if s.operator == "library" and s.library == "onednn":
            assert "microbatch" in info["applied"], s.label()
            assert info["details"]["microbatch"]["micro_batches"] == 4
        else:  # compute-bound kernels: skipped, and the reason given
            assert "microbatch" in info["skipped"] and not info["details"], s.label()
        got = cg.outputs()
        for k in want:
            assert _err(got[k], want[k]) <= RTOL, (s.label(), k)


def test_micro_batches_reuse_each_others_buffers(small_budget: int) -> None:
    cg = compile_graph(_mobile(4))
    cg.run(Settings(), repeats=1, warmup=0)
    v = cg._variant(Settings())
    slots = v.plan.buffer_slots
    assert_lifetimes_disjoint(v.graph, slots)
    first = {slots[n.id] for n in v.graph if n.name.endswith("/mb0") and n.op != "slice"}
    second = {slots[n.id] for n in v.graph if n.name.endswith("/mb1") and n.op != "slice"}
    # The second micro-batch writes buffers the first one used (still warm).
    assert first & second


# Synthetic machines with each last-level cache size: one package of 16 cores
# (2 MiB of L2 each) under one L3, as hwloc describes them.
L3_SIZES = {"8MiB": 8 << 20, "32MiB": 32 << 20, "256MiB": 256 << 20, "1GiB": 1 << 30}


def _machine(l3: str) -> str:
    return f"package:1 l3:1(size={l3}) l2:16(size=2MiB) core:1 pu:2"


@pytest.mark.parametrize("l3", L3_SIZES)
@pytest.mark.parametrize("threads", [1, 4, 16])
def test_budget_is_a_share_of_the_team_cache(l3: str, threads: int) -> None:
    topo = topology(_machine(l3))
    s = Settings(intra_op=threads, affinity="compact")
    team = L3_SIZES[l3] * threads / 16 + (2 << 20) * threads
    assert team_budget_bytes(s, topo) == int(int(team) * passes.microbatching.BUDGET_SHARE)


@pytest.mark.parametrize("l3", L3_SIZES)
def test_mobilenet_is_micro_batched_where_its_stem_overflows_the_team_cache(l3: str) -> None:
    """MobileNet-v2 b8's 112 x 112 layers move ~48 MB: micro-batched where a
    team's budget is below that, whatever this machine's own cache."""
    g = models.build("mobilenet-v2", 8)
    topo = topology(_machine(l3))
    for threads in (1, 4, 16):
        budget = team_budget_bytes(Settings(intra_op=threads, affinity="compact"), topo)
        plan = optimize(g, PASSES, budget_bytes=budget).details.get("microbatch")
        if budget < 48 << 20:
            assert plan is not None and plan["budget_bytes"] == budget, (l3, threads)
            # Each micro-batch's largest node fits the budget (or one row is the least).
            assert plan["rows"] == 1 or plan["largest_bytes"] * plan["rows"] <= budget * 8
        else:
            assert plan is None, (l3, threads)
    assert optimize(models.build("mobilenet-v2", 1), PASSES,
                    budget_bytes=team_budget_bytes(Settings(), topo)).details == {}


def test_a_large_l3_machine_still_micro_batches_a_small_team() -> None:
    """A 2-core slice reporting one 480 MiB L3 shared by 192 cores (a big
    host's): the 2-core team's share is small, so MobileNet-v2 b8 is
    micro-batched (summing every instance gave 60 MiB and no pass)."""
    topo = topology("package:1 l3:1(size=480MiB) l2:192(size=2MiB) core:1 pu:1")
    s = Settings(intra_op=2, affinity="compact")
    budget = team_budget_bytes(s, topo)
    assert budget == int((480 << 20) * 2 / 192 + (4 << 20)) // 8
    plan = optimize(models.build("mobilenet-v2", 8), PASSES, budget_bytes=budget)
    assert "microbatch" in plan.details


def test_this_machine_budget_follows_the_team() -> None:
    """On this machine too the budget is its teams' share: never more for
    fewer cores, and the executor plans each setting with its own."""
    one = team_budget_bytes(Settings(intra_op=1, affinity="compact"))
    every = team_budget_bytes(Settings(intra_op=allowed_cores(topology()), affinity="compact"))
    assert 0 < one <= every
    assert every == passes.cache_budget_bytes()


def test_plan_slice_is_a_view_of_rows_and_checks_them() -> None:
    x = node_spec("input", "x", [], [4, 3, 2])
    rows = node_spec("slice", "rows", [0], [2, 3, 2], start=1)
    relu = node_spec("eltwise", "relu", [1], [2, 3, 2], kind="relu")
    plan = _g.Plan([x, rows, relu], [2])
    data = np.random.default_rng(0).standard_normal((4, 3, 2)).astype(np.float32)
    plan.set_input(0, data)
    settings = _g.ExecSettings()
    plan.run(settings, repeats=1, warmup=0)
    (out,) = plan.outputs([2])
    np.testing.assert_array_equal(out.reshape(2, 3, 2), np.maximum(data[1:3], 0))
    for bad, match in ((node_spec("slice", "s", [0], [2, 3, 2], start=3), r"rows \[3, 5\)"),
                       (node_spec("slice", "s", [0], [2, 3, 2], start=-1), r"rows \[-1, 1\)"),
                       (node_spec("slice", "s", [0], [2, 2, 3], start=0), "every axis but the first"),
                       (node_spec("slice", "s", [], [2, 3, 2], start=0), "no inputs")):
        with pytest.raises(ValueError, match=match):
            _g.Plan([x, bad], [1])
    # A fused residual may not write in place into a view of a graph input.
    conv = node_spec("conv2d", "c", [1, 1], [2, 3, 2], inplace=1)
    with pytest.raises(ValueError, match="in place"):
        _g.Plan([x, rows, conv], [2])
