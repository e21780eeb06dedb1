"""Math-library comparison (the study's Library layer): the same gemm and
convolutions through oneDNN, Eigen and OpenBLAS, at 1 and 2 threads.

  pytest bench/test_bench_libraries.py --benchmark-group-by=group \
      --benchmark-columns=median,iqr,rounds --benchmark-sort=name

One group per shape, so the table compares the libraries side by side.
Each kernel runs in its C++ loop with its threads pinned and audited (the
pyparbench pytest plugin); ``extra_info`` has its GFLOP and the GFLOP/s at
the median. Every benchmark checks
its output (gemm against float64 numpy, convolutions against oneDNN), so
``--benchmark-disable`` is a quick correctness run.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

import pyparbench as ppb
from pyparbench.reference import assert_near
from pyparbench.shapes import ConvProblem, conv_problems

LIBRARIES = ppb.ops.LIBRARIES
pytestmark = pytest.mark.ppb_threads(1, 2)  # --ppb-threads overrides it
GEMM_CLASS = {"onednn": ppb.ops.Gemm, "eigen": ppb.ops.EigenGemm, "blas": ppb.ops.BlasGemm}
CONV_CLASS = {"onednn": ppb.ops.Conv2d, "eigen": ppb.ops.EigenConv2d,
              "blas": ppb.ops.BlasConv2d}

# A 7x7 stride-2 stem, a 3x3, a 1x1 (no im2col) and a strided 1x1 (im2col
# that only subsamples), at batch 1.
RESNET_LAYERS = ["conv1", "res2a_branch2b", "res4a_branch2b", "res4a_branch2c",
                 "res3a_branch1"]
RESNET = [p for p in conv_problems("resnet_50")
          if p.name.split(":")[-1].split("*")[0] in RESNET_LAYERS]


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


@pytest.mark.parametrize("library", LIBRARIES)
def test_gemm_1024(benchmark, ppb_bench, ppb_pinned, library: str, ppb_threads: int) -> None:  # type: ignore[no-untyped-def]
    size = 1024
    rng = np.random.default_rng(0)
    g = GEMM_CLASS[library](size, size, size, threads=ppb_threads)
    a, b = _rand(rng, size, size), _rand(rng, size, size)
    out = np.empty(g.output_shape, np.float32)
    benchmark.group = f"gemm {size}x{size}x{size}"
    with ppb_pinned(g):
        ppb_bench(g, a, b, None, out)
    assert_near(out, a.astype(np.float64) @ b)


@lru_cache(maxsize=None)
def _conv_case(p: ConvProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Input, weights and oneDNN's output of one layer at batch 1."""
    rng = np.random.default_rng(0)
    x = _rand(rng, 1, p.c, p.h, p.w)
    w = _rand(rng, p.out_channels, p.c // p.groups, p.kh, p.kw)
    want = ppb.ops.conv2d(x, w, stride=p.stride, padding=p.padding, dilation=p.dilation,
                          groups=p.groups, threads=1)
    return x, w, want


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("p", RESNET, ids=lambda p: p.name.split(":")[-1].split("*")[0])
def test_conv_resnet50(benchmark, ppb_bench, ppb_pinned, p: ConvProblem, library: str,  # type: ignore[no-untyped-def]
                       ppb_threads: int) -> None:
    x, w, want = _conv_case(p)
    conv = CONV_CLASS[library](x.shape, p.out_channels, (p.kh, p.kw), stride=p.stride,
                               padding=p.padding, dilation=p.dilation, groups=p.groups,
                               threads=ppb_threads)
    conv.set_weights(w)
    out = np.empty(conv.output_shape, np.float32)
    benchmark.group = f"conv {p.name}"
    with ppb_pinned(conv):
        ppb_bench(conv, x, out)
    assert_near(out, want)
