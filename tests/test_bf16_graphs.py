"""Graphs at Settings(precision="bf16"): the bf16 plan (one conversion per
value a matrix node reads, glue ops and outputs fp32, convolutions read only
by matrix nodes writing bf16 bit for bit as a reorder would), every built-in model
and an imported ONNX file against its own fp32 outputs at 1 and 2 threads,
each node's precision and emulation, and the emulated path under an ISA cap."""

from __future__ import annotations

import textwrap
from functools import cache, partial
from pathlib import Path

import numpy as np
import pytest

from _support import run_isa_capped
from test_executor import SMALL

from pyparbench import models
from pyparbench._core import graph as native
from pyparbench.executor import CompiledGraph, compile_graph
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.graph.passes import optimize, optimizer
from pyparbench.graph.passes.precision import BF16_OPS, to_bf16
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.settings import Settings

# A whole model at bf16 against the same model at fp32: the largest output
# difference over the largest fp32 output (at least 1). Measured on this
# suite's small sizes at 1 and 2 threads (bench/bf16_models.py prints each
# model's): at most 2.7e-2, MobileNet-v2's softmax (its random-weight
# layers grow the first conv's 0.2 % bf16 rounding to 6 % on the logits,
# layer by layer); GoogLeNet 1.6e-2, the others 6e-3 or below. The bound
# leaves ~2x; fp32 against its float64 reference is 2e-4 (test_executor.py),
# and each test also checks bf16 differs from fp32 (it ran bf16 at all).
BF16_MODEL_RTOL = 5e-2

# bf16 needs oneDNN's bf16 matmul and convolution: from avx512_core on x86
# (emulated there, native with avx512_bf16 or AMX).
pytestmark = pytest.mark.skipif(
    cpu_features()["arch"] != "x86_64" or "avx512" not in cpu_features()["tiers"],
    reason="this CPU has no AVX-512 (flags avx512f/bw/vl/dq): oneDNN has no bf16 matmul")


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))


@cache
def compiled(name: str) -> CompiledGraph:
    return compile_graph(models.build(name, 2, **SMALL.get(name, {})))


def fork_graph() -> Graph:
    """A value read by two convolutions and a pool (a fork), a linear head
    reading a flatten, and a matmul of a value with itself."""
    b = GraphBuilder("fork", seed=1)
    x = b.input("x", (2, 16, 8, 8))
    y = b.conv2d(x, 16, 3, padding=1)
    a = b.conv2d(y, 16, 1)
    c = b.conv2d(y, 16, 3, padding=1)
    p = b.pool2d(y, "max", 3, stride=1, padding=1)
    s = b.add(b.add(a, c), p)
    f = b.reshape(b.global_avg_pool(s), (2, 16))
    h = b.linear(f, 16)
    m = b.matmul(h, h, trans_b=True)
    return b.build([m, s])


@pytest.mark.parametrize("graph_opt", ["none", "full"])
def test_one_conversion_per_value_a_matrix_node_reads(graph_opt: str) -> None:
    g = optimize(fork_graph(), [] if graph_opt == "none" else
                 [p for p in ("bn_fold", "residual", "activation", "layout")],
                 precision="bf16").graph
    conversions = [n for n in g.nodes if n.dtype == "bfloat16" and n.op == "reorder"]
    # One per source value, never two of the same value.
    sources = [n.inputs[0] for n in conversions]
    assert len(sources) == len(set(sources))
    matrix = [n for n in g.nodes if n.op in BF16_OPS]
    assert matrix and all(n.attrs.get("precision") == "bf16" for n in matrix)
    for n in matrix:
        read = n.inputs[:2] if n.op == "matmul" else n.inputs[:1]
        assert all(g[i].dtype == "bfloat16" for i in read), n.name
        # A fused residual (a conv's second input) stays fp32.
        assert all(g[i].dtype == "float32" for i in n.inputs[len(read):]), n.name
    # The fork's value y feeds two convolutions through one conversion, and
    # the matmul of h with itself reads one.
    assert len(conversions) == len({i for n in matrix for i in
                                    (n.inputs[:2] if n.op == "matmul" else n.inputs[:1])})
    # Glue ops and outputs stay fp32.
    assert all(g[o].dtype == "float32" for o in g.outputs)
    assert all(n.dtype != "bfloat16" or n.op in ("reorder", "conv2d") for n in g.nodes)
    # The fork's value y is also read by a pool: its conv writes fp32.
    assert not any(n.op == "conv2d" and n.dtype == "bfloat16" for n in g.nodes)


def chain_graph() -> Graph:
    """A MobileNet block: 1x1 conv -> depthwise conv -> 1x1 conv, the
    last read by two convolutions (a fork), one of which feeds a glue op."""
    b = GraphBuilder("chain", seed=3)
    x = b.input("x", (2, 16, 9, 9))
    e = b.conv2d(x, 48, 1, relu=True, name="expand")
    # Its relu6 is a glue op until the activation pass fuses it.
    d = b.eltwise(b.conv2d(e, 48, 3, padding=1, groups=48, name="depthwise"), "relu6")
    p = b.conv2d(d, 24, 1, name="project")
    a = b.conv2d(p, 24, 3, padding=1, name="left")
    c = b.conv2d(p, 24, 1, relu=True, name="right")
    return b.build([b.add(a, b.eltwise(c, "sigmoid"))])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_convolutions_read_only_in_bf16_write_bf16(threads: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    g = chain_graph()
    direct, through_reorders = to_bf16(g), to_bf16(g, bf16_conv_outputs=False)
    written = {n.name: n.dtype for n in direct.nodes if n.op == "conv2d"}
    # expand and project (read by two convolutions) write bf16; depthwise
    # (read by its relu6) and the fork's two (read by glue ops) write fp32.
    assert written == {"expand": "bfloat16", "depthwise": "float32", "project": "bfloat16",
                       "left": "float32", "right": "float32"}
    reorders = [direct[n.inputs[0]].op for n in direct.nodes if n.op == "reorder"]
    assert reorders == ["input", "eltwise"]
    assert sum(n.op == "reorder" for n in through_reorders.nodes) == 4
    # Bit for bit the values of the plan with a reorder after each conv: as
    # it is, with the passes (relu6 fused: depthwise writes bf16 too; a
    # channels-last or blocked layout), and in framework mode (blocks of
    # output channels).
    runs = [Settings(intra_op=threads, graph_opt="none"), Settings(intra_op=threads),
            Settings(operator="framework", intra_op=threads, pool="std")]
    direct_convs = [2, 3, 3]
    got = []
    cg = compile_graph(g)
    for s, convs in zip(runs, direct_convs, strict=True):
        bf16 = s.with_(precision="bf16")
        rec = cg.run(bf16, repeats=1, warmup=0)
        plan = cg.optimized(bf16)
        assert sum(n.op == "conv2d" and n.dtype == "bfloat16" for n in plan.nodes) == convs
        assert rec.resolved["precision"]["conversions"] == sum(
            n.op == "reorder" and n.dtype == "bfloat16" for n in plan.nodes)
        got.append(cg.outputs())
    monkeypatch.setattr(optimizer, "to_bf16", partial(to_bf16, bf16_conv_outputs=False))
    ref = compile_graph(g)
    for s, outs in zip(runs, got, strict=True):
        ref.run(s.with_(precision="bf16"), repeats=1, warmup=0)
        plan = ref.optimized(s.with_(precision="bf16"))
        assert not any(n.op == "conv2d" and n.dtype == "bfloat16" for n in plan.nodes)
        want = ref.outputs()
        assert outs.keys() == want.keys()
        for k in want:
            np.testing.assert_array_equal(outs[k], want[k], err_msg=s.label())


def test_the_plan_refuses_a_bf16_conv_with_a_residual_or_a_glue_reader() -> None:
    def specs(residual: bool) -> list[native.NodeSpec]:
        out = []
        for name, op in (("x", "input"), ("x/bf16", "reorder"), ("c", "conv2d"),
                         ("r", "eltwise")):
            s = native.NodeSpec()
            s.op, s.name, s.shape = op, name, [1, 4, 3, 3]
            out.append(s)
        out[1].inputs, out[1].bf16 = [0], True
        out[2].inputs, out[2].precision, out[2].bf16 = [1, 0] if residual else [1], "bf16", True
        out[3].inputs, out[3].kind = [2], "relu"
        return out

    with pytest.raises(ValueError, match="'c' \\(conv2d\\) cannot write bf16: only a "
                                         "reorder, or a bf16 conv2d without a residual"):
        native.Plan(specs(True), [3], reuse_buffers=False)
    with pytest.raises(ValueError, match="'r' \\(eltwise\\) reads 'c' as fp32 but it "
                                         "holds bf16"):
        native.Plan(specs(False), [3], reuse_buffers=False)


def test_fp32_and_graphs_without_matrix_nodes_are_unchanged() -> None:
    g = fork_graph()
    assert optimize(g, [], precision="fp32").graph is g
    b = GraphBuilder("glue", seed=0)
    glue = b.build(b.eltwise(b.input("x", (2, 8)), "relu"))
    assert to_bf16(glue) is glue
    with pytest.raises(ValueError,
                       match="precision must be one of 'fp32', 'bf16', 'int8', got 'int4'"):
        optimize(g, [], precision="int4")


def test_settings_precision_knob() -> None:
    assert Settings().precision == "fp32"
    s = Settings(precision="bf16", intra_op=2)
    assert s.label().endswith(" bf16") and "bf16" not in Settings().label()
    assert Settings.from_dict(s.as_dict()) == s
    # fp32 leaves it out: records and keys as before the knob.
    assert "precision" not in Settings().as_dict() and s.as_dict()["precision"] == "bf16"
    old = {k: v for k, v in Settings().as_dict().items() if k != "precision"}
    assert Settings.from_dict(old).precision == "fp32"
    with pytest.raises(ValueError,
                       match="precision must be one of 'fp32', 'bf16', 'int8', got 'fp16'"):
        Settings(precision="fp16")
    with pytest.raises(ValueError, match="onednn library only, got library='eigen'"):
        Settings(precision="bf16", library="eigen")


@pytest.mark.parametrize("threads", [1, 2])
def test_the_fork_graph_at_bf16(threads: int) -> None:
    cg = compile_graph(fork_graph())
    for opt in ("none", "full"):
        cg.run(Settings(intra_op=threads, graph_opt=opt), repeats=1, warmup=0)
        want = cg.outputs()
        rec = cg.run(Settings(intra_op=threads, graph_opt=opt, precision="bf16"), repeats=1,
                     warmup=0, trace=True)
        got = cg.outputs()
        for k in want:
            assert got[k].dtype == np.float32
            err = relative_error(got[k], want[k])
            assert err <= BF16_MODEL_RTOL, (opt, k, err)
            assert err > 0, "bf16 gave the fp32 result: the matrix nodes ran fp32"
        bf16 = [e for e in rec.trace if e.precision == "bf16"]
        assert {e.op for e in bf16} == set(BF16_OPS)
        assert all(e.kernel for e in bf16)
        assert rec.resolved["precision"]["conversions"] == sum(
            1 for n in cg.optimized(rec.settings).nodes
            if n.dtype == "bfloat16" and n.op == "reorder")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_every_model_at_bf16_against_its_fp32_outputs(name: str) -> None:
    cg = compiled(name)
    for threads in (1, 2):
        fp32 = Settings(intra_op=threads)
        cg.run(fp32, repeats=1, warmup=0)
        want = cg.outputs()
        bf16 = fp32.with_(precision="bf16")
        cg.run(bf16, repeats=1, warmup=0)
        got = cg.outputs()
        assert got.keys() == want.keys()
        for k in want:
            err = relative_error(got[k], want[k])
            assert err <= BF16_MODEL_RTOL, f"{threads} threads, output {k}: {err:.3g}"
        nodes = cg.node_precisions(bf16)
        matrix = [n for n in nodes if n.op in BF16_OPS]
        assert all(n.precision == "bf16" and n.implementation for n in matrix)
        assert not any(n.emulated for n in nodes if n.precision == "fp32")


def test_an_imported_onnx_file_at_bf16(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from test_model_files import export_residual  # noqa: PLC0415 (it needs torch)

    name = models.resolve(str(export_residual(tmp_path / "residual.onnx")))
    cg = compile_graph(models.build(name, 2))
    for threads in (1, 2):
        cg.run(Settings(intra_op=threads), repeats=1, warmup=0)
        want = cg.outputs()
        cg.run(Settings(intra_op=threads, precision="bf16"), repeats=1, warmup=0)
        got = cg.outputs()
        for k in want:
            err = relative_error(got[k], want[k])
            assert 0 < err <= BF16_MODEL_RTOL, (threads, k, err)


def test_framework_mode_and_async_at_bf16() -> None:
    """Blocks of bf16 rows (batch split), of output features and of a
    grouped convolution's bf16 input channels (batch 1), and independent
    nodes on two workers."""
    for name, batch in (("mlp-512", 1), ("mlp-512", 2), ("resnext50", 1)):
        cg = compile_graph(models.build(name, batch, **SMALL.get(name, {})))
        cg.run(Settings(), repeats=1, warmup=0)
        want = cg.outputs()
        for s in (Settings(operator="framework", intra_op=2, pool="std", precision="bf16"),
                  Settings(scheduler="async", inter_op=2, precision="bf16")):
            cg.run(s, repeats=1, warmup=0)
            for k, v in cg.outputs().items():
                assert relative_error(v, want[k]) <= BF16_MODEL_RTOL, (name, batch, s.label())
    g = fork_graph()
    cg = compile_graph(g)
    cg.run(Settings(), repeats=1, warmup=0)
    want = cg.outputs()
    cg.run(Settings(scheduler="async", inter_op=2, precision="bf16"), repeats=1, warmup=0)
    for k, v in cg.outputs().items():
        assert relative_error(v, want[k]) <= BF16_MODEL_RTOL


CAPPED_RUN = textwrap.dedent("""
    import json
    import numpy as np
    from pyparbench import info, models
    from pyparbench.executor import compile_graph
    from pyparbench.settings import Settings

    cg = compile_graph(models.build("resnet50", 1, image_size=32))
    cg.run(Settings(), repeats=1, warmup=0)
    want = cg.outputs()
    rec = cg.run(Settings(precision="bf16"), repeats=1, warmup=0)
    got = cg.outputs()
    err = max(float(np.abs(got[k] - want[k]).max()) / max(1.0, float(np.abs(want[k]).max()))
              for k in want)
    nodes = cg.node_precisions(Settings(precision="bf16"))
    print(json.dumps({
        "isa": info()["onednn"]["isa"], "error": err,
        "bf16": [[n.name, n.implementation, n.emulated] for n in nodes
                 if n.precision == "bf16"],
        "emulated_nodes": rec.resolved["precision"]["emulated_nodes"],
    }))
""")


def test_emulated_nodes_under_an_avx512_core_cap() -> None:
    """Capped to AVX-512 without BF16, every bf16 node runs emulated, says
    so, and the model still matches its fp32 outputs."""
    r = run_isa_capped(CAPPED_RUN, "AVX512_CORE", timeout=300)
    assert r["isa"] == "avx512_core", r
    assert r["bf16"] and all(emulated for _, _, emulated in r["bf16"]), r["bf16"]
    assert sorted(r["emulated_nodes"]) == sorted(name for name, _, _ in r["bf16"])
    assert 0 < r["error"] <= BF16_MODEL_RTOL, r["error"]
