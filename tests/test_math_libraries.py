"""The heavy ops through the eigen and blas math libraries (the Library layer):
against float64 numpy, against oneDNN, and their bad-input errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _support import THREAD_COUNTS, assert_close, poisoned, rand
from pyparbench import ops
from pyparbench._core.ops import Kernel
from _support import (
    CONV_CASES,
    CONV_RTOL,
    GEMM_RTOL,
    GEMM_SHAPES,
    conv_reference,
    gemm_operands,
    gemm_reference,
)

LIBRARIES = ["eigen", "blas"]
GEMM_CLASS = {"onednn": ops.Gemm, "eigen": ops.EigenGemm, "blas": ops.BlasGemm}
CONV_CLASS = {"onednn": ops.Conv2d, "eigen": ops.EigenConv2d, "blas": ops.BlasConv2d}
TRANSPOSES = [(False, False), (True, False), (False, True), (True, True)]


@pytest.fixture(params=LIBRARIES)
def library(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _drop_cached_kernels() -> Iterator[None]:
    # Each eigen kernel owns a thread pool: do not keep a hundred alive.
    yield
    ops.clear_cache()


# ------------------------------------------------------------------ gemm


@pytest.mark.parametrize("m,n,k", GEMM_SHAPES)
@pytest.mark.parametrize("trans_a,trans_b", TRANSPOSES)
@pytest.mark.parametrize("batch", [0, 3])
def test_gemm_matches_reference(library: str, m: int, n: int, k: int, trans_a: bool,
                                trans_b: bool, batch: int, threads: int,
                                rng: np.random.Generator) -> None:
    a, b = gemm_operands(rng, batch, m, n, k, trans_a, trans_b)
    got = ops.gemm(a, b, trans_a=trans_a, trans_b=trans_b, library=library, threads=threads)
    assert_close(got, gemm_reference(a, b, None, False, trans_a, trans_b), GEMM_RTOL)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("batch", [0, 2])
def test_gemm_bias_relu(library: str, relu: bool, batch: int, threads: int,
                        rng: np.random.Generator) -> None:
    a, b = gemm_operands(rng, batch, 19, 23, 29, False, False)
    bias = rand(rng, 23)
    got = ops.gemm(a, b, bias, relu=relu, library=library, threads=threads)
    assert_close(got, gemm_reference(a, b, bias, relu, False, False), GEMM_RTOL)
    if relu:
        assert (got >= 0).all() and (got == 0).any()


@pytest.mark.parametrize("m", [1, 6])
def test_linear(library: str, m: int, threads: int, rng: np.random.Generator) -> None:
    # m = 1 is a matrix-vector product, a separate path in Eigen and OpenBLAS.
    x, w, bias = rand(rng, m, 40), rand(rng, 24, 40), rand(rng, 24)
    got = ops.linear(x, w, bias, relu=True, library=library, threads=threads)
    assert_close(got, np.maximum(x.astype(np.float64) @ w.T + bias, 0), GEMM_RTOL)


@pytest.mark.parametrize("trans_a,trans_b", TRANSPOSES)
@pytest.mark.parametrize("batch", [0, 2])
def test_gemm_agrees_with_onednn(library: str, trans_a: bool, trans_b: bool, batch: int,
                                 threads: int, rng: np.random.Generator) -> None:
    a, b = gemm_operands(rng, batch, 70, 150, 300, trans_a, trans_b)
    bias = rand(rng, 150)
    kw: dict[str, Any] = dict(relu=True, trans_a=trans_a, trans_b=trans_b, threads=threads)
    want = ops.gemm(a, b, bias, **kw)
    got = ops.gemm(a, b, bias, library=library, **kw)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_gemm_results_do_not_depend_on_thread_count(library: str,
                                                    rng: np.random.Generator) -> None:
    a, b = gemm_operands(rng, 0, 70, 50, 300, False, False)
    results = [ops.gemm(a, b, library=library, threads=t) for t in THREAD_COUNTS]
    for r in results[1:]:
        np.testing.assert_allclose(r, results[0], rtol=1e-5, atol=1e-5)


def test_gemm_out_is_fully_written(library: str, threads: int, rng: np.random.Generator) -> None:
    a, b = gemm_operands(rng, 2, 31, 17, 9, False, True)
    bias = rand(rng, 17)
    out = poisoned((2, 31, 17))
    assert ops.gemm(a, b, bias, trans_b=True, library=library, threads=threads, out=out) is out
    assert_close(out, gemm_reference(a, b, bias, False, False, True), GEMM_RTOL)


def test_prepared_gemm(library: str, rng: np.random.Generator) -> None:
    g = GEMM_CLASS[library](9, 10, 11, batch=2, trans_a=True, bias=True, relu=True, threads=2)
    assert isinstance(g, ops.GemmOp) and isinstance(g, Kernel)
    assert g.library == library and g.threads == 2
    assert (g.a_shape, g.b_shape, g.out_shape) == ((2, 11, 9), (2, 11, 10), (2, 9, 10))
    assert g.flops == 2 * 2 * 9 * 10 * 11
    for _ in range(3):  # fresh buffers each run: nothing is kept from the last one
        a, b, bias = rand(rng, 2, 11, 9), rand(rng, 2, 11, 10), rand(rng, 10)
        assert_close(g.run(a, b, bias), gemm_reference(a, b, bias, True, True, False), GEMM_RTOL)
    ns = g.timeit(a, b, bias, repeats=5, warmup=1)
    assert ns.shape == (5,) and (ns > 0).all()


def test_onednn_kernels_implement_the_interfaces() -> None:
    g, c = ops.Gemm(2, 3, 4), ops.Conv2d((1, 2, 5, 5), 3, 3)
    assert isinstance(g, ops.GemmOp) and g.library == "onednn"
    assert isinstance(c, ops.Conv2dOp) and c.library == "onednn"


@settings(max_examples=30, deadline=None)
@given(
    library=st.sampled_from(LIBRARIES), m=st.integers(1, 40), n=st.integers(1, 40),
    k=st.integers(1, 40), batch=st.sampled_from([0, 1, 3]), trans_a=st.booleans(),
    trans_b=st.booleans(), bias=st.booleans(), relu=st.booleans(),
    threads=st.sampled_from(THREAD_COUNTS), seed=st.integers(0, 2**31),
)
def test_gemm_property(library: str, m: int, n: int, k: int, batch: int, trans_a: bool,
                       trans_b: bool, bias: bool, relu: bool, threads: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = gemm_operands(rng, batch, m, n, k, trans_a, trans_b)
    bv = rand(rng, n) if bias else None
    got = ops.gemm(a, b, bv, relu=relu, trans_a=trans_a, trans_b=trans_b, library=library,
                   threads=threads)
    assert_close(got, gemm_reference(a, b, bv, relu, trans_a, trans_b), GEMM_RTOL)
    ops.clear_cache()


# ------------------------------------------------------------------ conv2d


@pytest.mark.parametrize("n,c,h,w,o,k,stride,pad,dil,groups", CONV_CASES)
@pytest.mark.parametrize("bias,relu", [(False, False), (True, True)])
def test_conv2d_matches_reference(library: str, n: int, c: int, h: int, w: int, o: int,
                                  k: tuple[int, int], stride: tuple[int, int],
                                  pad: tuple[int, int, int, int], dil: tuple[int, int],
                                  groups: int, bias: bool, relu: bool, threads: int,
                                  rng: np.random.Generator) -> None:
    x, wt = rand(rng, n, c, h, w), rand(rng, o, c // groups, *k)
    b = rand(rng, o) if bias else None
    got = ops.conv2d(x, wt, b, stride=stride, padding=pad, dilation=dil, groups=groups,
                     relu=relu, library=library, threads=threads)
    assert_close(got, conv_reference(x, wt, b, stride, pad, dil, groups, relu), CONV_RTOL)


@pytest.mark.parametrize("shape,o,k,stride,pad", [
    ((2, 32, 14, 14), 64, 3, 1, 1),  # 3x3: im2col
    ((1, 64, 14, 14), 32, 1, 1, 0),  # 1x1: the image is its own column matrix
    ((1, 64, 14, 14), 48, 1, 2, 0),  # strided 1x1 (ResNet's downsampling): im2col
])
def test_conv2d_agrees_with_onednn(library: str, shape: tuple[int, int, int, int], o: int,
                                   k: int, stride: int, pad: int, threads: int,
                                   rng: np.random.Generator) -> None:
    x, wt, b = rand(rng, *shape), rand(rng, o, shape[1], k, k), rand(rng, o)
    kw: dict[str, Any] = dict(stride=stride, padding=pad, relu=True, threads=threads)
    want = ops.conv2d(x, wt, b, **kw)
    got = ops.conv2d(x, wt, b, library=library, **kw)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv2d_out_is_fully_written(library: str, threads: int,
                                     rng: np.random.Generator) -> None:
    x, w, b = rand(rng, 2, 4, 9, 9), rand(rng, 6, 2, 3, 3), rand(rng, 6)
    out = poisoned((2, 6, 9, 9))
    res = ops.conv2d(x, w, b, padding=1, groups=2, library=library, threads=threads, out=out)
    assert res is out
    assert_close(out, conv_reference(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1), 2, False), CONV_RTOL)


def test_prepared_conv(library: str, threads: int, rng: np.random.Generator) -> None:
    conv = CONV_CLASS[library]((2, 8, 12, 12), 16, 3, stride=2, padding=1, bias=True,
                               relu=True, threads=threads)
    assert isinstance(conv, ops.Conv2dOp) and isinstance(conv, Kernel)
    assert conv.library == library and conv.threads == threads
    assert conv.weight_shape == (16, 8, 3, 3) and conv.output_shape == (2, 16, 6, 6)
    assert conv.input_shape == (2, 8, 12, 12) and conv.flops == 2 * 2 * 16 * 6 * 6 * 8 * 9
    assert not conv.has_weights
    x, w, b = rand(rng, 2, 8, 12, 12), rand(rng, 16, 8, 3, 3), rand(rng, 16)
    conv.set_weights(w, b)
    assert conv.has_weights
    want = conv_reference(x, w, b, (2, 2), (1, 1, 1, 1), (1, 1), 1, True)
    w += 100.0  # the kernel holds its own copy of the weights
    assert_close(conv.run(x), want, CONV_RTOL)
    ns = conv.timeit(x, repeats=3, warmup=1)
    assert ns.shape == (3,) and (ns > 0).all()


@settings(max_examples=30, deadline=None)
@given(
    library=st.sampled_from(LIBRARIES), n=st.integers(1, 2), cg=st.integers(1, 3),
    og=st.integers(1, 3), groups=st.integers(1, 3), h=st.integers(1, 10), w=st.integers(1, 10),
    kh=st.integers(1, 4), kw=st.integers(1, 4), sh=st.integers(1, 3), sw=st.integers(1, 3),
    dh=st.integers(1, 3), dw=st.integers(1, 3), pads=st.tuples(*[st.integers(0, 3)] * 4),
    threads=st.sampled_from(THREAD_COUNTS), seed=st.integers(0, 2**31),
)
def test_conv2d_property(library: str, n: int, cg: int, og: int, groups: int, h: int, w: int,
                         kh: int, kw: int, sh: int, sw: int, dh: int, dw: int,
                         pads: tuple[int, int, int, int], threads: int, seed: int) -> None:
    # im2col's edge cases: taps in the padding, strides past the end, dilation.
    fits = (h + pads[0] + pads[1] >= dh * (kh - 1) + 1 and
            w + pads[2] + pads[3] >= dw * (kw - 1) + 1)
    rng = np.random.default_rng(seed)
    x, wt, b = rand(rng, n, cg * groups, h, w), rand(rng, og * groups, cg, kh, kw), None
    kwargs: dict[str, Any] = dict(stride=(sh, sw), padding=pads, dilation=(dh, dw),
                                  groups=groups, library=library, threads=threads)
    if not fits:
        with pytest.raises(ValueError, match="larger than the padded input"):
            ops.conv2d(x, wt, b, **kwargs)
        return
    got = ops.conv2d(x, wt, b, **kwargs)
    assert_close(got, conv_reference(x, wt, b, (sh, sw), pads, (dh, dw), groups, False),
                 CONV_RTOL)
    ops.clear_cache()


# ------------------------------------------------------------- concurrency


def test_kernels_run_concurrently(rng: np.random.Generator) -> None:
    # OpenBLAS's thread count is process-wide: kernels with different counts
    # racing for it must still compute the right result.
    a, b = gemm_operands(rng, 0, 96, 80, 200, False, False)
    want = gemm_reference(a, b, None, False, False, False)
    kernels = [cls(96, 80, 200, threads=t) for cls in (ops.BlasGemm, ops.EigenGemm)
               for t in (1, 2)]
    errors: list[Exception] = []

    def work(g: ops.GemmOp) -> None:
        try:
            for _ in range(20):
                assert_close(g.run(a, b), want, GEMM_RTOL)
        except Exception as exc:  # reported by the main thread
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(g,)) for g in kernels]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not errors, errors


# ------------------------------------------------------------------ bad input


def test_unknown_library_names_it() -> None:
    x = np.ones((2, 2), np.float32)
    msg = r"library must be 'onednn', 'eigen' or 'blas', got 'mkl'"
    with pytest.raises(ValueError, match=msg):
        ops.gemm(x, x, library="mkl")
    with pytest.raises(ValueError, match=msg):
        ops.linear(x, x, library="mkl")
    with pytest.raises(ValueError, match=msg):
        ops.conv2d(np.ones((1, 1, 3, 3)), np.ones((1, 1, 1, 1)), library="mkl")
    with pytest.raises(ValueError, match="got 'Eigen'"):  # names are exact
        ops.gemm(x, x, library="Eigen")
    with pytest.raises(TypeError, match="library must be a str, got 3"):
        ops.gemm(x, x, library=3)  # type: ignore[arg-type]
    assert ops.LIBRARIES == ("onednn", "eigen", "blas")


def test_nhwc_is_onednn_only(library: str, rng: np.random.Generator) -> None:
    msg = f"the {library} library supports nchw only, got nhwc"
    with pytest.raises(ValueError, match=msg):
        ops.conv2d(rand(rng, 1, 6, 6, 4), rand(rng, 2, 4, 3, 3), layout="nhwc", library=library)
    with pytest.raises(ValueError, match=msg):
        CONV_CLASS[library]((1, 6, 6, 4), 2, 3, nhwc=True)


@pytest.mark.parametrize("lib", ["onednn", *LIBRARIES])
def test_every_library_rejects_the_same_configurations(lib: str) -> None:
    with pytest.raises(ValueError, match="m must be >= 1, got 0"):
        GEMM_CLASS[lib](0, 4, 4)
    with pytest.raises(ValueError, match="batch must be >= 0, got -1"):
        GEMM_CLASS[lib](4, 4, 4, batch=-1)
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        GEMM_CLASS[lib](4, 4, 4, threads=0)
    with pytest.raises(ValueError, match="groups=3 must divide in_channels=4"):
        CONV_CLASS[lib]((1, 4, 8, 8), 6, 3, groups=3)
    with pytest.raises(ValueError, match=r"kernel \(5\) is larger than the padded input height"):
        CONV_CLASS[lib]((1, 1, 2, 9), 1, 3, dilation=(2, 1))
    with pytest.raises(ValueError, match="dimension < 1"):
        CONV_CLASS[lib]((1, 0, 4, 4), 2, 1)


def test_prepared_gemm_errors(library: str, rng: np.random.Generator) -> None:
    cls = GEMM_CLASS[library]
    g = cls(4, 5, 6)
    a, b = rand(rng, 4, 6), rand(rng, 6, 5)
    name = cls.__name__
    with pytest.raises(ValueError, match=r"a has shape \(4, 5\), expected \(4, 6\)"):
        g.run(rand(rng, 4, 5), b)
    with pytest.raises(ValueError, match=r"b has shape \(5, 6\), expected \(6, 5\)"):
        g.run(a, rand(rng, 5, 6))
    with pytest.raises(ValueError, match=r"out has shape \(5, 4\), expected \(4, 5\)"):
        g.run(a, b, out=np.zeros((5, 4), np.float32))
    with pytest.raises(ValueError, match=f"bias was given but this {name} was prepared"):
        g.run(a, b, rand(rng, 5))
    with pytest.raises(ValueError, match=f"bias is required: this {name} was prepared"):
        cls(4, 5, 6, bias=True).run(a, b)
    with pytest.raises(ValueError, match=r"bias has shape \(4,\), expected \(5,\)"):
        cls(4, 5, 6, bias=True).run(a, b, rand(rng, 4))
    with pytest.raises(TypeError, match="a must be float32, got float64"):
        g.run(a.astype(np.float64), b)
    sq = rand(rng, 4, 4)
    with pytest.raises(ValueError, match="overlaps a"):
        cls(4, 4, 4).run(sq, rand(rng, 4, 4), out=sq)
    with pytest.raises(ValueError, match="repeats must be >= 1, got 0"):
        g.timeit(a, b, repeats=0)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 6\)"):
        ops.gemm(rand(rng, 3, 4), rand(rng, 5, 6), library=library)


def test_prepared_conv_errors(library: str, rng: np.random.Generator) -> None:
    cls = CONV_CLASS[library]
    name = cls.__name__
    conv = cls((1, 2, 5, 5), 3, 3, bias=True)
    x = rand(rng, 1, 2, 5, 5)
    with pytest.raises(ValueError, match=f"{name} has no weights yet"):
        conv.run(x)
    with pytest.raises(ValueError,
                       match=r"weight has shape \(3, 2, 2, 2\), expected \(3, 2, 3, 3\)"):
        conv.set_weights(rand(rng, 3, 2, 2, 2), rand(rng, 3))
    with pytest.raises(ValueError, match=f"bias is required: this {name}"):
        conv.set_weights(rand(rng, 3, 2, 3, 3))
    conv.set_weights(rand(rng, 3, 2, 3, 3), rand(rng, 3))
    with pytest.raises(ValueError, match=r"x has shape \(1, 2, 6, 5\), expected \(1, 2, 5, 5\)"):
        conv.run(rand(rng, 1, 2, 6, 5))
    with pytest.raises(ValueError, match=r"out has shape \(1, 3, 4, 3\), expected \(1, 3, 3, 3\)"):
        conv.run(x, np.zeros((1, 3, 4, 3), np.float32))
    with pytest.raises(TypeError, match="x must be float32"):
        conv.run(x.astype(np.float16))
    with pytest.raises(ValueError, match=r"\(4, 3, 3, 3\).*\(1, 5, 8, 8\)"):
        ops.conv2d(rand(rng, 1, 5, 8, 8), rand(rng, 4, 3, 3, 3), library=library)
