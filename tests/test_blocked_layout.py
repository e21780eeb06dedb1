"""oneDNN's blocked activation layouts (nChw8c / nChw16c) in the native plan:
the ``blocked`` pass's rewrite, every op that reads and writes blocked data
against the float64 reference at several thread counts, the reorders, and
when the pass applies."""

from __future__ import annotations

import numpy as np
import pytest

from _support import squeeze_excite_graph

from pyparbench import executor, models
from pyparbench.executor import compile_graph
from pyparbench.graph import Graph, GraphBuilder, passes
from pyparbench.graph.passes import (
    BLOCKED_LAYOUTS,
    BLOCKED_MIN_BATCH,
    PASSES,
    blocked_misfits,
    layout_blocked,
    optimize,
    preferred_layout,
)
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

RTOL = 2e-4
LAYOUTS = tuple(BLOCKED_LAYOUTS)


def _err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))


def _cnn(batch: int = 2, channels: int = 16) -> Graph:
    """An image stem (3 channels in), a fused residual, both pool kinds
    (the average in ceil mode, counting the padding), an inception-style
    channel concat, an unfused eltwise and mul, a batch norm left unfolded
    and the global mean: every op the blocked layout carries."""
    c = channels
    b = GraphBuilder("blocked", seed=5)
    x = b.input("x", (batch, 3, 19, 19))
    s = b.conv2d(x, c, 3, stride=2, padding=1, relu=True)          # 3 -> c, 10x10
    p = b.pool2d(s, "max", 3, stride=1, padding=1)
    r = b.conv2d(p, c, 3, padding=1)
    r = b.add(r, s, relu=True)
    a = b.pool2d(r, "avg", 3, stride=2, padding=1, ceil_mode=True)  # 10 -> 6 (ceil)
    br1 = b.conv2d(a, c, 1, relu=True)
    br2 = b.conv2d(a, 2 * c, (1, 3), padding=(0, 1))
    cat = b.concat([br1, br2, a])                                   # 4c channels
    n = b.batch_norm(cat, eps=1e-3)
    e = b.eltwise(n, "sigmoid")
    m = b.mul(e, n)
    d = b.conv2d(m, 4 * c, 3, padding=1, groups=4)                 # grouped
    g = b.global_avg_pool(d)
    return b.build([g, d])


def test_preferred_layout_is_one_the_plan_knows() -> None:
    assert preferred_layout() in ("nchw", "nhwc", *LAYOUTS)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rewrite_stores_every_layout_node_blocked(layout: str) -> None:
    g = _cnn()
    f = layout_blocked(g, layout)
    stem = f[g.nodes[1].name]
    # The stem reads the 3-channel image plain: no reorder in front of it.
    assert stem.attrs["layout"] == layout and stem.attrs["input_layout"] == "nchw"
    assert f[stem.inputs[0]].op == "input"
    reorders = [n for n in f if n.op == "reorder"]
    # One out, for the 4-D graph output; global_avg_pool reads blocked data.
    assert [(n.attrs["input_layout"], n.attrs["layout"]) for n in reorders] == [
        (layout, "nchw")]
    assert all(n.attrs.get("layout") == layout for n in f
               if n.op in ("conv2d", "pool2d", "add", "concat", "batch_norm", "eltwise", "mul"))
    assert f.output_names == g.output_names
    inputs = g.random_inputs(seed=0)
    want = reference_forward(g, inputs)
    for k, v in reference_forward(f, inputs).items():
        assert np.array_equal(v, want[k])


def _prefer(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """Plan as if oneDNN preferred ``layout`` here (every blocked layout runs
    on any machine; the kernels differ, the values must not)."""
    monkeypatch.setattr(passes.layout, "preferred_layout", lambda: layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_blocked_plan_matches_the_reference(monkeypatch: pytest.MonkeyPatch, layout: str,
                                            threads: int) -> None:
    _prefer(monkeypatch, layout)
    g = _cnn(batch=BLOCKED_MIN_BATCH, channels=16)
    inputs = g.random_inputs(seed=threads)
    want = reference_forward(g, inputs, return_all=True)
    cg = compile_graph(g)
    cg.set_inputs(inputs)
    s = Settings(graph_opt="bn_fold+residual+activation+layout+blocked", intra_op=threads)
    rec = cg.run(s, repeats=1, warmup=0)
    assert rec.resolved["graph_opt"]["details"]["blocked"] == {"layout": layout}
    got = cg.outputs()
    for k in g.output_names:
        assert _err(got[k], want[k]) <= RTOL, k
    # Intermediate blocked values read back as NCHW: the max pool of the
    # stem, the ceil-mode average pool, the concat (the stem's own buffer
    # took the fused residual add in place).
    og = cg.optimized(s)
    for name in (g.nodes[2].name, g.nodes[5].name, g.nodes[8].name):
        node = og[name]
        assert node.attrs["layout"] == layout, name
        assert _err(cg.output(name), want[name]) <= RTOL, name


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_per_channel_gate_stays_blocked(monkeypatch: pytest.MonkeyPatch, layout: str
                                          ) -> None:
    """A squeeze-excite gate (N, C, 1, 1) multiplies blocked data where it
    lies (its bytes are the same in every layout), whole and in micro-batches."""
    _prefer(monkeypatch, layout)
    g = squeeze_excite_graph(BLOCKED_MIN_BATCH)
    f = layout_blocked(g, layout)
    assert all(n.attrs.get("layout") == layout for n in f if n.op in ("mul", "add"))
    assert [n.attrs["layout"] for n in f if n.op == "reorder"] == [layout, layout]
    inputs = g.random_inputs(seed=3)
    want = reference_forward(g, inputs)
    cg = compile_graph(g)
    cg.set_inputs(inputs)
    for s in (Settings(), Settings(intra_op=2)):
        cg.run(s, repeats=1, warmup=0)
        for k, v in cg.outputs().items():
            assert _err(v, want[k]) <= RTOL, (s.label(), k)
    monkeypatch.setattr(executor, "team_budget_bytes", lambda settings, topo=None: 1)
    cg = compile_graph(g)
    cg.set_inputs(inputs)
    rec = cg.run(Settings(intra_op=2), repeats=1, warmup=0)
    assert "microbatch" in rec.resolved["graph_opt"]["details"]
    for k, v in cg.outputs().items():
        assert _err(v, want[k]) <= RTOL, ("micro-batches", k)


def test_blocked_with_microbatches_and_shared_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole pipeline on a blocked graph: micro-batches slice its rows
    and join them again, the memory pass shares its buffers."""
    _prefer(monkeypatch, "nchw8c")
    # Micro-batch all it can.
    monkeypatch.setattr(executor, "team_budget_bytes", lambda settings, topo=None: 1)
    g = _cnn(batch=BLOCKED_MIN_BATCH, channels=8)
    inputs = g.random_inputs(seed=7)
    want = reference_forward(g, inputs)
    cg = compile_graph(g)
    cg.set_inputs(inputs)
    for s in (Settings(intra_op=2), Settings(scheduler="async", inter_op=2)):
        rec = cg.run(s, repeats=1, warmup=0)
        details = rec.resolved["graph_opt"]["details"]
        assert details["blocked"] == {"layout": "nchw8c"} and "microbatch" in details
        assert any(n.op == "slice" for n in cg.optimized(s))
        for k, v in cg.outputs().items():
            assert _err(v, want[k]) <= RTOL, (s, k)


def test_misfits_are_named_and_refused() -> None:
    g = _cnn(channels=12)  # 12 channels fill no block of 8
    bad = blocked_misfits(g, "nchw8c")
    assert g.nodes[1].name in bad and len(bad) >= 5
    with pytest.raises(ValueError, match=r"do not fill nchw8c's blocks of 8 channels"):
        layout_blocked(g, "nchw8c")
    assert blocked_misfits(_cnn(channels=8), "nchw8c") == []
    assert blocked_misfits(_cnn(channels=8), "nchw16c")  # 8 channels fill no block of 16
    with pytest.raises(ValueError, match="layout must be one of nchw8c, nchw16c, got 'nhwc'"):
        layout_blocked(g, "nhwc")


def test_when_the_pass_applies() -> None:
    """Where oneDNN prefers a blocked layout, the full pipeline takes it from
    BLOCKED_MIN_BATCH images on when every node fits; otherwise
    channels-last stays and the result says why."""
    pref = preferred_layout()
    small, big = _cnn(batch=1, channels=16), _cnn(batch=BLOCKED_MIN_BATCH, channels=16)
    for g in (small, big):
        r = optimize(g, PASSES)
        blocked = pref in BLOCKED_LAYOUTS and g is big
        assert ("blocked" in r.applied) == blocked
        assert any(n.attrs.get("layout") == (pref if blocked else "nhwc") for n in r.graph)
        if blocked:
            assert r.details["blocked"] == {"layout": pref}
        elif pref not in BLOCKED_LAYOUTS:
            assert "prefer" in r.skipped["blocked"]
        else:
            assert "batch 1 is below" in r.skipped["blocked"]
    if pref in BLOCKED_LAYOUTS:
        misfit = optimize(_cnn(batch=8, channels=BLOCKED_LAYOUTS[pref] + 4), PASSES)
        assert "do not fill" in misfit.skipped["blocked"]
    # Without the layout pass there is nothing to block.
    alone = optimize(big, ["blocked"])
    assert alone.applied == () and "layout pass" in alone.skipped["blocked"]


def test_full_pipeline_on_a_batched_model_matches_the_reference() -> None:
    g = models.build("resnet50", BLOCKED_MIN_BATCH, image_size=64)
    inputs = g.random_inputs(seed=2)
    want = reference_forward(g, inputs)
    cg = compile_graph(g)
    cg.set_inputs(inputs)
    s = Settings(intra_op=2)
    rec = cg.run(s, repeats=1, warmup=0, trace=True)
    for k, v in cg.outputs().items():
        assert _err(v, want[k]) <= RTOL
    if preferred_layout() in BLOCKED_LAYOUTS:
        assert rec.resolved["graph_opt"]["details"]["blocked"] == {"layout": preferred_layout()}
        # oneDNN's own kernels run it, not its reference fallback.
        kernels = {e.kernel for e in rec.trace if e.op == "conv2d"}
        assert kernels and not any(k.startswith("ref") for k in kernels), kernels
