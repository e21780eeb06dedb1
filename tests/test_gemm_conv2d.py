"""Convolution lowered to gathered patches and one oneDNN matmul
(ops.GemmConv2d) against the float64 reference, its errors, and the graph's
im2col pass that marks the convolutions the plan may lower."""

from __future__ import annotations

import numpy as np
import pytest

import pyparbench as ppb
from _support import CONV_CASES, CONV_RTOL, assert_close, conv_reference, poisoned, rand
from pyparbench.executor import compile_graph
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.graph.passes import PASSES, im2col_marks, layout_nhwc, optimize
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

UNGROUPED = [c for c in CONV_CASES if c[-1] == 1] + [
    # (n, c, h, w, o, k, stride, padding, dilation, groups): dilated, strided both ways
    (2, 6, 12, 10, 5, (3, 3), (2, 3), (1, 2, 0, 1), (2, 1), 1),
    (1, 24, 7, 7, 40, (1, 3), (1, 1), (0, 0, 1, 1), (1, 1), 1),
]


def _nhwc(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("n,c,h,w,o,k,stride,pad,dil,groups", UNGROUPED)
@pytest.mark.parametrize("bias,relu", [(False, False), (True, True)])
def test_gemm_conv2d_matches_reference(n: int, c: int, h: int, w: int, o: int,
                                       k: tuple[int, int], stride: tuple[int, int],
                                       pad: tuple[int, int, int, int], dil: tuple[int, int],
                                       groups: int, bias: bool, relu: bool, threads: int,
                                       rng: np.random.Generator) -> None:
    x, wt = rand(rng, n, c, h, w), rand(rng, o, c, *k)
    b = rand(rng, o) if bias else None
    conv = ppb.ops.GemmConv2d(_nhwc(x).shape, o, k, stride=stride, padding=pad, dilation=dil,
                              bias=bias, relu=relu, nhwc=True, threads=threads)
    conv.set_weights(wt, b)
    out = poisoned(conv.output_shape)
    conv.run(_nhwc(x), out)
    assert_close(out, _nhwc(conv_reference(x, wt, b, stride, pad, dil, 1, relu)), CONV_RTOL)
    assert conv.implementation.startswith("im2col+")
    ns = conv.timeit(_nhwc(x), out, repeats=2, warmup=1)
    assert ns.shape == (2,) and (ns > 0).all()


def test_every_convolution_names_its_implementation(rng: np.random.Generator) -> None:
    direct = ppb.ops.Conv2d((1, 7, 7, 16), 16, 3, padding=1, nhwc=True)
    eigen = ppb.ops.EigenConv2d((1, 16, 7, 7), 16, 3, padding=1)
    assert direct.implementation and not direct.implementation.startswith("im2col")
    assert eigen.implementation == "im2col+eigen"


@pytest.mark.parametrize("kwargs,match", [
    ({"nhwc": False}, "channels-last"),
    ({"nhwc": True, "groups": 2}, "groups must be 1, got 2"),
])
def test_what_cannot_be_lowered_is_named(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ppb.ops.GemmConv2d((1, 8, 7, 7), 8, 3, padding=1, **kwargs)  # type: ignore[arg-type]


def test_patches_beyond_the_limit_are_refused() -> None:
    # 8 x 224 x 224 rows of 7 x 7 x 64 floats: 3.1 GB of patches.
    with pytest.raises(ValueError, match="bytes, more than"):
        ppb.ops.GemmConv2d((8, 224, 224, 64), 64, 7, padding=3, nhwc=True)


def test_weights_are_needed_and_checked(rng: np.random.Generator) -> None:
    conv = ppb.ops.GemmConv2d((1, 5, 5, 4), 6, 3, nhwc=True)
    with pytest.raises(ValueError, match="no weights"):
        conv.run(rand(rng, 1, 5, 5, 4))
    with pytest.raises(ValueError, match="weight"):
        conv.set_weights(rand(rng, 6, 4, 3, 2))


def _small_maps() -> Graph:
    """3x3 convs on 7x7 maps (one ungrouped with a residual add, one depthwise)
    and a 1x1: only the ungrouped 3x3 ones are candidates."""
    b = GraphBuilder("small-maps", seed=5)
    x = b.input("x", (2, 16, 7, 7))
    y = b.eltwise(b.conv2d(x, 16, 3, padding=1, bias=True), "relu")
    z = b.conv2d(y, 16, 3, padding=1, bias=False)
    s = b.add(z, x, relu=True)
    d = b.conv2d(s, 16, 3, padding=1, groups=16)
    p = b.conv2d(d, 8, 1)
    return b.build([b.global_avg_pool(p)])


def test_im2col_pass_marks_ungrouped_spatial_convs_only() -> None:
    g = layout_nhwc(_small_maps())
    marked = {n.name for n in im2col_marks(g) if n.attrs.get("im2col")}
    convs = [n for n in g if n.op == "conv2d"]
    want = {n.name for n in convs
            if n.attrs["groups"] == 1 and tuple(n.params.shapes["weight"][2:]) != (1, 1)}
    assert marked == want and len(want) == 2
    # NCHW convolutions are left alone (the lowering is channels-last).
    assert not any(n.attrs.get("im2col") for n in im2col_marks(_small_maps()))


@pytest.mark.parametrize("intra_op", [1, 2])
def test_lowered_graph_matches_reference(intra_op: int) -> None:
    check_lowering(intra_op)


# oneDNN capped at AVX2 (its ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA, read once,
# when a process makes its first primitive): the plan lowers the marked convs
# on a CPU of any ISA from AVX2 up, not only on one whose widest is AVX2.
@pytest.mark.parametrize("intra_op", [1, 2])
def test_lowered_graph_matches_reference_under_onednn_avx2(intra_op: int) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    from pyparbench._core import peak

    if "avx2" not in peak.isas():
        pytest.skip(f"this CPU does not run AVX2 (it runs {', '.join(peak.isas())})")
    # check_lowering checks the lowering against the kernel oneDNN chose (its
    # name differs by generation: jit:avx2 in 2.x, a brgemm kernel in 3.x);
    # here the cap must have taken.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import test_gemm_conv2d as t; "
            f"kernel = t.check_lowering({intra_op}); "
            "assert 'avx2' in kernel and 'avx512' not in kernel, kernel")
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2"}
    # -P: the checkout's own pyparbench/ (no compiled core) never shadows the install.
    done = subprocess.run([sys.executable, "-P", "-c", code, str(Path(__file__).parent)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def check_lowering(intra_op: int) -> str:
    """Runs the lowered graph against the reference and checks which convs
    were lowered; returns oneDNN's direct kernel for their shape, the
    reading the plan decides by."""
    g = _small_maps()
    opt = optimize(g, PASSES)
    assert "im2col" in opt.applied
    assert sum(bool(n.attrs.get("im2col")) for n in opt.graph) == 2
    inputs = g.random_inputs(seed=1)
    want = reference_forward(g, inputs)
    cg = compile_graph(g)
    cg.set_inputs(inputs)
    for graph_opt in ("full", "none"):
        rec = cg.run(Settings(intra_op=intra_op, graph_opt=graph_opt), repeats=1, warmup=0)
        for k, v in cg.outputs().items():
            assert_close(v, want[k], 2e-4)
    details = rec.resolved["graph_opt"]["details"]
    assert "im2col" not in details  # graph_opt none
    lowered = cg.run(Settings(intra_op=intra_op), repeats=1, warmup=0).resolved[
        "graph_opt"]["details"]["im2col"]
    # Lowered exactly where oneDNN's direct kernel for the shape is its older
    # AVX2 / SSE4.1 jit (the maps are 7x7, well within the size limit).
    direct = ppb.ops.Conv2d((2, 7, 7, 16), 16, 3, padding=1, nhwc=True).implementation
    older_jit = direct.startswith(("jit:avx2", "jit:sse41"))
    assert lowered["marked"] == 2 and len(lowered["lowered"]) == (2 if older_jit else 0)
    return direct
