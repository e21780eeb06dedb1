"""quantized_linear / quantized_gemm / quantized_conv2d and their prepared
kernels: against the float64 reference on the dequantised inputs and weights
within the README's tolerances (float32 rounding of the dequantised sum; one
quantisation step for a requantised output), and shown to differ from fp32 on
the unquantised inputs by more than that, so that no test passes by running
fp32; the non-VNNI path under ONEDNN_MAX_CPU_ISA; the quantisation helpers;
the errors."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest
from _support import (
    int8_weight_bits,
    ref_embedding_bag,
    run_isa_capped,
    skip_where_signed_int8_conv_is_refused,
)

import pyparbench as ppb
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.quantization import (
    byte_rowwise_dequantize,
    byte_rowwise_prepack,
    channel_scales,
    dequantize,
    quantize,
    tensor_params,
)
from pyparbench.reference import (
    INT8_ULPS,
    assert_near_int8,
    assert_requantized,
    conv2d_reference,
    int8_conv2d_reference,
    int8_linear_reference,
    requantize,
)

# oneDNN's int8 products run on every architecture (aarch64 too, without ACL).
pytestmark = pytest.mark.aarch64

THREADS = [1, 2, 3]


def real_inputs(rng: np.random.Generator, shape: tuple[int, ...], signed: bool
                ) -> np.ndarray:
    """Float values, none zero, spanning a range whose quantisation fills the
    8-bit range (unsigned: skewed positive, as after a ReLU, with a nonzero
    zero point)."""
    lo = -1.0 if signed else -0.6
    x = rng.uniform(lo, 3.0, size=shape)
    x[x == 0] = 0.5
    return x


def quantized_activations(rng: np.random.Generator, shape: tuple[int, ...], dtype: str
                          ) -> tuple[np.ndarray, np.ndarray, float, int]:
    x = real_inputs(rng, shape, dtype == "int8")
    scale, zp = tensor_params(x, dtype)  # type: ignore[arg-type]
    return x, quantize(x, scale, zp, dtype), scale, zp  # type: ignore[arg-type]


def quantized_weights(rng: np.random.Generator, shape: tuple[int, ...]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # Output channels of different ranges, so that a per-tensor scale would not do.
    w = rng.uniform(-1, 1, size=shape) * rng.uniform(0.1, 2.0, size=(shape[0],) + (1,) *
                                                      (len(shape) - 1))
    w[w == 0] = 0.25
    scales = channel_scales(w, bits=int8_weight_bits())
    return w, quantize(w, scales, 0, "int8", axis=0), scales


def fp32_farther_than_tolerance(got: np.ndarray, fp32_ref: np.ndarray,
                                magnitude: np.ndarray) -> None:
    """The fp32 result on the unquantised inputs is far outside the int8 tolerance."""
    allowed = INT8_ULPS * 2.0**-24 * magnitude
    assert float(np.max(np.abs(got - fp32_ref) / allowed)) > 100


# Odd sizes, a size of one, and K past a cache block.
LINEAR_SHAPES = [(1, 1, 1), (7, 5, 3), (33, 17, 65), (5, 130, 513)]


@pytest.mark.parametrize("m,n,k", LINEAR_SHAPES)
@pytest.mark.parametrize("x_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("threads", THREADS)
def test_quantized_linear_matches_the_dequantised_reference(m: int, n: int, k: int,
                                                            x_dtype: str, threads: int) -> None:
    rng = np.random.default_rng(m * 1000 + n + k)
    x, xq, xs, xz = quantized_activations(rng, (m, k), x_dtype)
    w, wq, ws = quantized_weights(rng, (n, k))
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    got = ppb.ops.quantized_linear(xq, wq, bias, x_scale=xs, x_zero_point=xz, weight_scale=ws,
                                   threads=threads)
    assert got.dtype == np.float32 and got.shape == (m, n)
    want, magnitude = int8_linear_reference(xq, xs, xz, wq, ws, bias)
    assert_near_int8(got, want, magnitude, "linear")
    if k > 1:  # one product quantised: its error may fall under the tolerance by luck
        fp32_farther_than_tolerance(got, x @ w.T + bias, magnitude)


@pytest.mark.parametrize("out_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("threads", THREADS)
def test_requantized_linear_rounds_as_the_reference(out_dtype: str, relu: bool,
                                                    threads: int) -> None:
    rng = np.random.default_rng(11)
    m, n, k = 37, 29, 131
    _, xq, xs, xz = quantized_activations(rng, (m, k), "uint8")
    _, wq, ws = quantized_weights(rng, (n, k))
    bias = rng.uniform(-2, 2, n).astype(np.float32)
    want, _ = int8_linear_reference(xq, xs, xz, wq, ws, bias, relu=relu)
    out_scale, out_zp = tensor_params(want, out_dtype)  # type: ignore[arg-type]
    out_scale *= 0.8  # some outputs saturate
    got = ppb.ops.quantized_linear(xq, wq, bias, x_scale=xs, x_zero_point=xz, weight_scale=ws,
                                   out_dtype=out_dtype,  # type: ignore[arg-type]
                                   out_scale=out_scale, out_zero_point=out_zp, relu=relu,
                                   threads=threads)
    assert got.dtype == np.dtype(out_dtype)
    ref = requantize(want, out_scale, out_zp, out_dtype)
    assert_requantized(got, ref, "linear")
    lo, hi = np.iinfo(out_dtype).min, np.iinfo(out_dtype).max
    assert np.any(ref == hi) or np.any(ref == lo)  # saturation is exercised
    if relu:
        assert int(got.min()) >= out_zp  # ReLU acts before the zero point


@pytest.mark.parametrize("relu", [False, True])
def test_fused_relu_on_the_float_output(relu: bool) -> None:
    rng = np.random.default_rng(3)
    _, xq, xs, xz = quantized_activations(rng, (9, 40), "uint8")
    _, wq, ws = quantized_weights(rng, (12, 40))
    got = ppb.ops.quantized_linear(xq, wq, x_scale=xs, x_zero_point=xz, weight_scale=ws,
                                   relu=relu, threads=2)
    want, magnitude = int8_linear_reference(xq, xs, xz, wq, ws, relu=relu)
    assert_near_int8(got, want, magnitude, "linear")
    assert (got.min() >= 0) == relu


@pytest.mark.parametrize("threads", THREADS)
def test_quantized_gemm_takes_b_as_k_by_n(threads: int) -> None:
    rng = np.random.default_rng(4)
    _, aq, a_s, az = quantized_activations(rng, (17, 45), "uint8")
    _, wq, ws = quantized_weights(rng, (23, 45))
    b = np.ascontiguousarray(wq.T)
    got = ppb.ops.quantized_gemm(aq, b, a_scale=a_s, a_zero_point=az, b_scale=ws,
                                 threads=threads)
    want, magnitude = int8_linear_reference(aq, a_s, az, wq, ws)
    assert_near_int8(got, want, magnitude, "gemm")


# (input NCHW, out channels, kernel, stride, padding (t, b, l, r), dilation, groups)
CONV_CASES = [
    ((1, 3, 11, 9), 5, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 16, 13, 13), 24, (3, 3), (2, 2), (0, 1, 2, 0), (1, 1), 1),
    ((1, 32, 7, 7), 32, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 8, 9, 10), 6, (3, 2), (1, 1), (2, 2, 2, 2), (2, 2), 2),
    ((1, 16, 8, 8), 16, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 16),  # depthwise
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c[0])))
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("x_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("threads", THREADS)
def test_quantized_conv2d_matches_the_dequantised_reference(case: tuple, layout: str,
                                                            x_dtype: str, threads: int) -> None:
    if layout == "nhwc":
        skip_where_signed_int8_conv_is_refused(x_dtype)
    shape, o, (kh, kw), stride, padding, dilation, groups = case
    rng = np.random.default_rng(sum(shape) + o)
    x, xq, xs, xz = quantized_activations(rng, shape, x_dtype)
    w, wq, ws = quantized_weights(rng, (o, shape[1] // groups, kh, kw))
    bias = rng.uniform(-1, 1, o).astype(np.float32)
    x_in = np.ascontiguousarray(xq.transpose(0, 2, 3, 1)) if layout == "nhwc" else xq
    got = ppb.ops.quantized_conv2d(x_in, wq, bias, x_scale=xs, x_zero_point=xz,
                                   weight_scale=ws, stride=stride, padding=padding,
                                   dilation=dilation, groups=groups, layout=layout,
                                   threads=threads)
    if layout == "nhwc":
        got = got.transpose(0, 3, 1, 2)
    want, magnitude = int8_conv2d_reference(xq, xs, xz, wq, ws, bias, stride, padding, dilation,
                                            groups)
    assert_near_int8(got, want, magnitude, "conv2d")
    # The fp32 result on the unquantised values, padded with real zeros as
    # the reference pads the dequantised input.
    fp32 = conv2d_reference(x, w, bias, stride, padding, dilation, groups, False)
    fp32_farther_than_tolerance(got, fp32, magnitude)


@pytest.mark.parametrize("out_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("threads", [1, 3])
def test_requantized_conv2d_with_relu(out_dtype: str, threads: int) -> None:
    rng = np.random.default_rng(8)
    _, xq, xs, xz = quantized_activations(rng, (2, 16, 10, 10), "uint8")
    _, wq, ws = quantized_weights(rng, (32, 16, 3, 3))
    bias = rng.uniform(-1, 1, 32).astype(np.float32)
    geometry = ((1, 1), (1, 1, 1, 1), (1, 1), 1)
    want, _ = int8_conv2d_reference(xq, xs, xz, wq, ws, bias, *geometry, relu=True)
    out_scale, out_zp = tensor_params(want, out_dtype)  # type: ignore[arg-type]
    got = ppb.ops.quantized_conv2d(xq, wq, bias, x_scale=xs, x_zero_point=xz, weight_scale=ws,
                                   padding=1, relu=True,
                                   out_dtype=out_dtype,  # type: ignore[arg-type]
                                   out_scale=out_scale, out_zero_point=out_zp, threads=threads)
    assert_requantized(got, requantize(want, out_scale, out_zp, out_dtype), "conv2d")


def test_prepared_kernels_run_repeatedly_and_time() -> None:
    rng = np.random.default_rng(9)
    _, xq, xs, xz = quantized_activations(rng, (6, 50), "uint8")
    _, wq, ws = quantized_weights(rng, (10, 50))
    lin = ppb.ops.QuantizedLinear(6, 10, 50, weight_scales=list(ws), x_scale=xs,
                                  x_zero_point=xz, threads=2)
    with pytest.raises(ValueError, match="no weights yet"):
        lin.run(xq)
    lin.set_weights(wq)
    out = np.full((6, 10), np.nan, dtype=np.float32)
    assert lin.run(xq, out) is out
    want, magnitude = int8_linear_reference(xq, xs, xz, wq, ws)
    assert_near_int8(out, want, magnitude, "linear")
    assert lin.timeit(xq, repeats=3, warmup=1).shape == (3,)
    assert lin.flops == 2 * 6 * 10 * 50
    assert lin.x_dtype == "uint8" and lin.out_dtype == "float32"


def vnni_expected() -> bool:
    flags = set(cpu_features()["flags"])
    return bool(flags & {"avx512_vnni", "avx_vnni", "amx_int8"})


def test_implementation_says_whether_int8_dot_products_are_native() -> None:
    if cpu_features()["arch"] != "x86_64":
        pytest.skip("the VNNI flags are x86's")
    if os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"):
        pytest.skip("oneDNN's ISA is capped in this process's environment")
    rng = np.random.default_rng(1)
    _, xq, xs, xz = quantized_activations(rng, (32, 64), "uint8")
    _, wq, ws = quantized_weights(rng, (64, 64))
    name, native = ppb.ops.quantized_implementation("quantized_linear", xq, wq, x_scale=xs,
                                                    x_zero_point=xz, weight_scale=ws)
    assert name
    assert native == vnni_expected(), (name, cpu_features()["flags"])


CAPPED_RUN = textwrap.dedent("""
    import json, numpy as np, pyparbench as ppb
    from pyparbench.quantization import channel_scales, quantize, tensor_params
    from pyparbench.reference import int8_linear_reference, int8_conv2d_reference, INT8_ULPS
    rng = np.random.default_rng(5)
    x = rng.uniform(-0.5, 3, (33, 130)); w = rng.uniform(-1, 1, (17, 130))
    # 7-bit weights: without VNNI, oneDNN's vpmaddubsw saturates pairs of
    # full-range u8·s8 products in int16 (README, Precision).
    xs, xz = tensor_params(x, "uint8"); ws = channel_scales(w, bits=7)
    xq = quantize(x, xs, xz, "uint8"); wq = quantize(w, ws, 0, "int8", axis=0)
    c = rng.uniform(-0.5, 3, (1, 16, 8, 8)); k = rng.uniform(-1, 1, (16, 16, 3, 3))
    cs, cz = tensor_params(c, "uint8"); ks = channel_scales(k, bits=7)
    cq = quantize(c, cs, cz, "uint8"); kq = quantize(k, ks, 0, "int8", axis=0)
    def excess(got, ref):
        want, mag = ref
        return float(np.max(np.abs(got - want) / (INT8_ULPS * 2.0**-24 * mag)))
    print(json.dumps({
        "isa": ppb.info()["onednn"]["isa"],
        "linear": ppb.ops.quantized_implementation("quantized_linear", xq, wq, x_scale=xs,
                                                   x_zero_point=xz, weight_scale=ws),
        "conv2d": ppb.ops.quantized_implementation("quantized_conv2d", cq, kq, x_scale=cs,
                                                   x_zero_point=cz, weight_scale=ks,
                                                   padding=1),
        "linear_excess": excess(ppb.ops.quantized_linear(
            xq, wq, x_scale=xs, x_zero_point=xz, weight_scale=ws, threads=2),
            int8_linear_reference(xq, xs, xz, wq, ws)),
        "conv2d_excess": excess(ppb.ops.quantized_conv2d(
            cq, kq, x_scale=cs, x_zero_point=cz, weight_scale=ks, padding=1, threads=3),
            int8_conv2d_reference(cq, cs, cz, kq, ks, None, (1, 1), (1, 1, 1, 1), (1, 1), 1)),
    }))
""")


def test_int8_without_vnni_under_an_avx512_core_cap() -> None:
    """With oneDNN capped to AVX-512 without VNNI, int8 still runs (pairs of
    vpmaddubsw / vpmaddwd stand in for the dot product, or reference code),
    says it is not native, and matches on 7-bit weights."""
    if cpu_features()["arch"] != "x86_64" or "avx512" not in cpu_features()["tiers"]:
        pytest.skip("this CPU has no AVX-512 (flags avx512f/bw/vl/dq): oneDNN cannot be "
                    "capped to avx512_core here")
    r = run_isa_capped(CAPPED_RUN, "AVX512_CORE")
    assert r["isa"] == "avx512_core", r
    assert r["linear"][1] is False and r["conv2d"][1] is False, r
    assert r["linear_excess"] <= 1 and r["conv2d_excess"] <= 1, r


# ------------------------------------------------------------- quantisation


def test_quantize_rounds_half_to_even_and_saturates() -> None:
    q = quantize([0.5, 1.5, 2.5, -0.5, -1.5, 1000.0, -1000.0], 1.0, 0, "int8")
    assert q.dtype == np.int8
    assert q.tolist() == [0, 2, 2, 0, -2, 127, -128]
    u = quantize([0.25, 0.75, -10.0, 10.0], 0.5, 3, "uint8")
    assert u.dtype == np.uint8 and u.tolist() == [3, 5, 0, 23]


def test_dequantize_inverts_quantize_within_half_a_step() -> None:
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 3, (40, 7))
    s, zp = tensor_params(x, "uint8")
    back = dequantize(quantize(x, s, zp, "uint8"), s, zp)
    assert np.max(np.abs(back - x)) <= s / 2 * (1 + 1e-6)
    w = rng.uniform(-1, 1, (5, 9)) * np.arange(1, 6)[:, None]
    ws = channel_scales(w)
    assert ws.shape == (5,) and np.allclose(ws, np.abs(w).max(axis=1) / 127)
    wq = quantize(w, ws, 0, "int8", axis=0)
    assert np.abs(wq.astype(int)).max(axis=1).tolist() == [127] * 5
    assert np.max(np.abs(dequantize(wq, ws, axis=0) - w) / ws[:, None]) <= 0.5 + 1e-6
    w7 = quantize(w, channel_scales(w, bits=7), 0, "int8", axis=0)
    assert np.abs(w7.astype(int)).max(axis=1).tolist() == [63] * 5


def test_tensor_params_cover_the_range() -> None:
    s, zp = tensor_params([-1.0, 3.0], "uint8")
    assert zp == 64 and s == pytest.approx(4 / 255)
    s8, z8 = tensor_params([-1.0, 3.0], "int8")
    assert z8 == 0 and s8 == pytest.approx(3 / 127)


@pytest.mark.parametrize("call,match", [
    (lambda: quantize([1.0], 0.0), "scale must be finite and > 0"),
    (lambda: quantize([1.0], 1.0, 300, "uint8"), r"zero_point must lie in \[0, 255\]"),
    (lambda: quantize([1.0], 1.0, 0, "int4"), "dtype must be 'uint8' or 'int8'"),  # type: ignore
])
def test_quantize_errors(call: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()  # type: ignore[operator]


# ------------------------------------------------------------------- errors


def test_a_weight_zero_point_is_refused_by_name() -> None:
    xq = np.ones((2, 4), dtype=np.uint8)
    wq = np.ones((3, 4), dtype=np.int8)
    with pytest.raises(ValueError, match="weight_zero_point must be 0"):
        ppb.ops.quantized_linear(xq, wq, x_scale=0.1, weight_scale=0.1, weight_zero_point=3)
    with pytest.raises(ValueError, match="weight_zero_point must be 0"):
        ppb.ops.quantized_conv2d(np.ones((1, 4, 3, 3), np.uint8), np.ones((2, 4, 1, 1), np.int8),
                                 x_scale=0.1, weight_scale=0.1, weight_zero_point=[0, 1])


def test_int8_argument_errors() -> None:
    xq = np.ones((2, 4), dtype=np.uint8)
    wq = np.ones((3, 4), dtype=np.int8)
    with pytest.raises(TypeError, match="x must be uint8 or int8"):
        ppb.ops.quantized_linear(xq.astype(np.float32), wq, x_scale=0.1, weight_scale=0.1)
    with pytest.raises(TypeError, match="weight must be int8"):
        ppb.ops.quantized_linear(xq, wq.astype(np.uint8), x_scale=0.1, weight_scale=0.1)
    with pytest.raises(ValueError, match="one scale per output channel"):
        ppb.ops.quantized_linear(xq, wq, x_scale=0.1, weight_scale=[0.1, 0.2])
    with pytest.raises(ValueError, match="needs out_scale"):
        ppb.ops.quantized_linear(xq, wq, x_scale=0.1, weight_scale=0.1, out_dtype="uint8")
    with pytest.raises(ValueError, match="out_dtype must be"):
        ppb.ops.quantized_linear(xq, wq, x_scale=0.1, weight_scale=0.1,
                                 out_dtype="int4")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="x_scale must be a finite number > 0"):
        ppb.ops.quantized_linear(xq, wq, x_scale=-1.0, weight_scale=0.1)
    with pytest.raises(ValueError, match=r"x_zero_point must lie in \[0, 255\]"):
        ppb.ops.quantized_linear(xq, wq, x_scale=0.1, x_zero_point=-3, weight_scale=0.1)
    with pytest.raises(ValueError, match=r"weight_scales\[1\] must be a finite number > 0"):
        ppb.ops.quantized_linear(xq, wq, x_scale=0.1, weight_scale=[0.1, 0.0, 0.1])
    lin = ppb.ops.QuantizedLinear(2, 3, 4, weight_scales=[0.1] * 3, x_dtype="int8")
    lin.set_weights(wq)
    with pytest.raises(TypeError, match="x must be int8"):
        lin.run(xq)


# ------------------------------------------------------ 8-bit embedding bag

def byte_bag_bound(packed: np.ndarray, idx: np.ndarray, off: np.ndarray | None, mode: str,
                   weights: np.ndarray | None) -> np.ndarray:
    """What an fp32 sum of a bag's dequantised rows may be off by, element by
    element: each term w·(q·scale + bias) is rounded about three times (w·scale,
    w·bias, the FMA), each addition once, so at most (L + 4)·2^-24 times the
    sum of the terms' magnitudes |w|·(|q·scale| + |bias|) for a bag of L
    rows; mean divides both by L and rounds once more."""
    scale = packed[:, -8:-4].copy().view("<f4")[:, 0].astype(np.float64)
    bias = packed[:, -4:].copy().view("<f4")[:, 0].astype(np.float64)
    magnitudes = np.abs(packed[:, :-8] * scale[:, None]) + np.abs(bias)[:, None]
    w = None if weights is None else np.abs(weights)
    total = ref_embedding_bag(magnitudes, idx, off, "sum", w)
    lengths = (np.full(total.shape[0], idx.shape[1]) if off is None
               else np.diff(np.append(off, idx.size)))
    ulps = (lengths + 5) * 2.0**-24
    if mode == "mean":
        total = total / np.maximum(lengths, 1)[:, None]
    return np.asarray(ulps[:, None] * total + 1e-30)


def bag_case(rng: np.random.Generator, rows: int, dim: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    table = rng.standard_normal((rows, dim)).astype(np.float32) * rng.uniform(
        0.1, 3, (rows, 1)).astype(np.float32) + rng.uniform(-1, 1, (rows, 1)).astype(np.float32)
    lengths = rng.integers(1, 40, size=23)
    lengths[::5] = 0
    off = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    idx = rng.integers(0, rows, size=int(lengths.sum())).astype(np.int64)
    return table, byte_rowwise_prepack(table), idx, off


@pytest.mark.parametrize("dim", [1, 3, 16, 32, 64, 100, 128, 130])
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_byte_rowwise_embedding_bag_matches_the_dequantised_reference(
        dim: int, mode: str, bag_tier: str, threads: int, rng: np.random.Generator) -> None:
    assert ppb.ops.EmbeddingBag.isa == bag_tier
    table, packed, idx, off = bag_case(rng, 57, dim)
    got = ppb.ops.embedding_bag(packed, idx, off, mode=mode, threads=threads)
    assert got.dtype == np.float32 and got.shape == (23, dim)
    want = ref_embedding_bag(byte_rowwise_dequantize(packed), idx, off, mode, None)
    bound = byte_bag_bound(packed, idx, off, mode, None)
    assert np.all(np.abs(got - want) <= bound), float(np.max(np.abs(got - want) / bound))
    assert (got[::5] == 0).all()  # empty bags give zeros
    # Not the float table's sums: the rows' quantisation shows, far beyond the
    # bound (a row of one value is exact: scale 0, bias the value).
    if dim > 1:
        fp32 = ref_embedding_bag(table, idx, off, mode, None)
        assert float(np.max(np.abs(fp32 - want) / bound)) > 100


@pytest.mark.parametrize("dim", [16, 7])
def test_prepared_byte_rowwise_bag_with_weights_and_int32(dim: int, bag_tier: str,
                                                          rng: np.random.Generator) -> None:
    table = rng.standard_normal((1000, dim)).astype(np.float32)
    packed = byte_rowwise_prepack(table)
    idx = rng.integers(0, 1000, size=(31, 6)).astype(np.int32)
    w = rng.uniform(-1, 1, (31, 6)).astype(np.float32)
    e = ppb.ops.EmbeddingBag(1000, dim, threads=3)
    got = e.run(packed, idx, None, w)
    want = ref_embedding_bag(byte_rowwise_dequantize(packed), idx, None, "sum", w)
    assert np.all(np.abs(got - want) <= byte_bag_bound(packed, idx, None, "sum", w))
    out = np.full(got.shape, np.nan, np.float32)
    assert e.timeit(packed, idx, None, w, out, repeats=2, warmup=1).shape == (2,)
    np.testing.assert_array_equal(out, got)


# Per-sample weights go with mode "sum" only (PyTorch's rule and ours).
@pytest.mark.parametrize("mode,weighted", [("sum", False), ("sum", True), ("mean", False)])
def test_byte_rowwise_bag_matches_pytorch(mode: str, weighted: bool, bag_tier: str,
                                          rng: np.random.Generator) -> None:
    torch = pytest.importorskip("torch", reason="the comparison with PyTorch needs torch")
    table, packed, idx, off = bag_case(rng, 300, 64)
    # Our prepack is PyTorch's, byte for byte.
    theirs = torch.ops.quantized.embedding_bag_byte_prepack(torch.from_numpy(table)).numpy()
    np.testing.assert_array_equal(packed, theirs)
    w = rng.uniform(-1, 1, idx.size).astype(np.float32) if weighted else None
    # PyTorch's op (2.x, CPU) sums whatever its mode argument says: the mean
    # is compared as its sum over the bag's length.
    want = torch.ops.quantized.embedding_bag_byte_rowwise_offsets(
        torch.from_numpy(packed), torch.from_numpy(idx), torch.from_numpy(off), False, 0,
        False, None if w is None else torch.from_numpy(w), None, False).numpy()
    if mode == "mean":
        lengths = np.diff(np.append(off, idx.size))
        want = want / np.maximum(lengths, 1)[:, None]
    got = ppb.ops.embedding_bag(packed, idx, off, mode=mode, per_sample_weights=w, threads=2)
    # Both fp32 sums of the same terms, each within the bound of the exact one.
    bound = byte_bag_bound(packed, idx, off, mode, w)
    assert np.all(np.abs(got - want) <= 2 * bound), float(np.max(np.abs(got - want) / bound))


def test_function_on_a_byte_rowwise_table_takes_the_direct_path(
        rng: np.random.Generator) -> None:
    """A C-contiguous packed table (and indices in the kernel's form) runs
    with no conversion and no cached kernel; a strided copy of it is
    converted, and both give the prepared kernel's sums."""
    _, packed, idx, off = bag_case(rng, 40, 24)
    w = rng.uniform(-1, 1, idx.size).astype(np.float32)
    want = ppb.ops.EmbeddingBag(40, 24, threads=2).run(packed, idx, off, w)
    ppb.ops.clear_cache()
    out = np.full(want.shape, np.nan, np.float32)
    assert ppb.ops.embedding_bag(packed, idx, off, per_sample_weights=w, threads=2,
                                 out=out) is out
    assert len(ppb.ops._CACHE) == 0
    np.testing.assert_array_equal(out, want)
    wide = np.zeros((40, 64), np.uint8)
    wide[:, ::2] = packed
    strided = ppb.ops.embedding_bag(wide[:, ::2], idx, off, per_sample_weights=w, threads=2)
    assert len(ppb.ops._CACHE) == 1
    np.testing.assert_array_equal(strided, want)


def test_byte_rowwise_table_errors() -> None:
    idx = np.zeros(4, dtype=np.int64)
    off = np.array([0, 2], dtype=np.int64)
    with pytest.raises(ValueError, match=r"\(rows, dim \+ 8\)"):
        ppb.ops.embedding_bag(np.zeros((3, 8), np.uint8), idx, off)
    e = ppb.ops.EmbeddingBag(3, 4)
    with pytest.raises(ValueError, match="8-bit rowwise"):
        e.run(np.zeros((3, 4), np.uint8), idx, off)
    with pytest.raises(ValueError, match="leave precision 'fp32'"):
        ppb.ops.embedding_bag(np.zeros((3, 12), np.uint8), idx, off, precision="bf16")
