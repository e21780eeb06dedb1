"""gemm / linear / Gemm against a float64 numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyparbench as ppb
from _support import THREAD_COUNTS, assert_close, poisoned, rand

from _support import GEMM_RTOL as RTOL
from _support import GEMM_SHAPES as SHAPES
from _support import gemm_operands as operands
from _support import gemm_reference as reference


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("batch", [0, 3])
def test_gemm_matches_reference(m: int, n: int, k: int, trans_a: bool, trans_b: bool, batch: int,
                                threads: int, rng: np.random.Generator) -> None:
    a, b = operands(rng, batch, m, n, k, trans_a, trans_b)
    got = ppb.ops.gemm(a, b, trans_a=trans_a, trans_b=trans_b, threads=threads)
    assert_close(got, reference(a, b, None, False, trans_a, trans_b), RTOL)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("batch", [0, 2])
def test_gemm_bias_relu(relu: bool, batch: int, threads: int, rng: np.random.Generator) -> None:
    a, b = operands(rng, batch, 19, 23, 29, False, False)
    bias = rand(rng, 23)
    got = ppb.ops.gemm(a, b, bias, relu=relu, threads=threads)
    want = reference(a, b, bias, relu, False, False)
    assert_close(got, want, RTOL)
    if relu:
        assert (got >= 0).all() and (got == 0).any()


def test_linear_is_x_wt_plus_b(threads: int, rng: np.random.Generator) -> None:
    x, w, bias = rand(rng, 6, 40), rand(rng, 24, 40), rand(rng, 24)
    got = ppb.ops.linear(x, w, bias, relu=True, threads=threads)
    assert_close(got, np.maximum(x.astype(np.float64) @ w.T + bias, 0), RTOL)


def test_out_is_fully_written(threads: int, rng: np.random.Generator) -> None:
    a, b = operands(rng, 0, 31, 17, 9, False, False)
    out = poisoned((31, 17))
    res = ppb.ops.gemm(a, b, threads=threads, out=out)
    assert res is out
    assert_close(out, reference(a, b, None, False, False, False), RTOL)


def test_inputs_are_converted(rng: np.random.Generator) -> None:
    a64 = rand(rng, 8, 5).astype(np.float64)
    b_strided = rand(rng, 5, 12)[:, ::2]  # non-contiguous view
    got = ppb.ops.gemm(a64, b_strided)
    assert got.dtype == np.float32
    assert_close(got, a64 @ b_strided.astype(np.float64), RTOL)
    assert_close(ppb.ops.gemm([[1, 2]], [[3], [4]]), np.array([[11.0]]), 0)


def test_prepared_gemm_reuses_kernel_and_times(rng: np.random.Generator) -> None:
    g = ppb.ops.Gemm(9, 10, 11, bias=True, relu=True, threads=1)
    assert (g.a_shape, g.b_shape, g.output_shape, g.threads) == ((9, 11), (11, 10), (9, 10), 1)
    assert g.out_shape == g.output_shape  # the former name, kept
    assert g.flops == 2 * 9 * 10 * 11
    for _ in range(3):  # fresh inputs each time: the same primitive, new buffers
        a, b, bias = rand(rng, 9, 11), rand(rng, 11, 10), rand(rng, 10)
        assert_close(g.run(a, b, bias), reference(a, b, bias, True, False, False), RTOL)
    ns = g.timeit(a, b, bias, repeats=7, warmup=1)
    assert ns.shape == (7,) and (ns > 0).all()


def test_functional_calls_share_a_cached_kernel(rng: np.random.Generator) -> None:
    from pyparbench import ops

    ops.clear_cache()
    a, b = rand(rng, 4, 4), rand(rng, 4, 4)
    ops.gemm(a, b, threads=1)
    ops.gemm(a + 1, b, threads=1)
    ops.gemm(a, b, threads=2)
    assert len(ops._CACHE) == 2


def test_results_do_not_depend_on_thread_count(rng: np.random.Generator) -> None:
    a, b = operands(rng, 0, 70, 50, 300, False, False)
    results = [ppb.ops.gemm(a, b, threads=t) for t in THREAD_COUNTS]
    for r in results[1:]:
        np.testing.assert_allclose(r, results[0], rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 40),
    batch=st.sampled_from([0, 1, 3]), trans_a=st.booleans(), trans_b=st.booleans(),
    bias=st.booleans(), relu=st.booleans(), threads=st.sampled_from(THREAD_COUNTS),
    seed=st.integers(0, 2**31),
)
def test_gemm_property(m: int, n: int, k: int, batch: int, trans_a: bool, trans_b: bool,
                       bias: bool, relu: bool, threads: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = operands(rng, batch, m, n, k, trans_a, trans_b)
    bv = rand(rng, n) if bias else None
    got = ppb.ops.gemm(a, b, bv, relu=relu, trans_a=trans_a, trans_b=trans_b, threads=threads)
    assert_close(got, reference(a, b, bv, relu, trans_a, trans_b), RTOL)


# ------------------------------------------------------------------ bad input


def test_inner_dimension_mismatch_names_both_shapes(rng: np.random.Generator) -> None:
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 6\)"):
        ppb.ops.gemm(rand(rng, 3, 4), rand(rng, 5, 6))


@pytest.mark.parametrize("a_shape,b_shape,match", [
    ((3,), (3, 2), "a must be 2-D or 3-D"),
    ((2, 3), (3, 2, 2), "same rank"),
    ((2, 3, 4), (3, 4, 5), "batch sizes differ"),
])
def test_bad_ranks(a_shape: tuple[int, ...], b_shape: tuple[int, ...], match: str,
                   rng: np.random.Generator) -> None:
    with pytest.raises(ValueError, match=match):
        ppb.ops.gemm(rand(rng, *a_shape), rand(rng, *b_shape))


def test_zero_sizes_and_threads() -> None:
    with pytest.raises(ValueError, match="m must be >= 1, got 0"):
        ppb.ops.Gemm(0, 4, 4)
    with pytest.raises(ValueError, match="k must be >= 1, got -2"):
        ppb.ops.Gemm(4, 4, -2)
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        ppb.ops.gemm(np.ones((2, 2)), np.ones((2, 2)), threads=0)
    with pytest.raises(ValueError, match="threads must be >= 1, got -1"):
        ppb.ops.Gemm(2, 2, 2, threads=-1)
    with pytest.raises(TypeError, match="threads"):
        ppb.ops.gemm(np.ones((2, 2)), np.ones((2, 2)), threads=1.5)  # type: ignore[arg-type]


def test_bias_of_wrong_length(rng: np.random.Generator) -> None:
    with pytest.raises(ValueError, match=r"bias has shape \(3,\), expected \(5,\)"):
        ppb.ops.gemm(rand(rng, 2, 4), rand(rng, 4, 5), rand(rng, 3))


def test_prepared_gemm_rejects_what_it_does_not_convert(rng: np.random.Generator) -> None:
    g = ppb.ops.Gemm(4, 4, 4)
    a, b = rand(rng, 4, 4), rand(rng, 4, 4)
    with pytest.raises(TypeError, match=r"a must be float32, got float64.*np.asarray"):
        g.run(a.astype(np.float64), b)
    with pytest.raises(TypeError, match=r"b must be C-contiguous.*ascontiguousarray"):
        g.run(a, np.asfortranarray(b))
    with pytest.raises(TypeError, match="a must be a numpy array"):
        g.run([[1.0]], b)
    with pytest.raises(ValueError, match=r"a has shape \(4, 5\), expected \(4, 4\)"):
        g.run(rand(rng, 4, 5), b)
    with pytest.raises(ValueError, match="bias was given"):
        g.run(a, b, rand(rng, 4))
    with pytest.raises(ValueError, match="bias is required"):
        ppb.ops.Gemm(4, 4, 4, bias=True).run(a, b)


@pytest.mark.parametrize("out,exc,match", [
    (np.zeros((4, 5), np.float32), ValueError, r"out has shape \(4, 5\), expected \(4, 4\)"),
    (np.zeros((4, 4), np.float64), TypeError, "out must be float32"),
    (np.zeros((4, 8), np.float32)[:, ::2], TypeError, "out must be C-contiguous"),
])
def test_bad_out(out: np.ndarray, exc: type[Exception], match: str, rng: np.random.Generator) -> None:
    with pytest.raises(exc, match=match):
        ppb.ops.gemm(rand(rng, 4, 4), rand(rng, 4, 4), out=out)


def test_read_only_out_and_overlap(rng: np.random.Generator) -> None:
    a = rand(rng, 4, 4)
    ro = np.zeros((4, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ppb.ops.gemm(a, a, out=ro)
    with pytest.raises(ValueError, match="overlaps a"):
        ppb.ops.gemm(a, rand(rng, 4, 4), out=a)


def test_non_numeric_input() -> None:
    with pytest.raises(TypeError, match="real numbers"):
        ppb.ops.gemm(np.array([["a"]]), np.ones((1, 1)))



def _activation(y: np.ndarray, kind: str | None) -> np.ndarray:
    if kind == "relu":
        return np.maximum(y, 0)
    if kind == "gelu":
        from scipy.special import erf
        return 0.5 * y * (1 + erf(y / np.sqrt(2)))
    return y


# n = 256, 512, 1024: weight rows a multiple of 1 KiB, stored padded where the
# primitive keeps plain weights.
@pytest.mark.parametrize("m,n,k", [(1, 512, 512), (8, 24, 40), (37, 129, 65), (128, 1024, 96),
                                   (3, 256, 33)])
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
def test_prepared_linear_packs_weights_once(m: int, n: int, k: int, activation: str | None,
                                            threads: int, rng: np.random.Generator) -> None:
    x, w, bias = rand(rng, m, k), rand(rng, n, k), rand(rng, n)
    want = _activation(x.astype(np.float64) @ w.T.astype(np.float64) + bias, activation)
    lin = ppb.ops.Linear(m, n, k, bias=True, activation=activation, threads=threads)
    assert not lin.has_weights and lin.flops == 2.0 * m * n * k and lin.output_shape == lin.out_shape == (m, n)
    lin.set_weights(w, bias)
    w[:] = 0  # the kernel keeps its own packed copy
    bias[:] = 0
    assert lin.has_weights
    assert_close(lin.run(x), want, RTOL)
    out = poisoned((m, n))
    assert lin.run(x, out) is out
    assert_close(out, want, RTOL)
    t = lin.timeit(x, repeats=3, warmup=1)
    assert len(t) == 3 and (np.asarray(t) > 0).all()


@pytest.mark.parametrize("m,n,k", [(8, 24, 40), (37, 129, 65), (32, 256, 1024),
                                   (33, 1024, 256), (3, 256, 33)])
@pytest.mark.parametrize("activation", [None, "relu"])
def test_linear_reading_weights_in_place_gives_the_packed_bits(
        m: int, n: int, k: int, activation: str | None, threads: int,
        rng: np.random.Generator) -> None:
    """weights_in_place is granted where the matmul keeps plain weights
    (gemm:jit: the same implementation then reads the caller's (n, k)
    array), and there gives the packed kernel's results bit for bit; the
    array is read where it is (a write shows), kept alive by the kernel."""
    x, w, bias = rand(rng, m, k), rand(rng, n, k), rand(rng, n)
    packed = ppb.ops.Linear(m, n, k, bias=True, activation=activation, threads=threads)
    packed.set_weights(w, bias)
    lin = ppb.ops.Linear(m, n, k, bias=True, activation=activation, threads=threads,
                         weights_in_place=True)
    assert not packed.weights_in_place
    assert lin.weights_in_place == packed.implementation.startswith("gemm")
    assert lin.implementation == packed.implementation
    if not lin.weights_in_place:
        pytest.skip(f"oneDNN's matmul packs weights in a blocked layout here "
                    f"({packed.implementation})")
    lin.set_weights(w, bias)
    bias[:] = 0  # the bias is copied
    want = packed.run(x)
    np.testing.assert_array_equal(lin.run(x), want)
    del w
    np.testing.assert_array_equal(lin.run(x), want)
    w2, bias2 = rand(rng, n, k), rand(rng, n)
    lin.set_weights(w2, bias2)
    w2[:] = 0
    want2 = _activation(np.broadcast_to(bias2.astype(np.float64), (m, n)), activation)
    assert_close(lin.run(x), want2, RTOL)


def test_linear_in_place_refuses_bf16_weights(rng: np.random.Generator) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    lin = ppb.ops.Linear(8, 16, 32, weights_in_place=True)
    if not lin.weights_in_place:
        pytest.skip("oneDNN's matmul packs weights in a blocked layout here")
    with pytest.raises(ValueError, match="float32 weights"):
        lin.set_weights(rand(rng, 16, 32).astype(ml_dtypes.bfloat16))


def test_prepared_linear_without_bias(rng: np.random.Generator) -> None:
    x, w = rand(rng, 3, 7), rand(rng, 5, 7)
    lin = ppb.ops.Linear(3, 5, 7)
    lin.set_weights(w)
    assert_close(lin.run(x), x.astype(np.float64) @ w.T, RTOL)


def test_prepared_linear_rejects_bad_input(rng: np.random.Generator) -> None:
    with pytest.raises(ValueError, match="n"):
        ppb.ops.Linear(2, 0, 3)
    with pytest.raises(ValueError, match="activation 'mish'|unknown eltwise kind 'mish'"):
        ppb.ops.Linear(2, 4, 3, activation="mish")
    lin = ppb.ops.Linear(2, 4, 3, bias=True)
    with pytest.raises(ValueError, match="no weights yet"):
        lin.run(rand(rng, 2, 3))
    with pytest.raises(ValueError, match=r"weight.*\(4, 3\)"):
        lin.set_weights(rand(rng, 3, 4), rand(rng, 4))
    with pytest.raises(ValueError, match="bias"):
        lin.set_weights(rand(rng, 4, 3))
    lin.set_weights(rand(rng, 4, 3), rand(rng, 4))
    with pytest.raises(ValueError, match=r"x.*\(2, 3\)"):
        lin.run(rand(rng, 3, 3))
    with pytest.raises(TypeError):
        lin.run(rand(rng, 2, 3).astype(np.float64))
