"""conv2d / Conv2d against a float64 numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyparbench as ppb
from _support import THREAD_COUNTS, assert_close, poisoned, rand

from _support import CONV_CASES as CASES
from _support import CONV_RTOL as RTOL
from _support import conv_reference as reference


@pytest.mark.parametrize("n,c,h,w,o,k,stride,pad,dil,groups", CASES)
@pytest.mark.parametrize("bias,relu", [(False, False), (True, True)])
def test_conv2d_matches_reference(n: int, c: int, h: int, w: int, o: int, k: tuple[int, int],
                                  stride: tuple[int, int], pad: tuple[int, int, int, int],
                                  dil: tuple[int, int], groups: int, bias: bool, relu: bool,
                                  threads: int, rng: np.random.Generator) -> None:
    x, wt = rand(rng, n, c, h, w), rand(rng, o, c // groups, *k)
    b = rand(rng, o) if bias else None
    got = ppb.ops.conv2d(x, wt, b, stride=stride, padding=pad, dilation=dil, groups=groups,
                         relu=relu, threads=threads)
    assert_close(got, reference(x, wt, b, stride, pad, dil, groups, relu), RTOL)


@pytest.mark.parametrize("n,c,h,w,o,k,stride,pad,dil,groups", CASES[:4])
def test_nhwc_layout(n: int, c: int, h: int, w: int, o: int, k: tuple[int, int],
                     stride: tuple[int, int], pad: tuple[int, int, int, int],
                     dil: tuple[int, int], groups: int, threads: int,
                     rng: np.random.Generator) -> None:
    x, wt = rand(rng, n, c, h, w), rand(rng, o, c // groups, *k)
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    got = ppb.ops.conv2d(x_nhwc, wt, stride=stride, padding=pad, dilation=dil, groups=groups,
                         layout="nhwc", threads=threads)
    want = reference(x, wt, None, stride, pad, dil, groups, False).transpose(0, 2, 3, 1)
    assert_close(got, want, RTOL)


def test_padding_forms_agree(rng: np.random.Generator) -> None:
    x, w = rand(rng, 1, 2, 6, 6), rand(rng, 3, 2, 3, 3)
    a = ppb.ops.conv2d(x, w, padding=1)
    b = ppb.ops.conv2d(x, w, padding=(1, 1))
    c = ppb.ops.conv2d(x, w, padding=(1, 1, 1, 1))
    assert np.array_equal(a, b) and np.array_equal(a, c)


def test_prepared_conv(threads: int, rng: np.random.Generator) -> None:
    conv = ppb.ops.Conv2d((2, 8, 12, 12), 16, 3, stride=2, padding=1, bias=True, relu=True,
                          threads=threads)
    assert conv.weight_shape == (16, 8, 3, 3) and conv.output_shape == (2, 16, 6, 6)
    assert conv.flops == 2 * 2 * 16 * 6 * 6 * 8 * 9 and conv.threads == threads
    assert not conv.has_weights
    x, w, b = rand(rng, 2, 8, 12, 12), rand(rng, 16, 8, 3, 3), rand(rng, 16)
    conv.set_weights(w, b)
    assert conv.has_weights
    out = poisoned(conv.output_shape)
    conv.run(x, out)
    assert_close(out, reference(x, w, b, (2, 2), (1, 1, 1, 1), (1, 1), 1, True), RTOL)
    ns = conv.timeit(x, out, repeats=3, warmup=1)
    assert ns.shape == (3,) and (ns > 0).all()


def test_conv_kernel_copy_of_weights(rng: np.random.Generator) -> None:
    x, w = rand(rng, 1, 4, 6, 6), rand(rng, 5, 4, 3, 3)
    conv = ppb.ops.Conv2d(x.shape, 5, 3)
    conv.set_weights(w)
    want = reference(x, w, None, (1, 1), (0, 0, 0, 0), (1, 1), 1, False)
    w += 100.0  # changing the caller's array afterwards must not change the kernel
    assert_close(conv.run(x), want, RTOL)


def test_out_is_fully_written(threads: int, rng: np.random.Generator) -> None:
    x, w = rand(rng, 2, 3, 9, 9), rand(rng, 4, 3, 3, 3)
    out = poisoned((2, 4, 9, 9))
    assert ppb.ops.conv2d(x, w, padding=1, threads=threads, out=out) is out
    assert_close(out, reference(x, w, None, (1, 1), (1, 1, 1, 1), (1, 1), 1, False), RTOL)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 3), cg=st.integers(1, 4), og=st.integers(1, 4), groups=st.integers(1, 3),
    h=st.integers(1, 12), w=st.integers(1, 12), kh=st.integers(1, 4), kw=st.integers(1, 4),
    sh=st.integers(1, 3), sw=st.integers(1, 3), dh=st.integers(1, 3), dw=st.integers(1, 3),
    pads=st.tuples(*[st.integers(0, 3)] * 4), threads=st.sampled_from(THREAD_COUNTS),
    seed=st.integers(0, 2**31),
)
def test_conv2d_property(n: int, cg: int, og: int, groups: int, h: int, w: int, kh: int, kw: int,
                         sh: int, sw: int, dh: int, dw: int, pads: tuple[int, int, int, int],
                         threads: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    c, o = cg * groups, og * groups
    fits = (h + pads[0] + pads[1] >= dh * (kh - 1) + 1) and (w + pads[2] + pads[3] >= dw * (kw - 1) + 1)
    x, wt = rand(rng, n, c, h, w), rand(rng, o, cg, kh, kw)
    kwargs = dict(stride=(sh, sw), padding=pads, dilation=(dh, dw), groups=groups, threads=threads)
    if not fits:
        with pytest.raises(ValueError, match="larger than the padded input"):
            ppb.ops.conv2d(x, wt, **kwargs)  # type: ignore[arg-type]
        return
    got = ppb.ops.conv2d(x, wt, **kwargs)  # type: ignore[arg-type]
    assert_close(got, reference(x, wt, None, (sh, sw), pads, (dh, dw), groups, False), RTOL)


# ------------------------------------------------------------------ bad input


def test_channel_mismatch_names_both_shapes(rng: np.random.Generator) -> None:
    with pytest.raises(ValueError, match=r"\(4, 3, 3, 3\).*\(1, 5, 8, 8\)"):
        ppb.ops.conv2d(rand(rng, 1, 5, 8, 8), rand(rng, 4, 3, 3, 3))


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(stride=0), ValueError, "stride"),
    (dict(padding=-1), ValueError, "padding must be >= 0, got -1"),
    (dict(dilation=(1, 0)), ValueError, "dilation"),
    (dict(groups=0), ValueError, "groups must be >= 1, got 0"),
    (dict(groups=3), ValueError, "groups=3"),
    (dict(layout="chwn"), ValueError, "layout must be"),
    (dict(stride=(1, 2, 3)), TypeError, "stride must be an int or a pair"),
    (dict(threads=0), ValueError, "threads must be >= 1, got 0"),
])
def test_bad_arguments(kwargs: dict[str, object], exc: type[Exception], match: str,
                       rng: np.random.Generator) -> None:
    with pytest.raises(exc, match=match):
        ppb.ops.conv2d(rand(rng, 1, 4, 8, 8), rand(rng, 4, 4, 3, 3), **kwargs)  # type: ignore[arg-type]


def test_bad_ranks_and_sizes(rng: np.random.Generator) -> None:
    with pytest.raises(ValueError, match="x must be 4-D"):
        ppb.ops.conv2d(rand(rng, 4, 8, 8), rand(rng, 4, 4, 3, 3))
    with pytest.raises(ValueError, match="kernel .* larger than the padded input"):
        ppb.ops.conv2d(rand(rng, 1, 1, 2, 2), rand(rng, 1, 1, 3, 3))
    with pytest.raises(ValueError, match="dimension < 1"):
        ppb.ops.Conv2d((1, 0, 4, 4), 2, 1)


def test_prepared_conv_errors(rng: np.random.Generator) -> None:
    conv = ppb.ops.Conv2d((1, 2, 5, 5), 3, 3, bias=True)
    x = rand(rng, 1, 2, 5, 5)
    with pytest.raises(ValueError, match="no weights yet"):
        conv.run(x)
    with pytest.raises(ValueError, match=r"weight has shape \(3, 2, 2, 2\), expected \(3, 2, 3, 3\)"):
        conv.set_weights(rand(rng, 3, 2, 2, 2), rand(rng, 3))
    with pytest.raises(ValueError, match="bias is required"):
        conv.set_weights(rand(rng, 3, 2, 3, 3))
    conv.set_weights(rand(rng, 3, 2, 3, 3), rand(rng, 3))
    with pytest.raises(ValueError, match=r"x has shape \(1, 2, 6, 5\), expected \(1, 2, 5, 5\)"):
        conv.run(rand(rng, 1, 2, 6, 5))
    with pytest.raises(TypeError, match="x must be float32"):
        conv.run(x.astype(np.float16))
