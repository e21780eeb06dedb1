"""Operator benchmarks on the standard shape lists (pyparbench/shapes/data/).

  pytest bench/test_bench_ops.py --benchmark-group-by=group [--ppb-threads 1,2,4]

GEMM and convolution kernels are timed in their C++ loops with their
OpenMP team pinned and audited (the pyparbench pytest plugin). Ours and
PyTorch's embedding_bag sit in one group, so the table compares them side
by side; both are timed the same way there (a Python call per run, through
pytest-benchmark), so the comparison is like for like. Every benchmark
checks its result against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import pyparbench as ppb
from pyparbench._checks import padding4, pair
from pyparbench.reference import assert_near, conv2d_reference
from pyparbench.shapes import conv_problems, gemm_problems

# The thread sweep of the ppb_threads fixture (--ppb-threads overrides it).
pytestmark = pytest.mark.ppb_threads(1, 2)


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


# DeepBench's inference-device set: small enough to run everywhere.
GEMMS = gemm_problems("inference_device")


@pytest.mark.parametrize("p", GEMMS, ids=lambda p: f"{p.m}x{p.n}x{p.k}")
def test_gemm_deepbench(benchmark, ppb_bench, ppb_pinned, p, ppb_threads: int) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    g = ppb.ops.Gemm(p.m, p.n, p.k, trans_a=p.trans_a, trans_b=p.trans_b, threads=ppb_threads)
    a, b = _rand(rng, *g.a_shape), _rand(rng, *g.b_shape)
    out = np.empty(g.output_shape, np.float32)
    benchmark.group = f"gemm {p.m}x{p.n}x{p.k}"
    with ppb_pinned(g):
        ppb_bench(g, a, b, None, out)
    a64 = a.T if p.trans_a else a
    b64 = b.T if p.trans_b else b
    assert_near(out, a64.astype(np.float64) @ b64)


# Fully connected layers of the suite's models (mlp-512 at batch 1 and 8, the
# Transformer layer's feed-forward at 128 tokens): the graph's packed Linear
# beside a Gemm given the same (n, k) weights on every run, in one group.
FC_LAYERS = [(1, 512, 512), (8, 512, 512), (128, 3072, 768)]


@pytest.mark.parametrize("kernel", ["Linear", "Gemm"])
@pytest.mark.parametrize("m,n,k", FC_LAYERS, ids=lambda v: str(v))
def test_fc_packed_weights(benchmark, ppb_bench, ppb_pinned, kernel: str, m: int, n: int,  # type: ignore[no-untyped-def]
                           k: int, ppb_threads: int) -> None:
    rng = np.random.default_rng(0)
    x, w, bias = _rand(rng, m, k), _rand(rng, n, k), _rand(rng, n)
    out = np.empty((m, n), np.float32)
    benchmark.group = f"fc {m}x{n}x{k} t{ppb_threads}"
    if kernel == "Linear":
        lin = ppb.ops.Linear(m, n, k, bias=True, threads=ppb_threads)
        lin.set_weights(w, bias)
        with ppb_pinned(lin):
            ppb_bench(lin, x, out)
    else:
        g = ppb.ops.Gemm(m, n, k, trans_b=True, bias=True, threads=ppb_threads)
        with ppb_pinned(g):
            ppb_bench(g, x, w, bias, out)
    assert_near(out, x.astype(np.float64) @ w.T + bias)


RESNET = conv_problems("resnet_50")


@pytest.mark.parametrize("p", RESNET, ids=lambda p: p.name.split(":")[-1])
def test_conv_resnet50_batch1(benchmark, ppb_bench, ppb_pinned, p, ppb_threads: int) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    conv = ppb.ops.Conv2d((1, p.c, p.h, p.w), p.out_channels, (p.kh, p.kw), stride=p.stride,
                          padding=p.padding, dilation=p.dilation, groups=p.groups,
                          threads=ppb_threads)
    x, w = _rand(rng, *conv.input_shape), _rand(rng, *conv.weight_shape)
    conv.set_weights(w)
    out = np.empty(conv.output_shape, np.float32)
    benchmark.group = f"conv {p.name}"
    with ppb_pinned(conv):
        ppb_bench(conv, x, out)
    # The whole output against the float64 numpy convolution.
    want = conv2d_reference(x, w, None, pair("stride", p.stride), padding4(p.padding),
                            pair("dilation", p.dilation), p.groups, relu=False)
    assert_near(out, want)


# Small feature maps, channels-last (N, C, HxW, K, kernel): ResNet-50's last
# 3x3, Inception-v3's 8x8 1x3 and 3x3, GoogLeNet's 14x14 3x3.
SMALL_MAPS = [(1, 512, 7, 512, (3, 3)), (8, 512, 7, 512, (3, 3)), (1, 384, 8, 384, (1, 3)),
              (1, 448, 8, 384, (3, 3)), (1, 160, 14, 320, (3, 3))]


@pytest.mark.parametrize("kernel", ["Conv2d", "GemmConv2d"])
@pytest.mark.parametrize("n,c,hw,k,ks", SMALL_MAPS, ids=lambda v: str(v))
def test_conv_small_maps_direct_or_lowered(benchmark, ppb_bench, ppb_pinned, kernel: str,  # type: ignore[no-untyped-def]
                                           n: int, c: int, hw: int, k: int,
                                           ks: tuple[int, int], ppb_threads: int) -> None:
    """oneDNN's convolution against the same conv as gathered patches and one
    matmul (the graph's im2col pass), side by side in one group."""
    rng = np.random.default_rng(0)
    pad = (ks[0] // 2, ks[0] // 2, ks[1] // 2, ks[1] // 2)
    cls = ppb.ops.Conv2d if kernel == "Conv2d" else ppb.ops.GemmConv2d
    conv = cls((n, hw, hw, c), k, ks, padding=pad, bias=True, relu=True, nhwc=True,
               threads=ppb_threads)
    x, w, b = _rand(rng, n, c, hw, hw), _rand(rng, *conv.weight_shape), _rand(rng, k)
    conv.set_weights(w, b)
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = np.empty(conv.output_shape, np.float32)
    benchmark.group = f"conv {n}x{c}x{hw}x{hw} -> {k} {ks[0]}x{ks[1]} t{ppb_threads}"
    benchmark.extra_info["implementation"] = conv.implementation
    with ppb_pinned(conv):
        ppb_bench(conv, x_nhwc, out)
    want = conv2d_reference(x, w, b, (1, 1), pad, (1, 1), 1, relu=True)
    assert_near(out, want.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("impl", ["pyparbench", "torch"])
def test_embedding_bag_dlrm(benchmark, impl: str, ppb_threads: int) -> None:  # type: ignore[no-untyped-def]
    threads = ppb_threads
    rows, dim, batch, lookups = 200_000, 64, 2048, 100
    rng = np.random.default_rng(0)
    table = _rand(rng, rows, dim)
    idx = rng.integers(0, rows, size=batch * lookups)
    off = np.arange(0, batch * lookups, lookups)
    benchmark.group = f"embedding_bag {rows}x{dim} b{batch} L{lookups} t{threads}"
    if impl == "torch":
        torch = pytest.importorskip("torch")
        torch.set_num_threads(threads)
        args = (torch.from_numpy(idx), torch.from_numpy(table), torch.from_numpy(off))
        out = benchmark(lambda: torch.nn.functional.embedding_bag(*args, mode="sum")).numpy()
    else:
        k = ppb.ops.EmbeddingBag(rows, dim, threads=threads)
        out = np.empty((batch, dim), np.float32)
        benchmark(k.run, table, idx, off, None, out)
    sample = slice(0, 16)
    want = table[idx.reshape(batch, lookups)[sample]].astype(np.float64).sum(1)
    assert_near(out[sample], want)
