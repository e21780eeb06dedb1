"""The direct kernels of lone nodes (element-wise ops, add / mul, softmax,
layer norm, pooling) against the float64 numpy reference, for every ISA this
CPU runs, on every tail length 1..64 (vector bodies and partial vectors),
with NaN, +-inf and denormals among random (never zero) inputs.

Graphs of one op run at one thread, where every node runs alone and by a
direct kernel (the trace names it). Plain-layout data goes through the
graph IR; channels-last and blocked pooling through hand-made plan nodes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt
import pytest

from _support import ELTWISE_REFS, ELTWISE_SCALE, RTOL, node_spec, rand, ref_pool2d
from pyparbench._core import graph as _g
from pyparbench._core import ops as _ops
from pyparbench.executor import compile_graph
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

# Also run in the emulated arm64 job (.ci/aarch64).
pytestmark = pytest.mark.aarch64

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]

ONE = Settings(intra_op=1, graph_opt="none")
TAILS = range(1, 65)
GRAPH_KINDS = ("relu", "relu6", "sigmoid", "tanh", "gelu", "gelu_tanh", "swish", "hardswish")
TINY = float(np.finfo(np.float32).tiny)
# IEEE special values: NaN, the infinities, denormals of both signs (the
# smallest among them), the largest finite values, and inputs whose results
# overflow, saturate or fall into the denormal range.
SPECIALS = np.array([np.nan, np.inf, -np.inf, 1e-40, -1e-40, 1.4e-45, -3e-39, 3.4e38, -3.4e38,
                     88.8, -88.8, -100.0, 20.0, -20.0], dtype=np.float32)


# Every ISA the direct kernels are built for; a CPU runs those of
# _ops.direct_isas() (its flags: AVX-512 F/BW/VL/DQ, AVX2 + FMA), and the
# others are skipped, naming the ISA, rather than left out unseen.
ALL_ISAS = ("avx512", "avx2", "generic")


def needs_isa(isa: str) -> None:
    """Skip unless this CPU runs ``isa``'s direct kernels."""
    if isa not in _ops.direct_isas():
        pytest.skip(f"this CPU does not run the {isa} direct kernels (it runs "
                    f"{', '.join(_ops.direct_isas())})")


@pytest.fixture(params=ALL_ISAS)
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """Plans prepared in the test bind this ISA's direct kernels."""
    needs_isa(request.param)
    _ops.set_direct_isa(request.param)
    try:
        yield str(request.param)
    finally:
        _ops.set_direct_isa("auto")


def with_specials(x: F32, every: int = 3) -> F32:
    """x with a special value at every `every`-th position, cycling through
    SPECIALS, so that vector bodies and tails both meet them."""
    y = x.copy().reshape(-1)
    for k, i in enumerate(range(0, y.size, every)):
        y[i] = SPECIALS[k % len(SPECIALS)]
    return y.reshape(x.shape)


# Under user-mode emulation (.ci/aarch64 sets PPB_TEST_EMULATED=1) every
# instruction is tens of times slower, so the measured work estimate that
# decides whether a lone node is small enough for a direct kernel puts some
# nodes over the limit: they run the library kernel, whose special values
# differ (oneDNN's softmax of an all -inf row is uniform), and such a case
# is skipped.
EMULATED = os.environ.get("PPB_TEST_EMULATED") == "1"


def run_direct(g: Graph, inputs: dict[str, F32], isa: str) -> dict[str, F32]:
    """The graph's outputs at one thread, every computing node by a direct
    kernel of `isa`."""
    cg = compile_graph(g)
    cg.set_inputs(inputs)
    rec = cg.run(ONE, repeats=1, warmup=0, trace=True)
    kernels = {e.kernel for e in rec.trace if e.op != "input"}
    if EMULATED and "" in kernels:
        pytest.skip("a node ran the library kernel under emulation (its work estimate)")
    assert kernels == {f"direct:{isa}"} or (kernels == {"direct:pool_nhwc"}), kernels
    return cg.outputs()


def assert_same(got: F32, want: F64, rtol: float, floor: float = TINY) -> None:
    """NaN exactly where the reference has NaN, the same infinities, and
    every finite value within rtol x max(|reference|, floor): a denormal
    result flushed to zero fails with the default floor. A reference value
    past float32's range is the infinity fp32 arithmetic must give."""
    assert got.shape == want.shape
    big = np.abs(want) > float(np.finfo(np.float32).max)
    want = np.where(big, np.copysign(np.inf, want), want)
    g = got.astype(np.float64)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(g), nan, err_msg="NaN positions differ")
    inf = np.isinf(want)
    np.testing.assert_array_equal(g[inf], want[inf], err_msg="infinities differ")
    fin = ~nan & ~inf
    err = np.abs(g[fin] - want[fin])
    tol = rtol * np.maximum(np.abs(want[fin]), floor)
    bad = np.flatnonzero(err > tol)
    assert bad.size == 0, (f"{bad.size} values off, first: got {g[fin][bad[0]]!r}, "
                           f"want {want[fin][bad[0]]!r}")


def _ref(g: Graph, inputs: dict[str, F32]) -> dict[str, F64]:
    with np.errstate(all="ignore"):  # the reference meets the same specials
        return reference_forward(g, inputs)


# ------------------------------------------------------------ element-wise


def eltwise_graph(n: int) -> Graph:
    b = GraphBuilder(f"eltwise-{n}", seed=0)
    outs = [b.eltwise(b.input(k, (1, n)), k, name=f"y_{k}") for k in GRAPH_KINDS]
    return b.build(outs)


@pytest.mark.parametrize("n", TAILS)
def test_eltwise_on_every_tail(isa: str, n: int) -> None:
    rng = np.random.default_rng(n)
    g = eltwise_graph(n)
    inputs = {k: rand(rng, 1, n) * np.float32(ELTWISE_SCALE[k]) for k in GRAPH_KINDS}
    got, want = run_direct(g, inputs, isa), _ref(g, inputs)
    for k in GRAPH_KINDS:
        # The graph's kinds against the tests' float64 references too.
        assert_same(got[f"y_{k}"], ELTWISE_REFS[k](inputs[k]), RTOL if k not in
                    ("relu", "relu6") else 0.0)
        assert_same(got[f"y_{k}"], want[f"y_{k}"], RTOL if k not in ("relu", "relu6") else 0.0)


@pytest.mark.parametrize("n", TAILS)
def test_eltwise_keeps_nan_inf_and_denormals(isa: str, n: int) -> None:
    rng = np.random.default_rng(100 + n)
    g = eltwise_graph(n)
    inputs = {k: with_specials(rand(rng, 1, n) * np.float32(ELTWISE_SCALE[k]), every=2)
              for k in GRAPH_KINDS}
    got, want = run_direct(g, inputs, isa), _ref(g, inputs)
    for k in GRAPH_KINDS:
        assert_same(got[f"y_{k}"], want[f"y_{k}"], RTOL if k not in ("relu", "relu6") else 0.0)


def test_denormals_are_not_flushed(isa: str) -> None:
    x = np.full((1, 37), 1e-40, np.float32)
    x[0, ::2] = -3e-39
    g = eltwise_graph(37)
    got = run_direct(g, {k: x for k in GRAPH_KINDS}, isa)
    np.testing.assert_array_equal(got["y_relu"], np.maximum(x, 0))
    assert np.all(got["y_relu"][0, 1::2] > 0)
    # tanh(x) = x and gelu(x) = x / 2 this close to 0, denormal as they are.
    assert_same(got["y_tanh"], x.astype(np.float64), RTOL)
    assert_same(got["y_gelu"], x.astype(np.float64) / 2, RTOL)


# ------------------------------------------------------------ add / mul


def binary_graph(a: Sequence[int], b: Sequence[int]) -> Graph:
    """a + b, ReLU(a + b) and, for equal shapes, a * b (the graph's mul)."""
    g = GraphBuilder("binary", seed=0)
    x, y = g.input("a", tuple(a)), g.input("b", tuple(b))
    outs = [g.add(x, y, name="sum"), g.add(x, y, relu=True, name="sum_relu")]
    if tuple(a) == tuple(b):
        outs.append(g.mul(x, y, name="product"))
    return g.build(outs)


BROADCASTS = [((2, 3, 4, 5), (1, 3, 1, 1)), ((4, 9), (1, 9)), ((4, 9), (4, 1)),
              ((3, 1, 17), (3, 1, 1)), ((2, 3, 5), (2, 1, 5)), ((5, 7), (1, 1)),
              ((1, 1), (1, 1)), ((2, 2, 3, 2, 3), (1, 2, 1, 2, 1))]


@pytest.mark.parametrize("n", TAILS)
def test_add_mul_on_every_tail(isa: str, n: int) -> None:
    rng = np.random.default_rng(200 + n)
    g = binary_graph((2, n), (2, n))
    inputs = {"a": with_specials(rand(rng, 2, n) * np.float32(3), every=5),
              "b": with_specials(rand(rng, 2, n), every=7)}
    got, want = run_direct(g, inputs, isa), _ref(g, inputs)
    for k in want:
        assert_same(got[k], want[k], RTOL)


@pytest.mark.parametrize(("a", "b"), BROADCASTS)
def test_add_mul_broadcast(isa: str, a: tuple[int, ...], b: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(a) * 10 + sum(b))
    g = binary_graph(a, b)
    inputs = {"a": rand(rng, *a) * np.float32(3), "b": rand(rng, *b)}
    got, want = run_direct(g, inputs, isa), _ref(g, inputs)
    for k in want:
        assert_same(got[k], want[k], RTOL)


# ------------------------------------------------------------ softmax, layer norm


@pytest.mark.parametrize("n", TAILS)
def test_softmax_rows_and_columns_on_every_tail(isa: str, n: int) -> None:
    rng = np.random.default_rng(300 + n)
    b = GraphBuilder("softmax", seed=0)
    rows = b.softmax(b.input("rows", (3, n)), axis=-1, name="rows_out")
    cols = b.softmax(b.input("cols", (2, 5, n)), axis=1, name="cols_out")
    odd = b.softmax(b.input("odd", (2, n, 3)), axis=1, name="odd_out")
    g = b.build([rows, cols, odd])
    inputs = {"rows": rand(rng, 3, n) * np.float32(8), "cols": rand(rng, 2, 5, n) * np.float32(8),
              "odd": rand(rng, 2, n, 3) * np.float32(8)}
    got, want = run_direct(g, inputs, isa), _ref(g, inputs)
    for k in want:
        assert_same(got[k], want[k], RTOL)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 16, 17, 33, 64])
def test_softmax_with_nan_and_infinities(isa: str, n: int) -> None:
    rng = np.random.default_rng(400 + n)
    b = GraphBuilder("softmax", seed=0)
    out = b.softmax(b.input("x", (6, n)), name="y")
    g = b.build(out)
    x = rand(rng, 6, n) * np.float32(30)
    x[1, n // 2] = np.nan  # a NaN row
    x[2, 0] = np.inf  # inf - inf: a NaN row, as the reference's
    x[3, :] = -np.inf
    x[4, :: 2] = -np.inf  # lanes that are 0
    x[5, 0] = 1e-40
    got, want = run_direct(g, {"x": x}, isa), _ref(g, {"x": x})
    assert_same(got["y"], want["y"], RTOL)


@pytest.mark.parametrize("n", TAILS)
def test_layer_norm_on_every_tail(isa: str, n: int) -> None:
    rng = np.random.default_rng(500 + n)
    b = GraphBuilder("layer_norm", seed=n)
    out = b.layer_norm(b.input("x", (4, n)), name="y")
    g = b.build(out)
    x = rand(rng, 4, n) * np.float32(5)
    x[1, 0] = np.nan
    x[2, -1] = np.inf
    x[3, :] = rand(rng, n) * np.float32(1e-39)  # a denormal row
    got, want = run_direct(g, {"x": x}, isa), _ref(g, {"x": x})
    # Normalised values near the mean are differences of near-equal numbers:
    # held, as every glue op is, to rtol of the output's magnitude.
    assert_same(got["y"], want["y"], RTOL, floor=1.0)


# ------------------------------------------------------------ pooling


@pytest.mark.parametrize("hw", TAILS)
def test_global_avg_pool_on_every_tail(isa: str, hw: int) -> None:
    rng = np.random.default_rng(600 + hw)
    b = GraphBuilder("gap", seed=0)
    out = b.global_avg_pool(b.input("x", (2, 3, 1, hw)), name="y")
    g = b.build(out)
    x = rand(rng, 2, 3, 1, hw)
    x[0, 1, 0, 0] = np.nan
    x[1, 0, 0, -1] = -np.inf
    x[1, 2, 0, :] = 1e-40  # an all-denormal plane: its mean is 1e-40, not 0
    got, want = run_direct(g, {"x": x}, isa), _ref(g, {"x": x})
    assert_same(got["y"], want["y"], RTOL, floor=1.0)
    assert got["y"][1, 2] == pytest.approx(1e-40, rel=1e-5)


POOLS = [("max", 3, 2, (1, 1, 1, 1), False, True), ("avg", 3, 2, (1, 1, 1, 1), True, True),
         ("avg", 2, 2, (0, 0, 0, 0), True, False), ("max", 2, 1, (0, 1, 0, 1), True, True),
         ("avg", 3, 1, (1, 1, 1, 1), False, False)]


@pytest.mark.parametrize(("kind", "k", "s", "pad", "ceil", "include"), POOLS)
def test_small_plain_pools(isa: str, kind: str, k: int, s: int, pad: tuple[int, ...],
                           ceil: bool, include: bool) -> None:
    rng = np.random.default_rng(k * 10 + s)
    b = GraphBuilder("pool", seed=0)
    out = b.pool2d(b.input("x", (2, 3, 7, 6)), kind, k, stride=s, padding=pad, ceil_mode=ceil,
                   count_include_pad=include, name="y")
    g = b.build(out)
    x = rand(rng, 2, 3, 7, 6)
    x[0, 0, 2, 3] = np.nan  # every window over it is NaN
    x[1, 2, 0, 0] = np.inf
    x[1, 1, 4, 4] = -1e-40
    got, want = run_direct(g, {"x": x}, isa), _ref(g, {"x": x})
    assert_same(got["y"], want["y"], 0.0 if kind == "max" else RTOL, floor=1.0)


def _one_thread() -> _g.ExecSettings:
    s = _g.ExecSettings()
    s.intra_op = 1
    return s


# Blocked data fills whole blocks of 8 channels.
@pytest.mark.parametrize(("layout", "c"), [("nhwc", c) for c in TAILS]
                         + [("nchw8c", c) for c in range(8, 65, 8)])
def test_channels_last_and_blocked_pooling(isa: str, layout: str, c: int) -> None:
    rng = np.random.default_rng(700 + c)
    n, h, w = 2, 5, 4
    x = rand(rng, n, c, h, w)
    x[1, c - 1, 2, 1] = np.nan
    stored = (np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if layout == "nhwc" else
              np.ascontiguousarray(x.reshape(n, c // 8, 8, h, w).transpose(0, 1, 3, 4, 2)))
    specs = [node_spec("input", "x", [], [n, c, h, w], layout=layout),
             node_spec("global_avg_pool", "gap", [0], [n, c], layout=layout),
             node_spec("pool2d", "mp", [0], [n, c, 3, 2], layout=layout, kind="max", kernel=[3, 3],
                   stride=[2, 2], padding=[1, 1, 1, 1])]
    plan = _g.Plan(specs, [1, 2])
    plan.set_input(0, stored.reshape(n, c, h, w))  # the stored bytes, under the logical shape
    s = _one_thread()
    plan.run(s, repeats=1, warmup=0)
    if EMULATED and "" in plan.implementations(s)[1:]:
        pytest.skip("a node ran the library kernel under emulation (its work estimate)")
    assert plan.implementations(s)[1:] == [f"direct:{isa}", "direct:pool_nhwc"]
    gap, mp = plan.outputs([1, 2])
    with np.errstate(invalid="ignore"):
        want_gap = x.astype(np.float64).mean(axis=(2, 3))
    assert_same(gap, want_gap, RTOL, floor=1.0)
    want_mp = ref_pool2d(x, "max", (3, 3), (2, 2), (1, 1, 1, 1), False, True)
    got_mp = (mp.reshape(n, 3, 2, c).transpose(0, 3, 1, 2) if layout == "nhwc" else
              mp.reshape(n, c // 8, 3, 2, 8).transpose(0, 1, 4, 2, 3).reshape(n, c, 3, 2))
    assert_same(np.ascontiguousarray(got_mp), want_mp, 0.0)


# ------------------------------------------------------------ choosing the ISA


def test_a_bad_isa_is_named() -> None:
    with pytest.raises(ValueError, match="unknown ISA 'sse9'"):
        _ops.set_direct_isa("sse9")
    # "auto" (the default) is the widest ISA this CPU runs.
    assert _ops.direct_isa() == _ops.direct_isas()[0]
    assert _ops.direct_isas()[-1] == "generic"


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_an_isa_this_cpu_lacks_is_refused(isa: str) -> None:
    if isa in _ops.direct_isas():
        pytest.skip(f"this CPU runs the {isa} direct kernels: none to refuse")
    with pytest.raises(ValueError, match=f"does not run the {isa} direct kernels"):
        _ops.set_direct_isa(isa)
    assert _ops.direct_isa() == _ops.direct_isas()[0]
