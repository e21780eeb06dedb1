"""The graph optimisation passes: each rewrite against the float64 reference
and the unoptimised plan, what each pass leaves in the graph, and the knob."""

from __future__ import annotations

import numpy as np
import pytest

from _support import assert_lifetimes_disjoint, squeeze_excite_graph

from pyparbench import models
from pyparbench.cli._common import add_settings_args, settings_from_args
from pyparbench.executor import compile_graph
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.graph.passes import (
    PASSES,
    activation_fusion,
    bn_fold,
    layout_nhwc,
    optimize,
    pipeline,
    residual_fusion,
    subsample,
)
from pyparbench.choices import GRAPH_OPTS
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

RTOL = 2e-4


def _err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))


def _block(act: str = "relu") -> Graph:
    """A ResNet-like block: conv -> BN -> act -> conv -> BN -> conv, + the
    first act (the residual), relu; then max pool, a 1x1 conv and the mean."""
    b = GraphBuilder("block", seed=3)
    x = b.input("x", (2, 8, 9, 9))
    y = b.conv2d(x, 8, 3, padding=1, bias=False)
    y = b.batch_norm(y, eps=1e-3)
    a = b.eltwise(y, act)
    z = b.conv2d(a, 8, 3, padding=1, bias=True)
    z = b.batch_norm(z, scale=False)
    z = b.conv2d(b.eltwise(z, "relu"), 8, 1)
    s = b.add(z, a, relu=True)
    p = b.pool2d(s, "max", 3, stride=2, padding=1)
    c = b.conv2d(p, 4, 1)
    g = b.global_avg_pool(c)
    return b.build([g, s])


def _run(g: Graph, settings: Settings) -> dict[str, np.ndarray]:
    cg = compile_graph(g)
    cg.run(settings, repeats=1, warmup=0)
    return cg.outputs()


def test_bn_fold_numerics_and_structure() -> None:
    g = _block()
    f = bn_fold(g)
    assert [n.op for n in f].count("batch_norm") == 0
    assert len(f) == len(g) - 2 and [n.op for n in g].count("batch_norm") == 2
    # The folded conv keeps its output's name and gains a bias.
    folded = f[g.nodes[2].name]
    assert folded.op == "conv2d" and "bias" in folded.params
    inputs = g.random_inputs(seed=1)
    want = reference_forward(g, inputs)
    got = reference_forward(f, inputs)
    for k in want:
        assert _err(got[k], want[k]) < 1e-6  # float64 maths on float32-rounded weights


def test_bn_fold_skips_a_conv_read_elsewhere() -> None:
    b = GraphBuilder("shared", seed=0)
    x = b.input("x", (1, 4, 5, 5))
    c = b.conv2d(x, 4, 1)
    n = b.batch_norm(c)
    g = b.build([b.add(n, c)])
    assert bn_fold(g) is g


@pytest.mark.parametrize("act", ["relu", "relu6", "sigmoid", "tanh", "gelu", "gelu_tanh",
                                 "swish", "hardswish"])
def test_activation_fusion_equals_unfused(act: str) -> None:
    b = GraphBuilder("act", seed=1)
    x = b.input("x", (3, 16))
    y = b.eltwise(b.linear(x, 32), act)
    m = b.eltwise(b.matmul(y, b.input("w", (32, 8))), act)
    c = b.eltwise(b.conv2d(b.input("img", (1, 3, 6, 6)), 4, 3), act)
    g = b.build([m, c])
    f = activation_fusion(g)
    assert not any(n.op == "eltwise" for n in f)
    assert {n.attrs.get("activation") for n in f if n.op in ("linear", "matmul", "conv2d")} == {act}
    want = reference_forward(g, g.random_inputs(seed=0))
    for s in (Settings(graph_opt="none"), Settings(graph_opt="activation"),
              Settings(intra_op=2, graph_opt="activation")):
        got = _run(g, s)
        for k in want:
            assert _err(got[k], want[k]) <= RTOL, (act, s.label(), k)


def test_fused_conv_bias_add_relu_equals_unfused() -> None:
    g = _block()
    f = residual_fusion(bn_fold(g))
    fused = [n for n in f if n.op == "conv2d" and len(n.inputs) == 2]
    assert len(fused) == 1 and fused[0].attrs["activation"] == "relu"
    assert not any(n.op == "add" for n in f)
    # Its residual (the first activation) is also read by the conv before,
    # which has finished by then: the sum is computed in place.
    assert fused[0].attrs.get("inplace") == 1
    want = reference_forward(g, g.random_inputs(seed=0))
    unfused = _run(g, Settings(graph_opt="none"))
    for s in (Settings(), Settings(intra_op=2), Settings(scheduler="async", inter_op=2)):
        got = _run(g, s)
        for k in want:
            assert _err(got[k], want[k]) <= RTOL, (s.label(), k)
            assert _err(got[k], unfused[k]) <= RTOL, (s.label(), k)


def test_residual_copied_when_it_is_read_later() -> None:
    # The residual x is read again after the add: no in-place write.
    b = GraphBuilder("later", seed=2)
    x = b.conv2d(b.input("x", (1, 4, 6, 6)), 4, 1)
    s = b.add(b.conv2d(x, 4, 3, padding=1), x)
    g = b.build([b.add(s, b.conv2d(x, 4, 1))])
    f = residual_fusion(g)
    fused = {f[n.inputs[1]].name: n for n in f if n.op == "conv2d" and len(n.inputs) == 2}
    assert "inplace" not in fused[g[x].name].attrs
    # The second add's residual (the first sum) is dead after it.
    assert fused[g[s].name].attrs.get("inplace") == 1
    want = reference_forward(g, g.random_inputs(seed=0))
    for s_ in (Settings(), Settings(scheduler="async", inter_op=2)):
        got = _run(g, s_)
        for k in want:
            assert _err(got[k], want[k]) <= RTOL


def test_layout_round_trip() -> None:
    g = _block()
    f = layout_nhwc(g)
    reorders = [n for n in f if n.op == "reorder"]
    # In at the input, out for the 4-D graph output; the pooled head is read
    # by global_avg_pool straight from channels-last data.
    assert [n.attrs["layout"] for n in reorders] == ["nhwc", "nchw"]
    assert f.output_names == g.output_names and f.input_names == g.input_names
    assert all(n.attrs.get("layout") == "nhwc" for n in f
               if n.op in ("conv2d", "batch_norm", "pool2d", "eltwise", "add"))
    # Values are unchanged by construction; the native plan computes them in NHWC.
    want = reference_forward(g, g.random_inputs(seed=0))
    got_ref = reference_forward(f, g.random_inputs(seed=0))
    cg = compile_graph(g)
    cg.run(Settings(graph_opt="layout"), repeats=1, warmup=0)
    got = cg.outputs()
    for k in want:
        assert np.array_equal(got_ref[k], want[k])
        assert _err(got[k], want[k]) <= RTOL
    # An intermediate channels-last value reads back as NCHW.
    og = cg.optimized(Settings(graph_opt="layout"))
    conv = next(n for n in og if n.op == "conv2d")
    all_ref = reference_forward(g, g.random_inputs(seed=0), return_all=True)
    assert _err(cg.output(conv.name), all_ref[conv.name]) <= RTOL


@pytest.mark.parametrize("batch", [1, 4])
def test_a_per_channel_gate_stays_channels_last(batch: int) -> None:
    """A (N, C, 1, 1) gate multiplies (and is added to) channels-last data
    where it lies: no reorder around the mul and add (each used to cost two)."""
    g = squeeze_excite_graph(batch)
    f = layout_nhwc(g)
    assert all(n.attrs.get("layout") == "nhwc" for n in f if n.op in ("mul", "add"))
    # In at the input, and the gate's reshape into its 1x1 conv.
    assert [n.attrs["layout"] for n in f if n.op == "reorder"] == ["nhwc", "nhwc"]
    want = reference_forward(g, g.random_inputs(seed=0))
    for s in (Settings(graph_opt="layout"), Settings(intra_op=2, graph_opt="layout"),
              Settings(), Settings(intra_op=2)):
        got = _run(g, s)
        for k in want:
            assert _err(got[k], want[k]) <= RTOL, s.label()


def test_layout_leaves_graphs_without_convs() -> None:
    g = models.build("mlp-512", 2)
    assert layout_nhwc(g) is g


def test_default_is_full_and_none_is_the_graph_as_built() -> None:
    assert Settings().graph_opt == "full"
    assert GRAPH_OPTS[:2] == ("none", "full") and set(PASSES) <= set(GRAPH_OPTS)
    g = models.build("resnet50", 1, image_size=64)
    cg = compile_graph(g)
    none = cg.run(Settings(graph_opt="none"), repeats=1, warmup=0)
    full = cg.run(Settings(), repeats=1, warmup=0)
    assert none.resolved["graph_opt"]["nodes"] == len(g) == len(cg.optimized(
        Settings(graph_opt="none")))
    assert none.resolved["graph_opt"]["applied"] == []
    info = full.resolved["graph_opt"]
    # Batch 1: the blocked layout never pays (passes.BLOCKED_MIN_BATCH).
    assert info["applied"] == [p for p in PASSES if p != "blocked"]
    assert list(info["skipped"]) == ["blocked"]
    assert info["original_nodes"] == len(g) and info["nodes"] < len(g) // 2
    # Folding removes the batch norms' FLOPs (and adds the convs' bias adds).
    assert info["flops"] < info["original_flops"] == g.flops


def test_passes_a_library_cannot_take_are_skipped_and_named() -> None:
    g = _block("tanh")
    eigen = optimize(g, PASSES, library="eigen")
    assert eigen.applied == ("bn_fold", "activation", "memory")
    assert set(eigen.skipped) == {"residual", "layout", "blocked", "subsample", "im2col",
                                  "microbatch", "activation"}
    assert any(n.op == "eltwise" for n in eigen.graph)  # tanh left unfused
    fw = optimize(g, PASSES, operator="framework")
    assert fw.applied == ("bn_fold", "activation", "memory")
    assert set(fw.skipped) == {"residual", "layout", "blocked", "subsample", "im2col",
                               "microbatch"}
    want = reference_forward(g, g.random_inputs(seed=0))
    for s in (Settings(library="eigen"), Settings(library="blas", intra_op=2),
              Settings(operator="framework", intra_op=2)):
        got = _run(g, s)
        for k in want:
            assert _err(got[k], want[k]) <= RTOL, s.label()


def test_graph_opt_knob_is_checked_and_in_the_cli() -> None:
    import argparse

    with pytest.raises(ValueError, match="graph_opt must be one of"):
        Settings(graph_opt="fast")
    p = argparse.ArgumentParser()
    add_settings_args(p)
    assert settings_from_args(p.parse_args(["--graph-opt", "none"])).graph_opt == "none"
    assert settings_from_args(p.parse_args([])).graph_opt == "full"
    assert "graph_opt=bn_fold" in Settings(graph_opt="bn_fold").label()
    # Passes joined by '+' run in pipeline order; each name once.
    assert pipeline("layout+bn_fold") == ("bn_fold", "layout")
    assert pipeline("full") == PASSES and pipeline("none") == ()
    for bad in ("bn_fold+bn_fold", "bn_fold+", "+", "layout+fast", ""):
        with pytest.raises(ValueError, match="joined by"):
            Settings(graph_opt=bad)
    s = settings_from_args(p.parse_args(["--graph-opt", "bn_fold+residual+memory"]))
    assert s.graph_opt == "bn_fold+residual+memory"
    with pytest.raises(ValueError, match="'fast'"):
        settings_from_args(p.parse_args(["--graph-opt", "fast"]))


# ------------------------------------------------------------------ subsample


def _strided_block() -> Graph:
    """Two 1x1 stride-2 convs on one value (a ResNet v1 block's shortcut and
    first conv), a third at stride 3, and a 3x3 stride-2 conv left alone."""
    b = GraphBuilder("strided", seed=5)
    x = b.input("x", (2, 8, 11, 11))
    a = b.eltwise(b.conv2d(x, 16, 3, padding=1), "relu")
    s1 = b.conv2d(a, 24, 1, stride=2)
    s2 = b.eltwise(b.conv2d(a, 12, 1, stride=2), "relu")
    s2 = b.conv2d(s2, 24, 3, padding=1)
    y = b.add(s1, s2, relu=True)
    t = b.conv2d(y, 8, 1, stride=3)
    k = b.conv2d(y, 8, 3, stride=2, padding=1)
    return b.build([b.global_avg_pool(t), b.global_avg_pool(k)])


def test_subsample_splits_strided_pointwise_convs_and_shares_the_copy() -> None:
    g = _strided_block()
    laid = layout_nhwc(g)
    f = subsample(laid)
    pools = [n for n in f if n.op == "pool2d"]
    # One copy for the two stride-2 convs of `a`, one for the stride-3 conv.
    assert sorted(tuple(p.attrs["stride"]) for p in pools) == [(2, 2), (3, 3)]
    assert all(p.attrs["kind"] == "max" and p.attrs["kernel"] == (1, 1)
               and p.attrs["layout"] == "nhwc" for p in pools)
    two = next(p for p in pools if p.attrs["stride"] == (2, 2))
    assert len(f.consumers[two.id]) == 2
    convs = [n for n in f if n.op == "conv2d"]
    strided = [n for n in convs if tuple(n.attrs["stride"]) != (1, 1)]
    assert [tuple(n.params.shapes["weight"][2:]) for n in strided] == [(3, 3)]
    assert len(f) == len(laid) + 2
    # A graph in NCHW (no layout pass) and one without strided 1x1s are left alone.
    assert subsample(g) is g
    plain = layout_nhwc(_block())
    assert subsample(plain) is plain
    want = reference_forward(g, g.random_inputs(seed=0))
    got_ref = reference_forward(f, g.random_inputs(seed=0))
    for k in want:
        assert _err(got_ref[k], want[k]) <= 1e-12
    for s in (Settings(), Settings(intra_op=2), Settings(graph_opt="subsample")):
        got = _run(g, s)
        for k in want:
            assert _err(got[k], want[k]) <= RTOL, s.label()


# --------------------------------------------------------------------- memory


@pytest.mark.parametrize("name", ["googlenet", "resnet50", "mobilenet-v2", "dlrm-kaggle",
                                  "transformer"])
def test_memory_pass_shares_buffers_only_between_disjoint_lifetimes(name: str) -> None:
    g = models.build(name, 1, **({"image_size": 64} if name != "dlrm-kaggle"
                                 and name != "transformer" else {}))
    cg = compile_graph(g)
    want = reference_forward(g, g.random_inputs(seed=0))
    full = cg.run(Settings(), repeats=1, warmup=0)
    assert "memory" in full.resolved["graph_opt"]["applied"]
    own = cg.run(Settings(graph_opt="layout"), repeats=1, warmup=0)
    # Fewer bytes than one buffer per node.
    assert full.resolved["graph_opt"]["buffer_bytes"] < own.resolved["graph_opt"]["buffer_bytes"]
    v = cg._variant(Settings())
    assert_lifetimes_disjoint(v.graph, v.plan.buffer_slots)
    # Every scheduler, several workers at once: the same outputs.
    for s in (Settings(), Settings(intra_op=2),
              Settings(scheduler="async", inter_op=2, intra_op=1),
              Settings(scheduler="async", inter_op=3, intra_op=1)):
        cg.run(s, repeats=2, warmup=0)
        got = cg.outputs()
        for k in want:
            assert _err(got[k], want[k]) <= RTOL, s.label()


def test_a_reused_buffer_cannot_be_read_back() -> None:
    g = _block()
    cg = compile_graph(g)
    cg.run(Settings(), repeats=1, warmup=0)
    og = cg.optimized(Settings())
    v = cg._variant(Settings())
    slots = v.plan.buffer_slots
    shared = [n for n in og if n.op == "conv2d"
              and any(slots[m.id] == slots[n.id] and m.id > n.id and n.id not in m.inputs
                      for m in og)]
    assert shared, "the block has convs whose buffers later nodes reuse"
    with pytest.raises(ValueError, match=shared[0].name):
        cg.output(shared[0].name)
    # Graph outputs always read back; without the memory pass, every node does.
    assert set(cg.outputs()) == {og[o].name for o in og.outputs}
    readable = Settings(graph_opt="+".join(p for p in PASSES if p != "memory"))
    cg.run(readable, repeats=1, warmup=0)
    a = cg.optimized(readable)
    assert len(a) == len(og)
    assert cg.output(next(n.name for n in a if n.op == "conv2d")).shape == (2, 8, 9, 9)


def test_output_reads_nodes_of_the_graph_as_built() -> None:
    g = _block()
    cg = compile_graph(g)
    cg.run(Settings(graph_opt="none"), repeats=1, warmup=0)
    ref = reference_forward(g, g.random_inputs(seed=0), return_all=True)
    last = g.nodes[-1]
    assert _err(cg.output(last.id), ref[last.name]) <= RTOL
    assert _err(cg.output(last.name), ref[last.name]) <= RTOL
    for bad in (-1, len(g)):
        with pytest.raises(IndexError, match=f"node {bad} is out of range: the graph has "
                                             f"nodes 0..{len(g) - 1}"):
            cg.output(bad)
    with pytest.raises(KeyError, match="no node named 'nope'"):
        cg.output("nope")
    with pytest.raises(TypeError, match="node must be a node's name or id"):
        cg.output(1.5)  # type: ignore[arg-type]
    # A conv fused with the activation after it is read as that activation's node.
    cg.run(Settings(graph_opt="bn_fold+residual+activation"), repeats=1, warmup=0)
    fused = next(n for n in g if n.op == "conv2d"
                 and n.name not in {m.name for m in cg.optimized(
                     Settings(graph_opt="bn_fold+residual+activation"))})
    with pytest.raises(ValueError, match=f"node {fused.name!r} is not in the graph that ran"):
        cg.output(fused.name)


def test_memory_pass_on_hand_made_graphs_with_aliases() -> None:
    """A reshape shares its input's buffer and an in-place residual writes
    into its input's: neither's buffer is handed to a node that runs while
    they are still read."""
    b = GraphBuilder("alias", seed=2)
    x = b.input("x", (2, 4, 6, 6))
    a = b.eltwise(x, "relu")
    c = b.conv2d(a, 4, 1)
    r = b.reshape(c, (2, 144))
    d = b.conv2d(a, 4, 3, padding=1)
    s = b.add(d, c, relu=True)       # fused into d, in place into c's buffer
    e = b.eltwise(s, "tanh")
    f = b.linear(r, 8)
    g = b.build([b.global_avg_pool(e), f])
    cg = compile_graph(g)
    want = reference_forward(g, g.random_inputs(seed=0))
    for s_ in (Settings(), Settings(scheduler="async", inter_op=2)):
        cg.run(s_, repeats=2, warmup=0)
        got = cg.outputs()
        for k in want:
            assert _err(got[k], want[k]) <= RTOL
    v = cg._variant(Settings())
    assert_lifetimes_disjoint(v.graph, v.plan.buffer_slots)
