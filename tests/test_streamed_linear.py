"""The streamed few-row product (ops.StreamedLinear), which a decode step's
linear nodes run: against a float64 reference at every kernel tier and
thread count, with the tails of a panel (n not a multiple of 8) and of a
chunk (k not a multiple of 16); its errors; and which linear nodes of a
plan run it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import pyparbench as ppb
from _support import GEMM_RTOL, assert_close, poisoned, rand
from pyparbench._core import ops as core_ops
from pyparbench.executor import compile_graph
from pyparbench.graph import GraphBuilder
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

TIERS = ("avx512", "avx2", "generic")


@pytest.fixture(params=TIERS)
def tier(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs use this tier's kernel during the test."""
    name = str(request.param)
    if name not in cpu_features()["tiers"]:
        pytest.skip(f"this CPU does not run the {name} streamed linear kernel")
    core_ops.set_streamed_isa(name)
    try:
        yield name
    finally:
        core_ops.set_streamed_isa("auto")


# (m, n, k): one element; panel and chunk tails; whole panels and chunks; a
# pair of rows and an odd third; a decoder's shapes.
SHAPES = [(1, 1, 1), (1, 7, 3), (2, 13, 17), (3, 9, 33), (1, 64, 64), (2, 300, 129),
          (1, 256, 1024), (1, 1000, 40)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("bias", [False, True])
def test_streamed_linear_matches_float64(m: int, n: int, k: int, bias: bool, tier: str,
                                         threads: int, rng: np.random.Generator) -> None:
    x, w, b = rand(rng, m, k), rand(rng, n, k), rand(rng, n)
    want = x.astype(np.float64) @ w.T.astype(np.float64) + (b if bias else 0.0)
    lin = ppb.ops.StreamedLinear(m, n, k, bias=bias, threads=threads)
    assert not lin.has_weights and lin.output_shape == (m, n)
    lin.set_weights(w, b if bias else None)
    w[:] = 0  # the kernel keeps its own packed copy
    assert lin.has_weights
    assert lin.packed_bytes == 4 * (-(-n // 8) * 8) * (-(-k // 16) * 16)
    out = poisoned((m, n))
    assert lin.run(x, out) is out
    assert_close(out, want, GEMM_RTOL)
    assert core_ops.streamed_isa() == tier
    t = lin.timeit(x, out, repeats=3, warmup=1)
    assert len(t) == 3 and (np.asarray(t) > 0).all()
    assert_close(out, want, GEMM_RTOL)


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("bias", [False, True])
def test_borrowed_weights_give_the_packed_bits(m: int, n: int, k: int, bias: bool, tier: str,
                                               threads: int, rng: np.random.Generator) -> None:
    """The caller's (n, k) matrix read where it is gives the packed panels'
    results bit for bit (the same sums in the same order), with a short last
    panel read no further than the matrix's last row; no packed copy is
    held, the kernel keeps the array alive and sees writes to it."""
    x, w, b = rand(rng, m, k), rand(rng, n, k), rand(rng, n)
    packed = ppb.ops.StreamedLinear(m, n, k, bias=bias, threads=threads)
    packed.set_weights(w, b if bias else None)
    # The matrix alone in its allocation, its last row at the end.
    w_exact = np.empty((n, k), np.float32)
    w_exact[...] = w
    lin = ppb.ops.StreamedLinear(m, n, k, bias=bias, threads=threads)
    lin.borrow_weights(w_exact, b if bias else None)
    assert lin.has_weights and lin.packed_bytes == 0
    want = packed.run(x)
    del w_exact
    np.testing.assert_array_equal(lin.run(x), want)
    assert core_ops.streamed_isa() == tier
    borrowed = rand(rng, n, k)
    lin.borrow_weights(borrowed, b if bias else None)
    borrowed[:] = 0
    np.testing.assert_array_equal(lin.run(x), np.broadcast_to(b if bias else 0.0, (m, n)))
    lin.set_weights(w, b if bias else None)  # packed again
    assert lin.packed_bytes == packed.packed_bytes
    np.testing.assert_array_equal(lin.run(x), want)


def test_streamed_linear_rejects_bad_input(rng: np.random.Generator) -> None:
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        ppb.ops.StreamedLinear(2, 0, 3)
    lin = ppb.ops.StreamedLinear(2, 4, 3, bias=True)
    with pytest.raises(ValueError, match="no weights yet"):
        lin.run(rand(rng, 2, 3))
    with pytest.raises(ValueError, match=r"weight.*\(4, 3\)"):
        lin.set_weights(rand(rng, 3, 4), rand(rng, 4))
    with pytest.raises(ValueError, match="bias"):
        lin.set_weights(rand(rng, 4, 3))
    with pytest.raises(ValueError, match=r"bias has shape \(5,\), expected \(4,\)"):
        lin.set_weights(rand(rng, 4, 3), rand(rng, 5))
    with pytest.raises(ValueError, match=r"weight.*\(4, 3\)"):
        lin.borrow_weights(rand(rng, 3, 4), rand(rng, 4))
    with pytest.raises(ValueError, match="bias"):
        lin.borrow_weights(rand(rng, 4, 3))
    with pytest.raises(TypeError, match="C-contiguous"):
        lin.borrow_weights(rand(rng, 3, 4).T, rand(rng, 4))
    assert not lin.has_weights
    with pytest.raises(ValueError, match="bias"):
        ppb.ops.StreamedLinear(2, 4, 3).set_weights(rand(rng, 4, 3), rand(rng, 4))
    lin.set_weights(rand(rng, 4, 3), rand(rng, 4))
    with pytest.raises(ValueError, match=r"x.*\(2, 3\)"):
        lin.run(rand(rng, 1, 3))
    with pytest.raises(ValueError, match=r"out.*\(2, 4\)"):
        lin.run(rand(rng, 2, 3), poisoned((2, 5)))
    out = rand(rng, 2, 4)
    with pytest.raises(ValueError, match="out overlaps x"):
        lin.run(out.reshape(-1)[:6].reshape(2, 3), out)  # x: the first 6 values of out
    with pytest.raises(ValueError, match="unknown ISA 'sse9'"):
        core_ops.set_streamed_isa("sse9")
    missing = [t for t in TIERS if t not in cpu_features()["tiers"]]
    for name in missing:
        with pytest.raises(ValueError, match=f"does not run the {name}"):
            core_ops.set_streamed_isa(name)


def _one_linear(rows: int, relu: bool) -> tuple[GraphBuilder, int]:
    b = GraphBuilder("product", seed=0)
    y = b.linear(b.input("x", (rows, 96)), 40, relu=relu, name="fc")
    return b, y


@pytest.mark.parametrize("rows,relu,streamed", [(1, False, True), (2, False, True),
                                                (3, False, False), (1, True, False)])
def test_a_plan_streams_the_linear_nodes_of_a_few_rows(rows: int, relu: bool, streamed: bool,
                                                       threads: int,
                                                       rng: np.random.Generator) -> None:
    """A linear node of at most STREAMED_MAX_ROWS rows and no activation
    runs the streamed kernel; others keep oneDNN's matmul. Either matches
    the float64 reference."""
    assert ppb.ops.STREAMED_MAX_ROWS == 2
    b, y = _one_linear(rows, relu)
    g = b.build([y])
    x = rand(rng, rows, 96)
    cg = compile_graph(g)
    cg.set_inputs({"x": x})
    rec = cg.run(Settings(intra_op=threads), repeats=1, warmup=0, trace=True)
    (kernel,) = [e.kernel for e in rec.trace if e.name == "fc"]
    assert kernel.startswith("streamed:") == streamed, kernel
    (got,) = cg.outputs().values()
    (want,) = reference_forward(g, {"x": x}).values()
    assert_close(np.asarray(got), np.asarray(want), GEMM_RTOL)
