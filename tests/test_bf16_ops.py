"""gemm / linear / conv2d / embedding_bag and their prepared kernels in bf16: against the
bf16 reference (float64 on the bf16-rounded inputs and weights) within the
README's tolerance, and shown to differ from fp32 by more than that, so that
no test passes by running fp32; the emulated path under ONEDNN_MAX_CPU_ISA;
the precision's errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from _support import IMPORTED_FROM, needs_onednn_bf16, rand, ref_embedding_bag, run_isa_capped

import pyparbench as ppb
from pyparbench._core import ops as _ops
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.reference import (
    BF16_TOLERANCE,
    assert_near_bf16,
    conv2d_reference,
    gemm_reference,
    relative_error,
    round_to_bf16,
)

# Debian 12 packages no ml_dtypes (the aarch64 job fetches its wheel).
ml_dtypes = pytest.importorskip("ml_dtypes", reason="bf16 needs ml_dtypes (numpy's bfloat16)")
BF16 = ml_dtypes.bfloat16


def assert_bf16_not_fp32(got: np.ndarray, want_bf16: np.ndarray, want_fp32: np.ndarray,
                         op: str) -> None:
    """got matches the bf16 reference, and the fp32 reference is farther from
    it than the tolerance (the inputs' bf16 rounding shows)."""
    assert got.dtype == np.float32
    assert np.all(np.isfinite(got))
    assert_near_bf16(got, want_bf16, op)
    assert relative_error(want_fp32, want_bf16) > 3 * BF16_TOLERANCE[op]


# Odd sizes, a size of one, and K from 1 to past a cache block.
GEMM_SHAPES = [(1, 1, 1), (7, 5, 3), (33, 17, 65), (64, 48, 200), (5, 130, 513)]


@needs_onednn_bf16()
@pytest.mark.parametrize("m,n,k", GEMM_SHAPES)
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True)])
@pytest.mark.parametrize("batch", [0, 3])
def test_gemm_bf16_matches_reference(m: int, n: int, k: int, trans_a: bool, trans_b: bool,
                                     batch: int, threads: int,
                                     rng: np.random.Generator) -> None:
    lead = (batch,) if batch else ()
    a = rand(rng, *lead, *((k, m) if trans_a else (m, k)))
    b = rand(rng, *lead, *((n, k) if trans_b else (k, n)))
    got = ppb.ops.gemm(a, b, trans_a=trans_a, trans_b=trans_b, threads=threads,
                       precision="bf16")
    want = gemm_reference(a, b, trans_a=trans_a, trans_b=trans_b, precision="bf16")
    assert_near_bf16(got, want, "gemm")
    if k >= 3:  # one or two products may happen to round alike
        assert_bf16_not_fp32(got, want, gemm_reference(a, b, trans_a=trans_a, trans_b=trans_b),
                             "gemm")


@needs_onednn_bf16()
@pytest.mark.parametrize("relu", [False, True])
def test_gemm_bf16_bias_relu_and_bf16_inputs(relu: bool, threads: int,
                                             rng: np.random.Generator) -> None:
    a, b, bias = rand(rng, 19, 29).astype(BF16), rand(rng, 29, 23).astype(BF16), rand(rng, 23)
    got = ppb.ops.gemm(a, b, bias, relu=relu, threads=threads, precision="bf16")
    assert_near_bf16(got, gemm_reference(a, b, bias, relu=relu, precision="bf16"), "gemm")
    if relu:
        assert (got >= 0).all() and (got == 0).any()
@needs_onednn_bf16()
def test_prepared_gemm_bf16_run_and_timeit(threads: int, rng: np.random.Generator) -> None:
    g = ppb.ops.Gemm(37, 21, 130, batch=2, bias=True, threads=threads, precision="bf16")
    assert g.precision == "bf16"
    a, b, bias = rand(rng, 2, 37, 130), rand(rng, 2, 130, 21), rand(rng, 21)
    out = np.full(g.output_shape, np.nan, np.float32)
    g.run(a.astype(BF16), b.astype(BF16), bias, out)
    want = gemm_reference(a, b, bias, precision="bf16")
    assert_bf16_not_fp32(out, want, gemm_reference(a, b, bias), "gemm")
    out[...] = np.nan
    ns = g.timeit(a.astype(BF16), b.astype(BF16), bias, out, repeats=3, warmup=1)
    assert ns.shape == (3,) and (ns > 0).all()
    assert_near_bf16(out, want, "gemm")


@needs_onednn_bf16()
@pytest.mark.parametrize("m,n,k", [(1, 9, 17), (13, 31, 96), (64, 128, 257)])
def test_linear_bf16(m: int, n: int, k: int, threads: int, rng: np.random.Generator) -> None:
    x, w, bias = rand(rng, m, k), rand(rng, n, k), rand(rng, n)
    want = gemm_reference(x, w, bias, trans_b=True, precision="bf16")
    fp32 = gemm_reference(x, w, bias, trans_b=True)
    got = ppb.ops.linear(x, w, bias, threads=threads, precision="bf16")
    assert_bf16_not_fp32(got, want, fp32, "linear")
    # The prepared kernel rounds float32 weights itself, or takes bf16 ones.
    for weight in (w, w.astype(BF16)):
        lin = ppb.ops.Linear(m, n, k, bias=True, threads=threads, precision="bf16")
        lin.set_weights(weight, bias)
        assert_bf16_not_fp32(lin.run(x.astype(BF16)), want, fp32, "linear")


CONV_CASES = [
    # x shape (NCHW), out channels, kernel, stride, padding, dilation, groups
    ((2, 16, 9, 9), 24, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 3, 17, 13), 8, (5, 3), (2, 1), (2, 1, 0, 1), (1, 1), 1),
    ((1, 12, 8, 8), 12, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 12),
    ((3, 32, 7, 7), 64, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 8, 11, 11), 16, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 2),
]


@needs_onednn_bf16()
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c[0])))
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_conv2d_bf16(case: tuple, layout: str, threads: int,  # type: ignore[type-arg]
                     rng: np.random.Generator) -> None:
    shape, o, kernel, stride, padding, dilation, groups = case
    x, w, bias = rand(rng, *shape), rand(rng, o, shape[1] // groups, *kernel), rand(rng, o)
    want = conv2d_reference(x, w, bias, stride, padding, dilation, groups, False,
                            precision="bf16")
    fp32 = conv2d_reference(x, w, bias, stride, padding, dilation, groups, False)
    xin = x.transpose(0, 2, 3, 1).copy() if layout == "nhwc" else x
    got = ppb.ops.conv2d(xin, w, bias, stride=stride, padding=padding, dilation=dilation,
                         groups=groups, layout=layout, threads=threads, precision="bf16")
    if layout == "nhwc":
        got = got.transpose(0, 3, 1, 2)
    assert_bf16_not_fp32(got, want, fp32, "conv2d")
@needs_onednn_bf16()
def test_prepared_conv2d_bf16(threads: int, rng: np.random.Generator) -> None:
    x, w = rand(rng, 2, 16, 10, 10), rand(rng, 32, 16, 3, 3)
    want = conv2d_reference(x, w, None, (1, 1), (1, 1, 1, 1), (1, 1), 1, True, precision="bf16")
    fp32 = conv2d_reference(x, w, None, (1, 1), (1, 1, 1, 1), (1, 1), 1, True)
    conv = ppb.ops.Conv2d(x.shape, 32, 3, padding=1, relu=True, threads=threads,
                          precision="bf16")
    assert conv.precision == "bf16"
    for weight in (w, w.astype(BF16)):
        conv.set_weights(weight)
        assert_bf16_not_fp32(conv.run(x.astype(BF16)), want, fp32, "conv2d")
    out = np.full(conv.output_shape, np.nan, np.float32)
    assert conv.timeit(x.astype(BF16), out, repeats=2, warmup=1).shape == (2,)
    assert_near_bf16(out, want, "conv2d")


def test_round_to_bf16_is_nearest_even() -> None:
    # 1 + 2^-8 lies halfway between bf16's 1 and 1 + 2^-7: even (1) wins;
    # 1 + 3·2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: 1 + 2^-6 wins.
    got = round_to_bf16(np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-12], np.float32))
    np.testing.assert_array_equal(got, [1.0, 1 + 2**-6, 1 + 2**-7])


# --------------------------------------------------------------- errors


@pytest.mark.parametrize("bad", ["fp16", "BF16", "int8", ""])
def test_bad_precision_names_the_value(bad: str) -> None:
    a = np.ones((2, 2), np.float32)
    for call in (lambda: ppb.ops.gemm(a, a, precision=bad),  # type: ignore[arg-type]
                 lambda: ppb.ops.linear(a, a, precision=bad),  # type: ignore[arg-type]
                 lambda: ppb.ops.Gemm(2, 2, 2, precision=bad),  # type: ignore[arg-type]
                 lambda: ppb.ops.Linear(2, 2, 2, precision=bad),  # type: ignore[arg-type]
                 lambda: ppb.ops.Conv2d((1, 1, 3, 3), 1, 1, precision=bad)):  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=f"precision must be 'fp32' or 'bf16', got '{bad}'"):
            call()


@pytest.mark.parametrize("library", ["eigen", "blas"])
def test_bf16_needs_the_onednn_library(library: str) -> None:
    a = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="computes fp32 only, got precision 'bf16'"):
        ppb.ops.gemm(a, a, library=library, precision="bf16")
    with pytest.raises(ValueError, match="computes fp32 only"):
        ppb.ops.conv2d(np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 1, 1), np.float32),
                       library=library, precision="bf16")
    with pytest.raises(ValueError, match="GemmConv2d computes fp32 only"):
        ppb.ops.GemmConv2d((1, 3, 3, 4), 4, 1, nhwc=True, precision="bf16")


def test_weights_of_either_type(rng: np.random.Generator) -> None:
    """An fp32 Conv2d takes bfloat16 weights as their exact float32 values; a
    convolution without a bf16 path refuses them, saying what it takes."""
    x, w = rand(rng, 1, 4, 6, 6), rand(rng, 8, 4, 3, 3).astype(BF16)
    conv = ppb.ops.Conv2d(x.shape, 8, 3)
    conv.set_weights(w)
    got = conv.run(x)
    conv.set_weights(w.astype(np.float32))
    np.testing.assert_array_equal(got, conv.run(x))
    with pytest.raises(ValueError, match="EigenConv2d takes float32 weights only"):
        ppb.ops.EigenConv2d(x.shape, 8, 3).set_weights(w)
@needs_onednn_bf16()
def test_prepared_kernels_take_their_precision_only() -> None:
    f32 = np.ones((4, 4), np.float32)
    g16 = ppb.ops.Gemm(4, 4, 4, precision="bf16")
    with pytest.raises(TypeError, match="a must be bfloat16.*ml_dtypes.bfloat16"):
        g16.run(f32, f32)
    with pytest.raises(TypeError, match="must be float32"):
        ppb.ops.Gemm(4, 4, 4).run(f32.astype(BF16), f32.astype(BF16))
    lin = ppb.ops.Linear(4, 4, 4, precision="bf16")
    lin.set_weights(f32)
    with pytest.raises(TypeError, match="x must be bfloat16"):
        lin.run(f32)
    conv = ppb.ops.Conv2d((1, 4, 3, 3), 4, 1, precision="bf16")
    conv.set_weights(np.ones((4, 4, 1, 1), np.float32))
    with pytest.raises(TypeError, match="x must be bfloat16"):
        conv.run(np.ones((1, 4, 3, 3), np.float32))


def test_pyparbench_imports_without_ml_dtypes() -> None:
    """Without ml_dtypes (Debian 12 packages none) everything but bf16 runs,
    and bf16 says what to install."""
    code = textwrap.dedent("""
        import sys
        sys.modules["ml_dtypes"] = None  # import ml_dtypes now raises ImportError
        import numpy as np
        import pyparbench as ppb
        from pyparbench.reference import gemm_reference
        a = np.ones((3, 3), np.float32)
        assert (ppb.ops.gemm(a, a) == gemm_reference(a, a)).all()
        try:
            ppb.ops.gemm(a, a, precision="bf16")
        except ImportError as e:
            print(e)
    """)
    env = dict(os.environ, PYTHONPATH=IMPORTED_FROM)
    done = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    assert "precision 'bf16' needs the ml_dtypes package" in done.stdout, done


# --------------------------------------------- native and emulated paths


def test_fp32_is_never_emulated() -> None:
    a = np.ones((8, 8), np.float32)
    impl = ppb.ops.implementation("gemm", a, a)
    assert impl.precision == "fp32" and not impl.emulated and impl.name


NATIVE_FLAGS = {"avx512_bf16": "AVX512_BF16", "amx_bf16": "AMX_BF16"}


@pytest.mark.parametrize("flag", sorted(NATIVE_FLAGS))
def test_native_bf16_path(flag: str, rng: np.random.Generator) -> None:
    """Where the CPU has the flag (and nothing caps oneDNN's ISA), oneDNN's
    bf16 kernels run natively, named by their ISA."""
    if cpu_features()["arch"] != "x86_64" or flag not in cpu_features()["flags"]:
        pytest.skip(f"this CPU has no {NATIVE_FLAGS[flag]} (flag {flag})")
    if os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"):
        pytest.skip("oneDNN's ISA is capped in this process")
    if flag == "amx_bf16" and "amx" not in ppb.info()["onednn"]["isa"]:
        pytest.skip(f"oneDNN dispatches to {ppb.info()['onednn']['isa']}, not AMX")
    a, b = rand(rng, 64, 256), rand(rng, 256, 64)
    impl = ppb.ops.implementation("gemm", a, b, precision="bf16")
    assert not impl.emulated, impl
    lin = ppb.ops.Linear(64, 64, 256, precision="bf16")
    assert not lin.emulated, lin.implementation
    x, w = rand(rng, 1, 32, 14, 14), rand(rng, 32, 32, 3, 3)
    assert not ppb.ops.implementation("conv2d", x, w, padding=1, precision="bf16").emulated


EMULATED_RUN = textwrap.dedent("""
    import json, sys
    import numpy as np
    import pyparbench as ppb
    from pyparbench.reference import gemm_reference, conv2d_reference, relative_error
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (33, 130)).astype(np.float32)
    b = rng.uniform(-1, 1, (130, 17)).astype(np.float32)
    x = rng.uniform(-1, 1, (1, 16, 8, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (16, 16, 3, 3)).astype(np.float32)
    try:
        impl = ppb.ops.implementation("gemm", a, b, precision="bf16")
        conv = ppb.ops.implementation("conv2d", x, w, padding=1, precision="bf16")
    except RuntimeError as e:
        print(json.dumps({"refused": str(e)}))
        sys.exit()
    got = ppb.ops.gemm(a, b, precision="bf16", threads=2)
    y = ppb.ops.conv2d(x, w, padding=1, precision="bf16", threads=3)
    print(json.dumps({
        "isa": ppb.info()["onednn"]["isa"],
        "gemm": [impl.name, impl.emulated],
        "conv2d": [conv.name, conv.emulated],
        "gemm_error": relative_error(got, gemm_reference(a, b, precision="bf16")),
        "gemm_fp32_error": relative_error(got, gemm_reference(a, b)),
        "conv2d_error": relative_error(y, conv2d_reference(
            x, w, None, (1, 1), (1, 1, 1, 1), (1, 1), 1, False, precision="bf16")),
    }))
""")


def run_capped(isa: str) -> dict[str, object]:
    return run_isa_capped(EMULATED_RUN, isa)


def test_emulated_bf16_under_an_avx512_core_cap() -> None:
    """With oneDNN capped to AVX-512 without BF16, bf16 still runs (oneDNN
    emulates the dot products), says so, and still matches."""
    if cpu_features()["arch"] != "x86_64" or "avx512" not in cpu_features()["tiers"]:
        pytest.skip("this CPU has no AVX-512 (flags avx512f/bw/vl/dq): oneDNN cannot be "
                    "capped to avx512_core here")
    r = run_capped("AVX512_CORE")
    assert "refused" not in r, r
    assert r["isa"] == "avx512_core", r
    assert r["gemm"][1] is True and r["conv2d"][1] is True, r  # type: ignore[index]
    assert float(r["gemm_error"]) <= BF16_TOLERANCE["gemm"], r  # type: ignore[arg-type]
    assert float(r["gemm_fp32_error"]) > 3 * BF16_TOLERANCE["gemm"], r  # type: ignore[arg-type]
    assert float(r["conv2d_error"]) <= BF16_TOLERANCE["conv2d"], r  # type: ignore[arg-type]


@pytest.mark.aarch64
def test_bf16_gemm_runs_or_says_what_it_needs(rng: np.random.Generator) -> None:
    """Where oneDNN has a bf16 matmul (x86 from avx512_core, aarch64 with the
    Arm Compute Library) the product matches the bf16 reference; where it has
    none (Debian's aarch64 oneDNN, built without ACL; oneDNN 2.x on an x86
    CPU without AVX-512) the op refuses in one RuntimeError naming the ISA and
    what bf16 needs, never a crash."""
    a, b = rand(rng, 13, 40), rand(rng, 40, 9)
    try:
        got = ppb.ops.gemm(a, b, precision="bf16", threads=2)
    except RuntimeError as e:
        msg = str(e)
        isa = ppb.info()["onednn"]["isa"]
        assert "precision 'bf16' is not available" in msg and isa in msg, msg
        if cpu_features()["arch"] == "aarch64":
            assert "Arm Compute Library" in msg, msg
        else:  # x86: refused only below avx512_core, where 2.x has no bf16 matmul
            assert not isa.startswith(("avx512", "amx")), msg
            assert "avx512_core" in msg, msg
        return
    want = gemm_reference(round_to_bf16(a), round_to_bf16(b))
    assert_bf16_not_fp32(got, want, gemm_reference(a, b), "gemm")


def test_bf16_below_avx512_says_what_it_needs() -> None:
    """oneDNN 2.x has no bf16 matmul below avx512_core: the op refuses with a
    RuntimeError naming the ISA and what bf16 needs; oneDNN 3.x runs it (its
    avx2 kernels or reference code), emulated."""
    if cpu_features()["arch"] != "x86_64" or "avx2" not in cpu_features()["tiers"]:
        pytest.skip("this CPU has no AVX2 (flags avx2, fma): oneDNN cannot be capped to avx2")
    r = run_capped("AVX2")
    if ppb.info()["onednn"]["api_major"] < 3:
        assert "refused" in r, r
        msg = str(r["refused"])
        assert "precision 'bf16' is not available" in msg and "(avx2;" in msg, msg
        assert "avx512_core or newer" in msg, msg
    elif "refused" not in r:
        assert r["gemm"][1] is True, r  # type: ignore[index]
        assert float(r["gemm_error"]) <= BF16_TOLERANCE["gemm"], r  # type: ignore[arg-type]


# ---------------------------------------------------- embedding bag tables


@pytest.mark.aarch64
@pytest.mark.parametrize("dim", [1, 3, 16, 32, 64, 100, 128, 130])
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_bf16_table(dim: int, mode: str, bag_tier: str, threads: int,
                                  rng: np.random.Generator) -> None:
    assert ppb.ops.EmbeddingBag.isa == bag_tier
    table = rand(rng, 57, dim)
    lengths = rng.integers(1, 10, size=23)
    lengths[::5] = 0
    off = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    idx = rng.integers(0, 57, size=int(lengths.sum())).astype(np.int64)
    want = ref_embedding_bag(round_to_bf16(table), idx, off, mode, None)
    fp32 = ref_embedding_bag(table, idx, off, mode, None)
    got = ppb.ops.embedding_bag(table.astype(BF16), idx, off, mode=mode, threads=threads)
    assert_bf16_not_fp32(got, want, fp32, "embedding_bag")
    assert (got[::5] == 0).all()  # empty bags give zeros
    # precision="bf16" rounds a float32 table the same way.
    again = ppb.ops.embedding_bag(table, idx, off, mode=mode, threads=threads, precision="bf16")
    np.testing.assert_array_equal(again, got)


@pytest.mark.aarch64
@pytest.mark.parametrize("dim", [16, 7])
def test_prepared_embedding_bag_bf16_weights_and_int32(dim: int, bag_tier: str,
                                                        rng: np.random.Generator) -> None:
    table = rand(rng, 1000, dim)
    idx = rng.integers(0, 1000, size=(31, 6)).astype(np.int32)
    w = rand(rng, 31, 6)
    e = ppb.ops.EmbeddingBag(1000, dim, threads=3)
    got = e.run(table.astype(BF16), idx, None, w)
    want = ref_embedding_bag(round_to_bf16(table), idx, None, "sum", w)
    assert_bf16_not_fp32(got, want, ref_embedding_bag(table, idx, None, "sum", w),
                         "embedding_bag")
    out = np.full(got.shape, np.nan, np.float32)
    assert e.timeit(table.astype(BF16), idx, None, w, out, repeats=2, warmup=1).shape == (2,)
    np.testing.assert_array_equal(out, got)
    assert e.bytes_moved(idx.size, 31, bf16=True) < e.bytes_moved(idx.size, 31)


def test_bag_isa_names_the_bad_value() -> None:
    with pytest.raises(ValueError, match="unknown ISA 'sse9'"):
        _ops.set_bag_isa("sse9")
