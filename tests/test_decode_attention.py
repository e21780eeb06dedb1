"""The decode step's attention (new queries against a key / value past and
the new rows) against a float64 numpy reference: the kernel's three ways of
keeping the cache (past read where it is, present written once, a cache
filled in place) and the graph's decode_attention node, at several thread
counts, past lengths 1 and 100, 1 and 4 new rows, grouped-query heads."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

import pyparbench as ppb
from pyparbench._core import ops as core_ops
from pyparbench.executor import compile_graph
from pyparbench.graph import GraphBuilder, transformer_math
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

F64 = npt.NDArray[np.float64]
B, H, HKV, D, DV = 2, 4, 2, 16, 8


def _step(rng: np.random.Generator, past: int, new: int,
          masked: bool) -> dict[str, npt.NDArray[np.float32]]:
    def r(*shape: int) -> npt.NDArray[np.float32]:
        return rng.standard_normal(shape).astype(np.float32)
    t = {"q": r(B, H, new, D), "k_new": r(B, HKV, new, D), "v_new": r(B, HKV, new, DV),
         "past_k": r(B, HKV, past, D), "past_v": r(B, HKV, past, DV)}
    if masked:  # padding: the first key of the second sequence hidden
        m = np.zeros((B, 1, 1, past + new), np.float32)
        m[1, ..., 0] = np.finfo(np.float32).min
        t["mask"] = m
    return t


def _want(t: dict[str, npt.NDArray[np.float32]], scale: float) -> F64:
    """float64 softmax attention, written out with the keys concatenated and
    repeated per head (independent of the kernel's layout)."""
    k = np.concatenate([t["past_k"], t["k_new"]], axis=2).astype(np.float64)
    v = np.concatenate([t["past_v"], t["v_new"]], axis=2).astype(np.float64)
    k, v = np.repeat(k, H // HKV, axis=1), np.repeat(v, H // HKV, axis=1)
    q = t["q"].astype(np.float64)
    s = scale * q @ np.swapaxes(k, -1, -2)
    if "mask" in t:
        s = s + t["mask"].astype(np.float64)
    new, keys = q.shape[2], k.shape[2]
    hidden = np.arange(keys)[None, :] > np.arange(new)[:, None] + keys - new
    s = np.where(hidden, -np.inf, s)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    out: F64 = (e / e.sum(axis=-1, keepdims=True)) @ v
    return out


def _close(got: npt.NDArray[np.float32], want: F64) -> None:
    err = float(np.max(np.abs(got - want)))
    assert err <= 1e-5 * max(1.0, float(np.max(np.abs(want)))), err


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("past", [1, 100])
@pytest.mark.parametrize("new", [1, 4])
@pytest.mark.parametrize("masked", [False, True], ids=["nomask", "mask"])
def test_kernel_matches_float64(threads: int, past: int, new: int, masked: bool) -> None:
    t = _step(np.random.default_rng(past * 10 + new), past, new, masked)
    scale = 0.25
    want = _want(t, scale)
    k = ppb.ops.DecodeAttention(t["q"].shape, t["k_new"].shape, t["v_new"].shape,
                                t["past_k"].shape, mask_shape=t["mask"].shape if masked else None,
                                scale=scale, threads=threads)
    assert k.output_shape == (B, H, new, DV) and k.present_shape == (B, HKV, past + new, D)
    mask = t.get("mask")
    _close(k.run(t["q"], t["k_new"], t["v_new"], t["past_k"], t["past_v"], mask), want)

    out, pk, pv = k.run_present(t["q"], t["k_new"], t["v_new"], t["past_k"], t["past_v"], mask)
    _close(out, want)
    np.testing.assert_array_equal(pk, np.concatenate([t["past_k"], t["k_new"]], axis=2))
    np.testing.assert_array_equal(pv, np.concatenate([t["past_v"], t["v_new"]], axis=2))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("past", [1, 100])
@pytest.mark.parametrize("new", [1, 4])
def test_in_place_cache_is_the_same_step(threads: int, past: int, new: int) -> None:
    """A cache of 128 rows holding the past in its first rows: the new rows
    land at row `past`, rows after them are untouched and never read (NaN)."""
    t = _step(np.random.default_rng(7), past, new, masked=True)
    capacity = 128
    cache_k = np.full((B, HKV, capacity, D), np.nan, np.float32)
    cache_v = np.full((B, HKV, capacity, DV), np.nan, np.float32)
    cache_k[:, :, :past], cache_v[:, :, :past] = t["past_k"], t["past_v"]
    mask = np.full((B, 1, 1, capacity), np.nan, np.float32)
    mask[..., :past + new] = t["mask"]
    k = ppb.ops.DecodeAttention(t["q"].shape, t["k_new"].shape, t["v_new"].shape,
                                cache_k.shape, mask_shape=mask.shape, in_place=True, scale=0.3,
                                threads=threads)
    out = k.run_in_place(t["q"], t["k_new"], t["v_new"], cache_k, cache_v, past, mask)
    _close(out, _want(t, 0.3))
    np.testing.assert_array_equal(cache_k[:, :, past:past + new], t["k_new"])
    np.testing.assert_array_equal(cache_v[:, :, past:past + new], t["v_new"])
    assert np.isnan(cache_k[:, :, past + new:]).all()
    with pytest.raises(ValueError, match="does not fit a cache of 128 rows"):
        k.run_in_place(t["q"], t["k_new"], t["v_new"], cache_k, cache_v, capacity - new + 1,
                       mask)


def test_kernel_refuses_bad_shapes() -> None:
    with pytest.raises(ValueError, match="H a multiple of Hkv"):
        ppb.ops.DecodeAttention((1, 4, 1, 8), (1, 3, 1, 8), (1, 3, 1, 8), (1, 3, 5, 8),
                                scale=1.0)
    with pytest.raises(ValueError, match="H a multiple of Hkv"):  # a past of other heads
        ppb.ops.DecodeAttention((1, 4, 1, 8), (1, 2, 1, 8), (1, 2, 1, 8), (1, 4, 5, 8),
                                scale=1.0)
    with pytest.raises(ValueError,
                       match=r"mask \(1, 1, 1, 5\) does not broadcast into \(1, 4, 1, 6\)"):
        ppb.ops.DecodeAttention((1, 4, 1, 8), (1, 2, 1, 8), (1, 2, 1, 8), (1, 2, 5, 8),
                                mask_shape=(1, 1, 1, 5), scale=1.0)
    k = ppb.ops.DecodeAttention((1, 4, 1, 8), (1, 2, 1, 8), (1, 2, 1, 8), (1, 2, 5, 8),
                                scale=1.0)
    z = np.zeros
    with pytest.raises(ValueError, match="runs in place|not in place"):
        k.run_in_place(z((1, 4, 1, 8), np.float32), z((1, 2, 1, 8), np.float32),
                       z((1, 2, 1, 8), np.float32), z((1, 2, 5, 8), np.float32),
                       z((1, 2, 5, 8), np.float32), 0)


_SETTINGS = [Settings(), Settings(intra_op=2), Settings(operator="framework", intra_op=2)]


@pytest.mark.parametrize("settings", _SETTINGS, ids=["1", "2", "framework2"])
@pytest.mark.parametrize("past", [1, 100])
@pytest.mark.parametrize("new", [1, 4])
def test_graph_node_and_present_concat(settings: Settings, past: int, new: int) -> None:
    t = _step(np.random.default_rng(3), past, new, masked=True)
    b = GraphBuilder("decode_step")
    ids = {n: b.input(n, a.shape) for n, a in t.items()}
    y = b.decode_attention(ids["q"], ids["k_new"], ids["v_new"], ids["past_k"], ids["past_v"],
                           ids["mask"], name="y")
    pk = b.concat([ids["past_k"], ids["k_new"]], axis=2, name="present_k")
    g = b.build([y, pk])
    want = _want(t, 1 / np.sqrt(D))
    ref = reference_forward(g, dict(t), np.float64)
    np.testing.assert_allclose(ref["y"], want, rtol=1e-12, atol=1e-12)
    cg = compile_graph(g)
    cg.set_inputs(t)
    cg.run(settings, repeats=1, warmup=0)
    out = cg.outputs()
    _close(out["y"], want)
    np.testing.assert_array_equal(out["present_k"],
                                  np.concatenate([t["past_k"], t["k_new"]], axis=2))
    assert g.nodes[y].attrs["scale"] == pytest.approx(1 / np.sqrt(D))


def test_math_matches_attention_over_the_concatenated_keys() -> None:
    t = _step(np.random.default_rng(5), 6, 3, masked=False)
    got = transformer_math.decode_attention(t["q"], t["k_new"], t["v_new"], t["past_k"],
                                            t["past_v"], None, 0.5)
    np.testing.assert_allclose(got, _want(t, 0.5), rtol=1e-5, atol=1e-6)


def test_builder_refuses_bad_shapes() -> None:
    b = GraphBuilder("bad")
    q, kn = b.input("q", (1, 4, 1, 8)), b.input("kn", (1, 2, 1, 8))
    past3 = b.input("past3", (1, 3, 5, 8))
    with pytest.raises(ValueError, match="H a multiple of Hkv"):
        b.decode_attention(q, kn, kn, past3, past3)
    past = b.input("past", (1, 2, 5, 8))
    m = b.input("m", (1, 1, 1, 5))
    with pytest.raises(ValueError, match=r"mask \(1, 1, 1, 5\) does not broadcast into "
                                         r"\(1, 4, 1, 6\)"):
        b.decode_attention(q, kn, kn, past, past, m)


# Every tier the decode attention kernel is built for; those this CPU does
# not run are skipped, naming the flags they need.
_DECODE_TIERS = {"avx512": "avx512f/bw/vl/dq, fma", "avx2": "avx2, fma", "generic": ""}


def _general_want(t: dict[str, npt.NDArray[np.float32]], scale: float, fill: float) -> F64:
    """float64 attention of any head / key width, hidden keys scoring `fill`
    (-inf: left out)."""
    h, hkv = t["q"].shape[1], t["k_new"].shape[1]
    k = np.concatenate([t["past_k"], t["k_new"]], axis=2).astype(np.float64)
    v = np.concatenate([t["past_v"], t["v_new"]], axis=2).astype(np.float64)
    k, v = np.repeat(k, h // hkv, axis=1), np.repeat(v, h // hkv, axis=1)
    s = scale * t["q"].astype(np.float64) @ np.swapaxes(k, -1, -2)
    if "mask" in t:
        s = s + t["mask"].astype(np.float64)
    new, keys = s.shape[2], s.shape[3]
    hidden = np.arange(keys)[None, :] > np.arange(new)[:, None] + keys - new
    s = np.where(hidden, fill, s)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    out: F64 = (e / e.sum(axis=-1, keepdims=True)) @ v
    return out


@pytest.mark.parametrize("tier", sorted(_DECODE_TIERS))
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dims", [(20, 24), (64, 64)], ids=["d20dv24", "d64"])
@pytest.mark.parametrize("fill", [-np.inf, 0.5], ids=["causal", "fill"])
def test_every_isa_tier_matches_float64(tier: str, threads: int, dims: tuple[int, int],
                                        fill: float) -> None:
    """Head widths that leave a partial vector in every tier, a past (37)
    that leaves one in the exponentials, four new rows so the causal part
    hides keys, and a mask with a hidden key (-inf) and a large negative one."""
    if tier not in cpu_features()["tiers"]:
        pytest.skip(f"this CPU does not run the {tier} decode attention kernel (flags "
                    f"{_DECODE_TIERS[tier]})")
    d, dv = dims
    b, h, hkv, past, new = 2, 8, 2, 37, 4
    rng = np.random.default_rng(d + dv + threads)

    def r(*shape: int) -> npt.NDArray[np.float32]:
        return rng.standard_normal(shape).astype(np.float32)
    t = {"q": r(b, h, new, d), "k_new": r(b, hkv, new, d), "v_new": r(b, hkv, new, dv),
         "past_k": r(b, hkv, past, d), "past_v": r(b, hkv, past, dv),
         "mask": r(b, 1, new, past + new)}
    t["mask"][0, :, :, 3] = -np.inf
    t["mask"][1, :, :, 5] = -1e30
    scale = 1 / np.sqrt(d)
    want = _general_want(t, scale, fill)
    k = ppb.ops.DecodeAttention(t["q"].shape, t["k_new"].shape, t["v_new"].shape,
                                t["past_k"].shape, mask_shape=t["mask"].shape, scale=scale,
                                causal_fill=fill, threads=threads)
    core_ops.set_decode_attention_isa(tier)
    try:
        assert cpu_features()["kernels"]["decode_attention"] == tier
        got = k.run(t["q"], t["k_new"], t["v_new"], t["past_k"], t["past_v"], t["mask"])
        again = k.run(t["q"], t["k_new"], t["v_new"], t["past_k"], t["past_v"], t["mask"])
    finally:
        core_ops.set_decode_attention_isa("auto")
    _close(got, want)
    np.testing.assert_array_equal(got, again)


def test_decode_attention_isa_names_the_bad_value() -> None:
    with pytest.raises(ValueError, match="unknown ISA 'sse9'"):
        core_ops.set_decode_attention_isa("sse9")
