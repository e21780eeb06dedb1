"""reference_forward, op by op, against explicit loops and (where installed) PyTorch."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.reference import assert_near, output_error, reference_forward, relative_error

# Also run in the emulated arm64 job (.ci/aarch64).
pytestmark = pytest.mark.aarch64

Build = Callable[[GraphBuilder, dict[str, int]], int]


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """float32 in [-1, 1) with no exact zeros."""
    x = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    x[x == 0] = 0.5
    return x


def one_op(inputs: dict[str, np.ndarray], build: Build) -> tuple[Graph, np.ndarray]:
    """Build a graph from ``build`` over inputs of these arrays' shapes; run it."""
    b = GraphBuilder("op", seed=7)
    ids = {k: b.input(k, v.shape, "int64" if v.dtype.kind == "i" else "float32")
           for k, v in inputs.items()}
    g = b.build(build(b, ids))
    (out,) = reference_forward(g, inputs).values()
    assert out.dtype == np.float64
    assert out.shape == g.nodes[g.outputs[0]].shape
    return g, out


def f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


@pytest.fixture
def torch() -> ModuleType:
    module: ModuleType = pytest.importorskip("torch")
    return module


def T(torch: ModuleType, a: np.ndarray) -> Any:
    return torch.from_numpy(f64(a))


# ---------------------------------------------------------------- convolution


def conv_loop(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, stride: tuple[int, int],
              pad: tuple[int, int, int, int], dil: tuple[int, int], groups: int) -> np.ndarray:
    """Convolution by its definition, one output element at a time."""
    xp = np.pad(f64(x), ((0, 0), (0, 0), pad[:2], pad[2:]))
    n, o = x.shape[0], w.shape[0]
    _, cg, kh, kw = w.shape
    eh, ew = dil[0] * (kh - 1) + 1, dil[1] * (kw - 1) + 1
    oh = (xp.shape[2] - eh) // stride[0] + 1
    ow = (xp.shape[3] - ew) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for b in range(n):
        for oc in range(o):
            g = oc // (o // groups)
            for i in range(oh):
                for j in range(ow):
                    r, c = i * stride[0], j * stride[1]
                    patch = xp[b, g * cg:(g + 1) * cg, r:r + eh:dil[0], c:c + ew:dil[1]]
                    out[b, oc, i, j] = np.sum(patch * f64(w[oc]))
            if bias is not None:
                out[b, oc] += bias[oc]
    return out


CONV_CASES = [
    # (C, O, kernel, stride, padding (t, b, l, r), dilation, groups, bias, relu)
    (3, 4, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, True, False),
    (3, 5, (3, 2), (2, 1), (1, 2, 0, 1), (1, 1), 1, False, True),
    (4, 4, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1, True, False),
    (4, 6, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 2, True, True),
    (4, 8, (3, 3), (2, 2), (0, 1, 0, 1), (1, 1), 4, False, False),  # depthwise x2
    (6, 6, (1, 7), (1, 1), (0, 0, 3, 3), (1, 1), 1, True, False),
    (2, 3, (2, 3), (3, 2), (0, 1, 2, 0), (2, 1), 1, True, True),
]


def _conv_graph(rng: np.random.Generator, case: tuple[Any, ...]
                ) -> tuple[Graph, np.ndarray, np.ndarray]:
    c, o, k, s, p, d, groups, bias, relu = case
    x = rand(rng, 2, c, 9, 8)
    g, y = one_op({"x": x}, lambda b, i: b.conv2d(i["x"], o, k, stride=s, padding=p,
                                                   dilation=d, groups=groups, bias=bias,
                                                   relu=relu))
    return g, x, y


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_against_loop(rng: np.random.Generator, case: tuple[Any, ...]) -> None:
    g, x, y = _conv_graph(rng, case)
    node = g.nodes[1]
    bias = node.params["bias"] if "bias" in node.params else None
    want = conv_loop(x, node.params["weight"], bias, case[3], case[4], case[5], case[6])
    if case[8]:
        want = np.maximum(want, 0)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_against_torch(rng: np.random.Generator, torch: ModuleType,
                              case: tuple[Any, ...]) -> None:
    F = torch.nn.functional
    g, x, y = _conv_graph(rng, case)
    node = g.nodes[1]
    t, b, left, r = case[4]
    bias = T(torch, node.params["bias"]) if "bias" in node.params else None
    want = F.conv2d(F.pad(T(torch, x), (left, r, t, b)), T(torch, node.params["weight"]), bias,
                    stride=case[3], dilation=case[5], groups=case[6])
    if case[8]:
        want = F.relu(want)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-12, atol=1e-12)


# -------------------------------------------------------------------- pooling


def pool_loop(x: np.ndarray, kind: str, k: tuple[int, int], s: tuple[int, int],
              p: tuple[int, int, int, int], out_hw: tuple[int, int],
              count_include_pad: bool) -> np.ndarray:
    """PyTorch's pooling kernels, transcribed: window clipped to the padded
    input for the divisor, then to the input for the values."""
    h, w = x.shape[2:]
    out = np.zeros((*x.shape[:2], *out_hw))
    for i in range(out_hw[0]):
        hs = i * s[0] - p[0]
        he = min(hs + k[0], h + p[1])
        for j in range(out_hw[1]):
            ws = j * s[1] - p[2]
            we = min(ws + k[1], w + p[3])
            size = (he - hs) * (we - ws)
            h0, h1, w0, w1 = max(hs, 0), min(he, h), max(ws, 0), min(we, w)
            win = f64(x[:, :, h0:h1, w0:w1])
            if kind == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                div = size if count_include_pad else (h1 - h0) * (w1 - w0)
                out[:, :, i, j] = win.sum(axis=(2, 3)) / div
    return out


POOL_CASES = [
    # (H, W, kernel, stride, padding, ceil_mode, count_include_pad)
    (7, 7, (3, 3), (2, 2), (0, 0, 0, 0), False, True),
    (8, 8, (3, 3), (2, 2), (0, 0, 0, 0), True, True),
    (8, 7, (3, 3), (2, 2), (1, 1, 1, 1), True, True),
    (8, 7, (3, 3), (2, 2), (1, 1, 1, 1), True, False),
    (6, 6, (3, 3), (1, 1), (1, 1, 1, 1), False, False),
    (9, 9, (2, 2), (2, 2), (1, 1, 0, 0), True, True),
    (7, 6, (3, 2), (2, 1), (1, 1, 1, 1), False, True),
    (7, 7, (3, 3), (2, 2), (1, 0, 0, 1), True, False),  # asymmetric: loop only
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pool2d(rng: np.random.Generator, kind: str, case: tuple[Any, ...]) -> None:
    h, w, k, s, p, ceil, incl = case
    x = rand(rng, 2, 3, h, w)
    g, y = one_op({"x": x}, lambda b, i: b.pool2d(i["x"], kind, k, stride=s, padding=p,
                                                   ceil_mode=ceil, count_include_pad=incl))
    np.testing.assert_allclose(y, pool_loop(x, kind, k, s, p, y.shape[2:], incl), rtol=1e-12)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", [c for c in POOL_CASES if c[4][0::2] == c[4][1::2]])
def test_pool2d_against_torch(rng: np.random.Generator, torch: ModuleType, kind: str,
                              case: tuple[Any, ...]) -> None:
    F = torch.nn.functional
    h, w, k, s, p, ceil, incl = case
    x = rand(rng, 2, 3, h, w)
    _, y = one_op({"x": x}, lambda b, i: b.pool2d(i["x"], kind, k, stride=s, padding=p,
                                                   ceil_mode=ceil, count_include_pad=incl))
    pad = (p[0], p[2])
    if kind == "max":
        want = F.max_pool2d(T(torch, x), k, s, pad, ceil_mode=ceil)
    else:
        want = F.avg_pool2d(T(torch, x), k, s, pad, ceil_mode=ceil, count_include_pad=incl)
    assert y.shape == tuple(want.shape)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-12)


def test_global_avg_pool(rng: np.random.Generator) -> None:
    x = rand(rng, 2, 3, 5, 4)
    _, y = one_op({"x": x}, lambda b, i: b.global_avg_pool(i["x"]))
    np.testing.assert_allclose(y, f64(x).sum(axis=(2, 3)) / 20, rtol=1e-12)


# ------------------------------------------------------------- dense algebra


@pytest.mark.parametrize("shape", [(3, 5), (2, 4, 5)])
@pytest.mark.parametrize("relu", [False, True])
def test_linear(rng: np.random.Generator, shape: tuple[int, ...], relu: bool) -> None:
    x = rand(rng, *shape)
    g, y = one_op({"x": x}, lambda b, i: b.linear(i["x"], 6, relu=relu))
    w, bias = g.nodes[1].params["weight"], g.nodes[1].params["bias"]
    want = np.einsum("...i,oi->...o", f64(x), f64(w)) + bias
    np.testing.assert_allclose(y, np.maximum(want, 0) if relu else want, rtol=1e-12)


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("batched", [False, True])
def test_matmul(rng: np.random.Generator, trans_b: bool, batched: bool) -> None:
    lead = (3,) if batched else ()
    a = rand(rng, *lead, 4, 5)
    bm = rand(rng, *lead, *((6, 5) if trans_b else (5, 6)))
    _, y = one_op({"a": a, "b": bm}, lambda b, i: b.matmul(i["a"], i["b"], trans_b=trans_b))
    pairs = zip(a.reshape(-1, 4, 5), bm.reshape(-1, *bm.shape[-2:]), strict=True)
    want = np.stack([f64(a_) @ (f64(b_).T if trans_b else f64(b_)) for a_, b_ in pairs])
    np.testing.assert_allclose(y, want.reshape(*lead, 4, 6), rtol=1e-12)


# ----------------------------------------------------------------- embedding


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag(rng: np.random.Generator, mode: str) -> None:
    idx = rng.integers(0, 11, size=(4, 6))
    g, y = one_op({"idx": idx}, lambda b, i: b.embedding_bag(i["idx"], 11, 3, mode=mode))
    table = f64(g.nodes[1].params["table"])
    want = np.zeros((4, 3))
    for bag in range(4):
        for k in idx[bag]:
            want[bag] += table[k]
    np.testing.assert_allclose(y, want / 6 if mode == "mean" else want, rtol=1e-12)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_against_torch(rng: np.random.Generator, torch: ModuleType,
                                     mode: str) -> None:
    idx = rng.integers(0, 50, size=(5, 7))
    g, y = one_op({"idx": idx}, lambda b, i: b.embedding_bag(i["idx"], 50, 4, mode=mode))
    want = torch.nn.functional.embedding_bag(torch.from_numpy(idx),
                                             T(torch, g.nodes[1].params["table"]), mode=mode)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-12)


def test_embedding_index_out_of_range() -> None:
    b = GraphBuilder("emb")
    g = b.build(b.embedding_bag(b.input("idx", (2, 2), "int64"), 5, 3))
    with pytest.raises(IndexError, match="index 5 outside"):
        reference_forward(g, {"idx": np.array([[0, 1], [5, 2]])})


# --------------------------------------------------------------- element-wise


def _eltwise(kind: str) -> Build:
    return lambda b, i: b.eltwise(i["x"], kind)


@pytest.mark.parametrize("kind", ["relu", "relu6", "sigmoid", "tanh", "gelu", "gelu_tanh",
                                  "swish", "hardswish"])
def test_eltwise_against_torch(rng: np.random.Generator, torch: ModuleType, kind: str) -> None:
    F = torch.nn.functional
    x = rand(rng, 3, 40) * 8  # past relu6's 6, into sigmoid's tails
    x[0, :3] = [-800.0, 800.0, 0.5]  # no overflow warning from exp
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        _, y = one_op({"x": x}, _eltwise(kind))
    fn = {"relu": F.relu, "relu6": F.relu6, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
          "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
          "swish": F.silu, "hardswish": F.hardswish}[kind]
    # 1 + tanh cancels in gelu_tanh's negative tail, where torch's order of
    # the same formula rounds differently: an absolute floor of 1e-15 there.
    atol = 1e-15 if kind == "gelu_tanh" else 1e-300
    np.testing.assert_allclose(y, fn(T(torch, x)).numpy(), rtol=1e-12, atol=atol)


def test_eltwise_by_formula(rng: np.random.Generator) -> None:
    x = f64(rand(rng, 50) * 8)
    want = {"relu": np.where(x > 0, x, 0), "relu6": np.minimum(np.maximum(x, 0), 6),
            "sigmoid": 1 / (1 + np.exp(-x)), "tanh": np.tanh(x),
            "gelu": np.array([v * (1 + math.erf(v / math.sqrt(2))) / 2 for v in x]),
            "gelu_tanh": x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))) / 2,
            "swish": x / (1 + np.exp(-x)), "hardswish": x * np.minimum(np.maximum(x + 3, 0), 6) / 6}
    for kind, w in want.items():
        _, y = one_op({"x": x.astype(np.float32)}, _eltwise(kind))
        np.testing.assert_allclose(y, w, rtol=1e-6, err_msg=kind)  # x went through float32


@pytest.mark.parametrize("bshape", [(2, 3, 4), (2, 1, 4), (1, 3, 1), (1, 1, 1)])
@pytest.mark.parametrize("relu", [False, True])
def test_add_broadcast(rng: np.random.Generator, bshape: tuple[int, ...], relu: bool) -> None:
    a, bb = rand(rng, 2, 3, 4), rand(rng, *bshape)
    _, y = one_op({"a": a, "b": bb}, lambda b, i: b.add(i["a"], i["b"], relu=relu))
    want = f64(a) + np.broadcast_to(f64(bb), a.shape)
    np.testing.assert_allclose(y, np.maximum(want, 0) if relu else want, rtol=1e-12)


def test_mul_concat_reshape_transpose(rng: np.random.Generator) -> None:
    a, c = rand(rng, 2, 3, 4), rand(rng, 2, 5, 4)
    _, y = one_op({"a": a, "c": a}, lambda b, i: b.mul(i["a"], i["c"]))
    np.testing.assert_allclose(y, f64(a) ** 2, rtol=1e-12)
    _, y = one_op({"a": a, "c": c}, lambda b, i: b.concat([i["a"], i["c"], i["a"]], axis=-2))
    assert np.array_equal(y, np.concatenate([a, c, a], axis=1))
    _, y = one_op({"a": a}, lambda b, i: b.reshape(i["a"], (4, -1)))
    assert np.array_equal(y, a.reshape(4, 6))
    _, y = one_op({"a": a}, lambda b, i: b.transpose(i["a"], (2, 0, 1)))
    assert np.array_equal(y, np.moveaxis(a, 2, 0))


def test_tril_flatten_is_dlrm_interaction(rng: np.random.Generator) -> None:
    z = rand(rng, 3, 5, 5)
    _, y = one_op({"z": z}, lambda b, i: b.tril_flatten(i["z"]))
    # dlrm's interact_features, arch_interaction_itself=False:
    li = [i for i in range(5) for j in range(i)]
    lj = [j for i in range(5) for j in range(i)]
    assert np.array_equal(y, z[:, li, lj])
    assert y.shape == (3, 10)


# ------------------------------------------------------------- normalisation


@pytest.mark.parametrize("scale", [True, False])
def test_batch_norm(rng: np.random.Generator, scale: bool) -> None:
    x = rand(rng, 2, 3, 4, 5)
    g, y = one_op({"x": x}, lambda b, i: b.batch_norm(i["x"], eps=1e-3, scale=scale))
    p = {k: f64(v)[None, :, None, None] for k, v in g.nodes[1].params.items()}
    want = (f64(x) - p["mean"]) / np.sqrt(p["var"] + 1e-3) * p.get("scale", 1.0) + p["shift"]
    np.testing.assert_allclose(y, want, rtol=1e-12)


def test_batch_norm_against_torch(rng: np.random.Generator, torch: ModuleType) -> None:
    x = rand(rng, 2, 3, 4, 5)
    g, y = one_op({"x": x}, lambda b, i: b.batch_norm(i["x"], eps=1e-5))
    p = {k: T(torch, v) for k, v in g.nodes[1].params.items()}
    want = torch.nn.functional.batch_norm(T(torch, x), p["mean"], p["var"], p["scale"],
                                          p["shift"], training=False, eps=1e-5)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-12)


def test_layer_norm_against_torch(rng: np.random.Generator, torch: ModuleType) -> None:
    x = rand(rng, 2, 3, 16) * 3 + 1
    g, y = one_op({"x": x}, lambda b, i: b.layer_norm(i["x"], eps=1e-12))
    p = g.nodes[1].params
    want = torch.nn.functional.layer_norm(T(torch, x), (16,), T(torch, p["scale"]),
                                          T(torch, p["shift"]), eps=1e-12)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax(rng: np.random.Generator, axis: int) -> None:
    x = rand(rng, 2, 3, 4) * 50
    _, y = one_op({"x": x}, lambda b, i: b.softmax(i["x"], axis=axis))
    e = np.exp(f64(x) - f64(x).max())
    np.testing.assert_allclose(y, e / e.sum(axis=axis, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(y.sum(axis=axis), 1.0, rtol=1e-12)


# ---------------------------------------------------------- the forward pass


def _small_graph() -> Graph:
    b = GraphBuilder("small")
    x = b.input("x", (2, 3))
    h = b.linear(x, 4, relu=True, name="hidden")
    return b.build([b.softmax(b.linear(h, 2), name="out"), h])


def test_outputs_dtypes_and_return_all(rng: np.random.Generator) -> None:
    g = _small_graph()
    x = rand(rng, 2, 3)
    out = reference_forward(g, {"x": x})
    assert list(out) == ["out", "hidden"]
    every = reference_forward(g, {"x": x}, return_all=True)
    assert list(every) == [n.name for n in g]
    assert np.array_equal(every["x"], f64(x))
    low = reference_forward(g, {"x": x}, dtype=np.float32)
    assert low["out"].dtype == np.float32
    np.testing.assert_allclose(low["out"], out["out"], rtol=1e-6)


def test_bad_inputs(rng: np.random.Generator) -> None:
    g = _small_graph()
    with pytest.raises(ValueError, match=r"missing \['x'\], unknown \['y'\]"):
        reference_forward(g, {"y": rand(rng, 2, 3)})
    with pytest.raises(ValueError, match=r"shape \(2, 3\), got \(3, 2\)"):
        reference_forward(g, {"x": rand(rng, 3, 2)})
    with pytest.raises(ValueError, match="floating type"):
        reference_forward(g, {"x": rand(rng, 2, 3)}, dtype=np.int32)
    b = GraphBuilder("emb")
    e = b.build(b.embedding_bag(b.input("idx", (1, 2), "int64"), 5, 3))
    with pytest.raises(ValueError, match="holds indices"):
        reference_forward(e, {"idx": np.ones((1, 2))})


def test_assert_near_scales_with_the_result() -> None:
    """A 1.5e-4 rounding beside results up to 20 passes (a float32 sum of
    thousands of terms), even on an element near zero; the same error among
    results up to 1, or a real error, fails."""
    want = np.linspace(-20.0, 20.0, 101)  # want[50] == 0
    got = want.copy()
    got[50] += 1.5e-4
    assert_near(got, want)
    with pytest.raises(AssertionError):
        assert_near(got / 20.0 + np.where(np.arange(101) == 50, 1.5e-4, 0.0), want / 20.0)
    got[50] += 0.01
    with pytest.raises(AssertionError):
        assert_near(got, want)


def test_relative_error_is_the_worst_difference_over_the_largest_reference() -> None:
    rng = np.random.default_rng(3)
    want = rng.standard_normal((4, 5)).astype(np.float32)
    got = want + rng.uniform(-1e-3, 1e-3, want.shape).astype(np.float32)
    expect = np.abs(got.astype(np.float64) - want).max() / np.abs(want.astype(np.float64)).max()
    assert relative_error(got, want) == pytest.approx(expect, rel=1e-12)
    assert relative_error(want, want) == 0.0
    with pytest.raises(ValueError, match=r"shape \(4, 5\) against \(5, 4\)"):
        relative_error(want, want.T)


def test_output_error_is_the_worst_over_the_outputs_both_runs_have() -> None:
    want = {"a": np.ones((2, 3)), "b": np.full(4, 10.0), "only_want": np.zeros(1)}
    got = {"a": np.ones((2, 3)) + 0.01, "b": np.full(4, 10.0) + 0.5, "only_got": np.zeros(1)}
    # a: 0.01 / 1; b: 0.5 / 10 (the worse); the outputs only one side has are left out.
    assert output_error(got, want) == pytest.approx(0.05)
    with pytest.raises(ValueError, match=r"no output in common: mine \['x'\], theirs \['y'\]"):
        output_error({"x": np.ones(1)}, {"y": np.ones(1)}, labels=("mine", "theirs"))
    with pytest.raises(ValueError, match=r"output 'a': got shape \(3, 2\), want's \(2, 3\)"):
        output_error({"a": np.ones((3, 2))}, want)
