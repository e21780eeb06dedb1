"""Native kernels of transformer graphs, each against numpy on random inputs
at several thread counts and in both operator modes."""

from __future__ import annotations

import numpy as np
import pytest

from pyparbench import ops
from pyparbench.executor import compile_graph
from pyparbench.graph import Graph, GraphBuilder, transformer_math
from pyparbench.graph.positions import padded_positions
from pyparbench.reference import assert_near, reference_forward
from pyparbench.settings import Settings

_SETTINGS = [Settings(), Settings(intra_op=2), Settings(operator="framework", intra_op=2)]


@pytest.mark.parametrize("settings", _SETTINGS, ids=["1", "2", "framework2"])
def test_position_ids_lookup_matches_numpy(settings: Settings) -> None:
    b = GraphBuilder("positions")
    ids = b.input("ids", (3, 7), "int64")
    pos = b.position_ids(ids, pad_id=1, offset=1, name="positions")
    flat = b.reshape(pos, (21, 1), name="flat")
    e = b.embedding_bag(flat, 9, 4, name="lookup")
    g = b.build(e)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, (3, 7)).astype(np.int64)
    x[0, 0] = 1  # a padding id first
    x[2] = 1  # a row of padding alone
    want = g.nodes[e].params["table"][padded_positions(x, 1, 1).reshape(-1)]
    assert np.array_equal(reference_forward(g, {"ids": x}, np.float32)["lookup"], want)
    cg = compile_graph(g)
    cg.set_inputs({"ids": x})
    cg.run(settings, repeats=1, warmup=0)
    np.testing.assert_array_equal(cg.outputs()["lookup"], want)


def test_padded_positions() -> None:
    ids = np.array([[5, 1, 7, 7, 1], [1, 1, 2, 3, 4]])
    assert padded_positions(ids, 1, 1).tolist() == [[2, 1, 3, 4, 1], [1, 1, 2, 3, 4]]
    with pytest.raises(ValueError, match=r"\(batch, seq\)"):
        padded_positions(np.zeros(3), 1, 1)


def test_position_ids_refuses_float_ids() -> None:
    b = GraphBuilder("positions")
    x = b.input("x", (2, 3))
    with pytest.raises(ValueError, match="int64 ids"):
        b.position_ids(x, pad_id=0, offset=0)


def _run_native(g: Graph, inputs: dict[str, np.ndarray], settings: Settings) -> np.ndarray:
    cg = compile_graph(g)
    cg.set_inputs(inputs)
    cg.run(settings, repeats=1, warmup=0)
    (out,) = cg.outputs().values()
    return out


def _check(g: Graph, settings: Settings, seed: int = 0) -> None:
    """The native output against the float64 numpy reference."""
    inputs = g.random_inputs(seed)
    want = reference_forward(g, inputs)
    (name,) = want
    assert_near(_run_native(g, inputs, settings), want[name])


@pytest.mark.parametrize("settings", _SETTINGS, ids=["1", "2", "framework2"])
@pytest.mark.parametrize("shape", [(2, 5, 48), (7, 1000)])
def test_rms_norm(settings: Settings, shape: tuple[int, ...]) -> None:
    b = GraphBuilder("rms")
    y = b.rms_norm(b.input("x", shape), eps=1e-5, name="y")
    _check(b.build(y), settings)


@pytest.mark.parametrize("settings", _SETTINGS, ids=["1", "2", "framework2"])
def test_rotary(settings: Settings) -> None:
    b = GraphBuilder("rotary")
    y = b.rotary(b.input("x", (2, 3, 5, 8)), name="y")
    _check(b.build(y), settings)


@pytest.mark.parametrize("settings", _SETTINGS, ids=["1", "2", "framework2"])
@pytest.mark.parametrize("kind", ["swish", "gelu", "gelu_tanh"])
def test_glu(settings: Settings, kind: str) -> None:
    b = GraphBuilder("glu")
    y = b.glu(b.input("g", (3, 40)), b.input("u", (3, 40)), kind, name="y")
    _check(b.build(y), settings)


@pytest.mark.parametrize("settings", _SETTINGS, ids=["1", "2", "framework2"])
@pytest.mark.parametrize(("heads", "kv_heads", "sq", "sk", "mask", "causal"), [
    (4, 2, 6, 6, (2, 1, 1, 6), True),  # grouped-query, padding mask, causal
    (4, 4, 6, 6, (1, 1, 6, 6), False),  # a full additive mask
    (4, 1, 3, 7, None, True),  # queries at the end of longer keys (decode-like)
])
def test_attention(settings: Settings, heads: int, kv_heads: int, sq: int, sk: int,
                   mask: tuple[int, ...] | None, causal: bool) -> None:
    b = GraphBuilder("attention")
    q = b.input("q", (2, heads, sq, 8))
    k = b.input("k", (2, kv_heads, sk, 8))
    v = b.input("v", (2, kv_heads, sk, 5))
    m = b.input("mask", mask) if mask is not None else None
    y = b.attention(q, k, v, m, causal=causal, name="y")
    g = b.build(y)
    inputs = g.random_inputs(0)
    if mask is not None:  # padding: keys hidden by a large negative number, one row by -inf
        inputs["mask"] = np.where(inputs["mask"] > 0.3, np.float32(-3.4e38), 0).astype(
            np.float32)
        inputs["mask"].reshape(-1, mask[-1])[0] = -np.inf
    want = reference_forward(g, inputs)["y"]
    got = _run_native(g, inputs, settings)
    assert_near(got, want)
    if mask is not None:  # a row whose scores are all -inf is zero, as the exporters' NaN guard
        dead = np.all(want == 0, axis=-1)
        assert dead.any() and np.all(got[dead] == 0)


def test_attention_causal_fill_keeps_hidden_keys_in_a_row_that_sees_none() -> None:
    """A query whose seen keys are all padded weighs every key alike, as the
    exporters' masks of the float32 minimum make it (no NaN, no zero row)."""
    q, k, v = np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 2, 2)), np.array([[[[1.0], [3.0]]]])
    pad = np.array([[[[-np.inf, 0.0]]]])
    out = transformer_math.attention(q, k, v, pad, True, 1.0, -3.4e38)
    assert out[0, 0, :, 0].tolist() == [3.0, 3.0]  # query 0 sees key 0 (padded) alone
    out = transformer_math.attention(q, k, v, np.full((1, 1, 1, 2), -3.4e38), True, 1.0,
                                     -3.4e38)
    assert out[0, 0, :, 0].tolist() == [2.0, 2.0]


def test_attention_math_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(s) for s in ((2, 4, 5, 8), (2, 2, 5, 8), (2, 2, 5, 3)))
    mask = np.where(rng.random((2, 1, 1, 5)) > 0.3, 0.0, -1e9)
    got = transformer_math.attention(q, k, v, mask, True, 0.3)
    tq, tk, tv = (torch.from_numpy(np.repeat(t, 2, axis=1) if t is not q else t)
                  for t in (q, k, v))
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    full = torch.from_numpy(mask).masked_fill(~causal, float("-inf"))
    want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, full, scale=0.3)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-12)


def test_transformer_ops_refuse_bad_shapes() -> None:
    b = GraphBuilder("bad")
    q, k = b.input("q", (1, 3, 4, 8)), b.input("k", (1, 2, 4, 8))
    with pytest.raises(ValueError, match="multiple of Hkv"):
        b.attention(q, k, k)
    with pytest.raises(ValueError, match="D even"):
        b.rotary(b.input("x", (2, 3)))
    with pytest.raises(ValueError, match="one shape"):
        b.glu(q, k)
    with pytest.raises(ValueError, match="glu kind"):
        b.glu(q, q, "relu")


# ---------------------------------------------------------- prepared kernels


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("threads", [1, 2])
def test_prepared_rms_norm_and_rotary_match_the_reference(threads: int) -> None:
    rng = np.random.default_rng(threads)
    x, scale = _f32(rng, 2, 5, 48), _f32(rng, 48)
    k = ops.RmsNorm(x.shape, eps=1e-5, threads=threads)
    assert k.output_shape == x.shape
    want = transformer_math.rms_norm(x.astype(np.float64), scale.astype(np.float64), 1e-5)
    assert_near(k.run(x, scale), want)
    out = np.empty_like(x)
    assert len(k.timeit(x, scale, out, repeats=3, warmup=1)) == 3
    assert_near(out, want)

    x, cos, sin = _f32(rng, 2, 3, 5, 8), _f32(rng, 5, 8), _f32(rng, 5, 8)
    r = ops.Rotary(x.shape, threads=threads)
    want = transformer_math.rotary(*(t.astype(np.float64) for t in (x, cos, sin)))
    assert_near(r.run(x, cos, sin), want)
    out = np.empty_like(x)
    assert len(r.timeit(x, cos, sin, out, repeats=2, warmup=0)) == 2
    assert_near(out, want)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["swish", "gelu", "gelu_tanh"])
def test_prepared_glu_matches_the_reference(threads: int, kind: str) -> None:
    rng = np.random.default_rng(3)
    gate, up = _f32(rng, 3, 40), _f32(rng, 3, 40)
    k = ops.Glu(kind, gate.shape, threads=threads)
    want = transformer_math.glu(gate.astype(np.float64), up.astype(np.float64), kind)
    assert_near(k.run(gate, up), want)
    out = np.empty_like(gate)
    assert len(k.timeit(gate, up, out, repeats=2, warmup=1)) == 2
    assert_near(out, want)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("mask", "causal"), [((2, 1, 1, 7), True), (None, True),
                                              ((1, 1, 3, 7), False)])
def test_prepared_attention_matches_the_reference(threads: int, mask: tuple[int, ...] | None,
                                                  causal: bool) -> None:
    """Grouped-query heads (4 over 2), queries at the end of longer keys."""
    rng = np.random.default_rng(4)
    q, kk, v = _f32(rng, 2, 4, 3, 8), _f32(rng, 2, 2, 7, 8), _f32(rng, 2, 2, 7, 5)
    m = None if mask is None else np.where(rng.random(mask) > 0.3, 0, -1e9).astype(np.float32)
    k = ops.Attention(q.shape, kk.shape, v.shape, mask_shape=mask, causal=causal, scale=0.3,
                      threads=threads)
    assert k.output_shape == (2, 4, 3, 5)
    want = transformer_math.attention(q.astype(np.float64), kk.astype(np.float64),
                                      v.astype(np.float64), m, causal, 0.3,
                                      float(np.finfo(np.float32).min))
    assert_near(k.run(q, kk, v, m), want)
    out = np.empty(k.output_shape, np.float32)
    assert len(k.timeit(q, kk, v, m, out, repeats=2, warmup=1)) == 2
    assert_near(out, want)


def test_prepared_decoder_kernels_refuse_wrong_shapes_naming_them() -> None:
    x = np.zeros((2, 5, 8), np.float32)
    with pytest.raises(ValueError, match=r"scale has shape \(7,\), expected \(8,\)"):
        ops.RmsNorm(x.shape).run(x, np.zeros(7, np.float32))
    with pytest.raises(ValueError, match=r"cos has shape \(4, 8\), expected \(5, 8\)"):
        ops.Rotary(x.shape).timeit(x, np.zeros((4, 8), np.float32), np.zeros((5, 8), np.float32))
    with pytest.raises(ValueError, match=r"up has shape \(2, 5, 9\)"):
        ops.Glu("swish", x.shape).run(x, np.zeros((2, 5, 9), np.float32))
    with pytest.raises(ValueError, match="glu kind must be swish, gelu or gelu_tanh, got 'relu'"):
        ops.Glu("relu", x.shape)
    with pytest.raises(ValueError, match="D even"):
        ops.Rotary((2, 5, 7))
    q = np.zeros((1, 4, 3, 8), np.float32)
    k = ops.Attention(q.shape, (1, 2, 3, 8), (1, 2, 3, 8), scale=1.0)
    with pytest.raises(ValueError, match=r"k has shape \(1, 2, 3, 4\)"):
        k.run(q, np.zeros((1, 2, 3, 4), np.float32), np.zeros((1, 2, 3, 8), np.float32))
    with pytest.raises(ValueError, match="made without a mask"):
        k.run(q, np.zeros((1, 2, 3, 8), np.float32), np.zeros((1, 2, 3, 8), np.float32),
              np.zeros((1, 1, 1, 3), np.float32))
    with pytest.raises(ValueError, match="multiple of Hkv"):
        ops.Attention((1, 3, 3, 8), (1, 2, 3, 8), (1, 2, 3, 8), scale=1.0)
    with pytest.raises(ValueError, match="does not broadcast"):
        ops.Attention(q.shape, (1, 2, 3, 8), (1, 2, 3, 8), mask_shape=(1, 1, 2, 3), scale=1.0)


@pytest.mark.parametrize("threads", [1, 2])
def test_prepared_position_ids_match_the_reference(threads: int) -> None:
    ids = np.array([[5, 1, 7, 7, 1], [1, 1, 2, 3, 4], [1, 1, 1, 1, 1]], np.int64)
    k = ops.PositionIds(ids.shape, pad_id=1, offset=2, threads=threads)
    assert k.output_shape == ids.shape
    got = k.run(ids)
    assert got.dtype == np.int64 and np.array_equal(got, padded_positions(ids, 1, 2))
    out = np.zeros_like(ids)
    assert len(k.timeit(ids, out, repeats=2, warmup=0)) == 2
    assert np.array_equal(out, padded_positions(ids, 1, 2))
    with pytest.raises(ValueError, match=r"ids has shape \(3, 4\), expected \(3, 5\)"):
        k.run(ids[:, :4].copy())
    with pytest.raises(TypeError, match="ids must be int64, got int32"):
        k.run(ids.astype(np.int32))
    with pytest.raises(TypeError, match="out must be int32 or int64"):
        k.run(ids, np.zeros(ids.shape, np.float32))
    frozen = np.zeros_like(ids)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        k.run(ids, frozen)
    with pytest.raises(ValueError, match=r"\(batch, seq\)"):
        ops.PositionIds((2, 3, 4), pad_id=1, offset=0)
