"""Fuzzing the single-op API: random shapes, strides, paddings, groups,
indices, offsets, dtypes, memory layouts, thread counts and ``out`` buffers.

Each example is either valid (then the result must equal the float64
reference within fp32 error) or carries one deliberate fault (then the call
must raise ValueError, TypeError or IndexError with a message); anything
else, a crash included, fails. The prepared kernels' constructors also get
absurd sizes (up to 2**62), which must be refused or accepted without
running past any bound. Inputs tried and errors reached are tallied
(``tests/_fuzz.py``) and printed at the end of the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from _fuzz import attempt
from _support import (
    ELTWISE_REFS,
    conv_reference,
    gemm_reference,
    ref_add,
    ref_batch_norm,
    ref_concat,
    ref_embedding_bag,
    ref_global_avg_pool,
    ref_layer_norm,
    ref_pool2d,
    ref_softmax,
)
from hypothesis import assume, given
from hypothesis import strategies as st

from pyparbench import DnnlError, ops
from pyparbench.settings import Settings
from pyparbench.threading import Pool

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

F32 = npt.NDArray[np.float32]

THREADS = st.sampled_from([None, 1, 2, 3])
BAD_THREADS = st.sampled_from([0, -1, "2", 2.5, True, [2]])
# fp32 kernels against float64 references, on O(1) values.
RTOL = 2e-5


def _close(got: Any, want: Any, rtol: float = RTOL) -> None:
    got = np.asarray(got)
    want = np.asarray(want, dtype=np.float64)
    assert got.dtype == np.float32, got.dtype
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    err = float(np.abs(got - want).max()) / scale if want.size else 0.0
    assert err <= rtol, f"max relative error {err:.3g}"


@st.composite
def arrays(draw: st.DrawFn, shape: tuple[int, ...], *, low: float = -1.0) -> Any:
    """float values of ``shape`` in a random dtype and memory layout: C or
    Fortran order, a strided view, a numpy int array, or a nested list."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.uniform(low, 1.0, size=shape)
    kind = draw(st.sampled_from(["f32", "f64", "fortran", "strided", "int", "list", "f16"]))
    if kind == "f32":
        return x.astype(np.float32)
    if kind == "f64":
        return x
    if kind == "fortran":
        return np.asfortranarray(x.astype(np.float32))
    if kind == "strided":
        big = np.zeros(tuple(2 * d for d in shape), np.float32)
        view = big[tuple(slice(None, None, 2) for _ in shape)]
        view[...] = x
        return view
    if kind == "int":
        return np.rint(x * 3).astype(np.int32)
    if kind == "f16":
        return x.astype(np.float16)
    return x.tolist()


def _f64(x: Any) -> npt.NDArray[np.float64]:
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def expect(target: str, fault: str | None, call: Callable[[], Any],
           check: Callable[[Any], None]) -> None:
    """A valid call must succeed and pass ``check``; a faulty one must raise
    a clear error."""
    out = attempt(f"{target}/{fault or 'valid'}", call)
    if fault is None:
        assert out is not None, f"{target}: a valid call was refused"
        check(out)
    else:
        assert out is None, f"{target}: the fault {fault!r} was not refused"


def out_buffer(draw: st.DrawFn, shape: tuple[int, ...], fault: str | None) -> Any:
    """None, or a preallocated out= (a faulty one when ``fault`` names it)."""
    if fault == "out-shape":
        return np.full(tuple(shape) + (2,), np.nan, np.float32)
    if fault == "out-dtype":
        return np.zeros(shape, np.float64)
    if fault == "out-readonly":
        o = np.zeros(shape, np.float32)
        o.flags.writeable = False
        return o
    if fault == "out-strided":
        return np.zeros(tuple(2 * d for d in shape), np.float32)[
            tuple(slice(None, None, 2) for _ in shape)] if shape else None
    if draw(st.booleans()):
        return np.full(shape, np.nan, np.float32)
    return None


OUT_FAULTS = ["out-shape", "out-dtype", "out-readonly"]


# --------------------------------------------------------------------- gemm


@given(st.data())
def test_fuzz_gemm(data: st.DataObject) -> None:
    d = data.draw
    batch = d(st.sampled_from([0, 0, 1, 3]))
    m, n, k = d(st.integers(1, 9)), d(st.integers(1, 9)), d(st.integers(1, 12))
    ta, tb, relu = d(st.booleans()), d(st.booleans()), d(st.booleans())
    has_bias = d(st.booleans())
    lib = d(st.sampled_from(["onednn", "eigen", "blas"]))
    fault = d(st.sampled_from([None] * 6 + ["k", "rank", "batch", "bias", "dtype", "threads",
                                            "library", "out-strided", *OUT_FAULTS]))
    lead = (batch,) if batch else ()
    if fault == "out-strided" and max(batch, 1) * m * n == 1:
        fault = None  # one element: numpy calls any view of it C-contiguous
    a_shape = lead + ((k, m) if ta else (m, k))
    b_shape = lead + ((n, k) if tb else (k, n))
    if fault == "k":
        b_shape = lead + ((n, k + 1) if tb else (k + 1, n))
    if fault == "rank":
        a_shape = (2,) + a_shape if batch else a_shape[-1:]
    if fault == "batch":
        b_shape = (batch + 1 if batch else 2,) + b_shape[-2:]
    a, b = d(arrays(a_shape)), d(arrays(b_shape))
    if fault == "dtype":
        a = np.asarray(a, dtype=np.float32).astype(np.complex64)
    bias = d(arrays((n + (fault == "bias"),))) if has_bias or fault == "bias" else None
    threads = d(BAD_THREADS) if fault == "threads" else d(THREADS)
    library = d(st.sampled_from(["mkl", "", 3])) if fault == "library" else lib
    out = out_buffer(d, lead + (m, n), fault)

    def check(y: Any) -> None:
        want = gemm_reference(_f64(a), _f64(b), None if bias is None else _f64(bias), relu,
                              ta, tb)
        _close(y, want)
        if out is not None:
            assert y is out

    expect("gemm", fault, lambda: ops.gemm(a, b, bias, relu=relu, trans_a=ta, trans_b=tb,
                                           library=library, threads=threads, out=out), check)


# ------------------------------------------------------------------- conv2d


@given(st.data())
def test_fuzz_conv2d(data: st.DataObject) -> None:
    d = data.draw
    g = d(st.integers(1, 3))
    c, o = g * d(st.integers(1, 3)), g * d(st.integers(1, 3))
    n, h, w = d(st.integers(1, 2)), d(st.integers(1, 9)), d(st.integers(1, 9))
    kh, kw = d(st.integers(1, 4)), d(st.integers(1, 4))
    stride = (d(st.integers(1, 3)), d(st.integers(1, 3)))
    dil = (d(st.integers(1, 2)), d(st.integers(1, 2)))
    pad4 = tuple(d(st.integers(0, 2)) for _ in range(4))
    form = d(st.sampled_from(["int", "pair", "four"]))
    padding: Any = (pad4[0] if form == "int" else (pad4[0], pad4[2]) if form == "pair"
                    else pad4)
    pad = ((pad4[0],) * 4 if form == "int" else (pad4[0], pad4[0], pad4[2], pad4[2])
           if form == "pair" else pad4)
    assume(h + pad[0] + pad[1] >= dil[0] * (kh - 1) + 1)
    assume(w + pad[2] + pad[3] >= dil[1] * (kw - 1) + 1)
    lib = d(st.sampled_from(["onednn", "eigen", "blas"]))
    layout = "nhwc" if lib == "onednn" and d(st.booleans()) else "nchw"
    has_bias, relu = d(st.booleans()), d(st.booleans())
    fault = d(st.sampled_from([None] * 8 + [
        "groups", "groups0", "stride0", "dilation0", "padding-1", "kernel", "weight-rank",
        "weight-in", "layout", "bias", "x-rank", "threads", "nhwc-lib", *OUT_FAULTS]))
    groups: Any = g
    if fault == "groups":
        groups = c + 1
    if fault == "groups0":
        groups = d(st.sampled_from([0, -1, 1.5]))
    if fault == "stride0":
        stride = (0, stride[1])
    if fault == "dilation0":
        dil = (dil[0], -1)
    if fault == "padding-1":
        padding = (-1, 0)
    if fault == "nhwc-lib":
        lib, layout = d(st.sampled_from(["eigen", "blas"])), "nhwc"
    w_shape = (o, c // g, kh, kw)
    if fault == "kernel":
        w_shape = (o, c // g, h + pad[0] + pad[1] + 1, kw)
    if fault == "weight-rank":
        w_shape = (o, c // g, kh)
    if fault == "weight-in":
        w_shape = (o, c // g + 1, kh, kw)
    x_nchw = (n, c, h, w)
    x_shape = (n, h, w, c) if layout == "nhwc" else x_nchw
    if fault == "x-rank":
        x_shape = x_shape[1:]
    x, weight = d(arrays(x_shape)), d(arrays(w_shape))
    bias = d(arrays((o + (fault == "bias"),))) if has_bias or fault == "bias" else None
    threads = d(BAD_THREADS) if fault == "threads" else d(THREADS)
    lay = "chwn" if fault == "layout" else layout
    oh = (h + pad[0] + pad[1] - dil[0] * (kh - 1) - 1) // stride[0] + 1 if stride[0] else 1
    ow = (w + pad[2] + pad[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1 if stride[1] else 1
    out_shape = (n, oh, ow, o) if layout == "nhwc" else (n, o, oh, ow)
    out = out_buffer(d, out_shape, fault)

    def check(y: Any) -> None:
        xr = _f64(x)
        if layout == "nhwc":
            xr = xr.transpose(0, 3, 1, 2)
        want = conv_reference(xr, _f64(weight), None if bias is None else _f64(bias), stride,
                              pad, dil, g, relu)
        if layout == "nhwc":
            want = want.transpose(0, 2, 3, 1)
        _close(y, want, 5e-5)

    expect("conv2d", fault, lambda: ops.conv2d(
        x, weight, bias, stride=stride, padding=padding, dilation=dil, groups=groups,
        relu=relu, layout=lay, library=lib, threads=threads, out=out), check)


# ------------------------------------------------------------ embedding_bag




@given(st.data())
def test_fuzz_embedding_bag(data: st.DataObject) -> None:
    d = data.draw
    rows, dim = d(st.integers(1, 20)), d(st.integers(1, 9))
    mode = d(st.sampled_from(["sum", "mean"]))
    fixed = d(st.booleans())
    dtype = d(st.sampled_from([np.int64, np.int32, np.uint8, np.int16]))
    rng = np.random.default_rng(d(st.integers(0, 2**32 - 1)))
    fault = d(st.sampled_from([None] * 6 + [
        "index-high", "index-negative", "offset0", "offsets-down", "offsets-past",
        "weights-mean", "weights-shape", "float-indices", "rank3", "offsets-with-2d",
        "mode", "threads", *OUT_FAULTS]))
    if fault in ("weights-mean",):
        mode = "mean"
    if fault in ("offset0", "offsets-down", "offsets-past"):
        fixed = False
    if fault == "offsets-with-2d":
        fixed = True
    if fixed:
        bags, size = d(st.integers(0, 5)), d(st.integers(0, 4))
        idx = rng.integers(0, rows, size=(bags, size))
        offsets = None
    else:
        lengths = rng.integers(0, 4, size=d(st.integers(0, 5)))
        idx = rng.integers(0, rows, size=int(lengths.sum()))
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        bags = len(offsets)
    if dtype == np.uint8 and rows > 255:
        dtype = np.int64
    idx = idx.astype(dtype)
    with_weights = mode == "sum" and d(st.booleans()) or fault in ("weights-mean",
                                                                   "weights-shape")
    weights = (rng.uniform(-1, 1, size=idx.shape + ((1,) if fault == "weights-shape" else ()))
               .astype(np.float32) if with_weights else None)
    if fault in ("index-high", "index-negative"):
        assume(idx.size > 0)
        idx = idx.astype(np.int64)
        idx.reshape(-1)[d(st.integers(0, idx.size - 1))] = rows if fault == "index-high" else -1
    if fault == "offset0":
        assume(offsets is not None and len(offsets) > 0)
        offsets = offsets + 1  # type: ignore[operator]
    if fault == "offsets-down":
        assume(offsets is not None and len(offsets) > 1 and offsets[-1] > 0)
        offsets = offsets.copy()  # type: ignore[union-attr]
        offsets[-1] = -1
    if fault == "offsets-past":
        assume(offsets is not None and len(offsets) > 0)
        offsets = offsets.copy()  # type: ignore[union-attr]
        offsets[-1] = idx.size + 1
    if fault == "float-indices":
        assume(idx.size > 0)  # an empty list of any dtype is no indices at all
        idx = idx.astype(np.float64) + 0.5
    if fault == "rank3":
        idx = idx.reshape(idx.shape + (1,)) if idx.ndim == 2 else idx.reshape(1, -1, 1)
    off_arg = np.zeros(1, np.int64) if fault == "offsets-with-2d" else offsets
    table = d(arrays((rows, dim)))
    threads = d(BAD_THREADS) if fault == "threads" else d(THREADS)
    out = out_buffer(d, (bags, dim), fault)
    bag_mode = "max" if fault == "mode" else mode

    def check(y: Any) -> None:
        _close(y, ref_embedding_bag(table, np.asarray(idx).astype(np.int64), offsets, mode,
                                weights), 1e-5)

    expect("embedding_bag", fault, lambda: ops.embedding_bag(
        table, idx, off_arg, mode=bag_mode, per_sample_weights=weights, threads=threads,
        out=out), check)


# -------------------------------------------------------------- glue ops

SHAPES = st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple)


@given(st.data())
def test_fuzz_eltwise_and_softmax(data: st.DataObject) -> None:
    d = data.draw
    shape = d(SHAPES)
    x = d(arrays(shape))
    fault = d(st.sampled_from([None] * 4 + ["axis", "kind", "threads", "shape",
                                            *OUT_FAULTS]))
    threads = d(BAD_THREADS) if fault == "threads" else d(THREADS)
    which = d(st.sampled_from(["relu", "softmax", "Eltwise"]))
    out = out_buffer(d, shape, fault)
    if which == "relu":
        if fault in ("axis", "kind", "shape"):
            fault = None
        expect("relu", fault, lambda: ops.relu(x, threads=threads, out=out),
               lambda y: _close(y, np.maximum(_f64(x), 0), 0.0))
    elif which == "softmax":
        if fault in ("kind", "shape"):
            fault = None
        axis = (d(st.sampled_from([len(shape), -len(shape) - 1, 99])) if fault == "axis"
                else d(st.integers(-len(shape), len(shape) - 1)))
        expect("softmax", fault, lambda: ops.softmax(x, axis=axis, threads=threads, out=out),
               lambda y: _close(y, ref_softmax(_f64(x), axis), 1e-5))
    else:
        if fault == "axis":
            fault = None
        kind = "mish" if fault == "kind" else d(st.sampled_from(sorted(ELTWISE_REFS)))
        if threads is True:  # the native classes take a bool as an int (pybind11), = 1
            fault = None
        xs = np.ascontiguousarray(x, dtype=np.float32)
        kshape = shape + (1,) if fault == "shape" else shape

        def call() -> Any:
            k = ops.Eltwise(kind, list(kshape), threads=threads)
            return k.run(xs, out)

        expect("Eltwise", fault, call, lambda y: _close(y, ELTWISE_REFS[kind](xs), 1e-5))


@given(st.data())
def test_fuzz_pooling(data: st.DataObject) -> None:
    d = data.draw
    n, c, h, w = (d(st.integers(1, 2)), d(st.integers(1, 3)), d(st.integers(1, 8)),
                  d(st.integers(1, 8)))
    k = (d(st.integers(1, 4)), d(st.integers(1, 4)))
    stride = (d(st.integers(1, 3)), d(st.integers(1, 3)))
    pad = (d(st.integers(0, k[0] // 2)), d(st.integers(0, k[0] // 2)),
           d(st.integers(0, k[1] // 2)), d(st.integers(0, k[1] // 2)))
    assume(h + pad[0] + pad[1] >= k[0] and w + pad[2] + pad[3] >= k[1])
    kind = d(st.sampled_from(["max", "avg", "global"]))
    ceil_mode, include = d(st.booleans()), d(st.booleans())
    fault = d(st.sampled_from([None] * 5 + ["kernel0", "stride0", "padding", "rank",
                                            "too-big", "threads", *OUT_FAULTS]))
    if kind == "global" and fault in ("kernel0", "stride0", "padding", "too-big"):
        fault = None
    shape = (n, c, h, w)
    if fault == "rank":
        shape = (c, h, w)
    if fault == "too-big":
        k = (h + pad[0] + pad[1] + 1, k[1])
    x = d(arrays(shape))
    threads = d(BAD_THREADS) if fault == "threads" else d(THREADS)
    kernel: Any = (0, k[1]) if fault == "kernel0" else k
    strides: Any = (stride[0], 0) if fault == "stride0" else stride
    padding: Any = (k[0], 0, 0, 0) if fault == "padding" else pad
    if kind == "global":
        out = out_buffer(d, (n, c), fault)
        expect("global_avg_pool2d", fault,
               lambda: ops.global_avg_pool2d(x, threads=threads, out=out),
               lambda y: _close(y, ref_global_avg_pool(_f64(x)), 1e-5))
        return
    from _support import pooled_size

    oh = pooled_size(h, k[0], stride[0], pad[0], pad[1], ceil_mode)
    ow = pooled_size(w, k[1], stride[1], pad[2], pad[3], ceil_mode)
    out = out_buffer(d, (n, c, oh, ow), fault)
    fn = ops.max_pool2d if kind == "max" else ops.avg_pool2d
    kw: dict[str, Any] = {} if kind == "max" else {"count_include_pad": include}
    expect(f"{kind}_pool2d", fault, lambda: fn(x, kernel, strides, padding, ceil_mode=ceil_mode,
                                                threads=threads, out=out, **kw),
           lambda y: _close(y, ref_pool2d(_f64(x), kind, k, stride, pad, ceil_mode, include),
                            1e-5))


@given(st.data())
def test_fuzz_add_mul_concat_transpose(data: st.DataObject) -> None:
    d = data.draw
    shape = d(SHAPES)
    which = d(st.sampled_from(["add", "mul", "concat", "transpose", "tril"]))
    fault = d(st.sampled_from([None] * 4 + ["shape", "axis", "threads", *OUT_FAULTS]))
    threads = d(BAD_THREADS) if fault == "threads" else d(THREADS)
    a = d(arrays(shape))
    if which in ("add", "mul"):
        b_shape = tuple(1 if d(st.booleans()) else s for s in shape) if which == "add" else shape
        if fault in ("shape", "axis"):
            fault = "shape"
            b_shape = b_shape[:-1] + (shape[-1] + 1,)  # neither a's size nor 1
        b = d(arrays(b_shape))
        relu = which == "add" and d(st.booleans())
        out = out_buffer(d, shape, fault)
        if which == "add":
            expect("add", fault, lambda: ops.add(a, b, relu=relu, threads=threads, out=out),
                   lambda y: _close(y, ref_add(_f64(a), _f64(b), relu), 1e-6))
        else:
            expect("mul", fault, lambda: ops.mul(a, b, threads=threads, out=out),
                   lambda y: _close(y, _f64(a) * _f64(b), 1e-6))
    elif which == "concat":
        axis = d(st.integers(-len(shape), len(shape) - 1))
        parts = [a]
        for _ in range(d(st.integers(0, 3))):
            s = list(shape)
            s[axis] = d(st.integers(1, 4))
            parts.append(d(arrays(tuple(s))))
        if fault == "shape":
            if len(shape) < 2:
                fault = None
            else:
                s = list(shape)
                s[(axis + 1) % len(shape)] += 1
                parts.append(d(arrays(tuple(s))))
        ax = d(st.sampled_from([len(shape), -len(shape) - 1])) if fault == "axis" else axis
        want_shape = list(shape)
        want_shape[axis] = sum(np.shape(p)[axis] for p in parts)
        out = out_buffer(d, tuple(want_shape), fault)
        expect("concat", fault, lambda: ops.concat(parts, axis=ax, threads=threads, out=out),
               lambda y: _close(y, ref_concat([_f64(p) for p in parts], axis), 0.0))
    elif which == "transpose":
        perm = list(d(st.permutations(range(len(shape)))))
        if fault == "shape":
            perm = perm + [len(shape)]
        if fault == "axis":
            perm = [0] * len(shape) if len(shape) > 1 else [1]
        out = out_buffer(d, tuple(shape[p] for p in perm) if fault is None or
                         fault.startswith("out") or fault == "threads" else shape, fault)
        expect("transpose", fault, lambda: ops.transpose(a, perm, threads=threads, out=out),
               lambda y: _close(y, _f64(a).transpose(perm), 0.0))
    else:
        b_, m = shape[0], d(st.integers(2, 5))
        x = d(arrays((b_, m, m + (fault in ("shape", "axis")))))
        fault = "shape" if fault == "axis" else fault
        out = out_buffer(d, (b_, m * (m - 1) // 2), fault)
        rows, cols = np.tril_indices(m, -1)
        expect("tril_flatten", fault, lambda: ops.tril_flatten(x, threads=threads, out=out),
               lambda y: _close(y, _f64(x)[:, rows, cols], 0.0))


@given(st.data())
def test_fuzz_normalisation(data: st.DataObject) -> None:
    d = data.draw
    which = d(st.sampled_from(["batch_norm", "layer_norm"]))
    fault = d(st.sampled_from([None] * 4 + ["param", "threads", "rank", *OUT_FAULTS]))
    # batch_norm takes (N, C) or (N, C, H, W); layer_norm 2-D to 5-D.
    if which == "batch_norm":
        ranks = [3] if fault == "rank" else [2, 4]
    else:
        ranks = [1] if fault == "rank" else [2, 3, 4]
    shape = tuple(d(st.lists(st.integers(1, 5), min_size=r, max_size=r))
                  for r in [d(st.sampled_from(ranks))])[0]
    threads = d(BAD_THREADS) if fault == "threads" else d(THREADS)
    x = d(arrays(shape))
    eps = d(st.sampled_from([1e-5, 1e-3, 0.1]))
    out = out_buffer(d, shape, fault)
    c = shape[1] if which == "batch_norm" else shape[-1]
    bad = 1 if fault == "param" else 0
    if which == "batch_norm":
        mean, scale, shift = d(arrays((c,))), d(arrays((c + bad,))), d(arrays((c,)))
        var = d(arrays((c,), low=0.05))
        expect("batch_norm", fault, lambda: ops.batch_norm(
            x, mean, var, scale, shift, eps=eps, threads=threads, out=out),
            lambda y: _close(y, ref_batch_norm(_f64(x), _f64(mean), _f64(var), _f64(scale),
                                               _f64(shift), eps), 1e-4))
    else:
        scale, shift = d(arrays((c,))), d(arrays((c + bad,)))
        expect("layer_norm", fault, lambda: ops.layer_norm(
            x, scale, shift, eps=eps, threads=threads, out=out),
            lambda y: _close(y, ref_layer_norm(_f64(x), _f64(scale), _f64(shift), eps), 1e-4))


# ----------------------------------------------- prepared kernels, absurd sizes

HUGE = st.sampled_from([0, -1, 1, 2, 2**31 - 1, 2**31, 2**40, 2**62, 2**63 - 1])
SIZE = st.one_of(st.integers(1, 6), HUGE)
KERNEL_ERRORS = (ValueError, TypeError, IndexError, OverflowError, MemoryError, DnnlError)


def _shape(d: st.DrawFn, rank: tuple[int, int] = (1, 4)) -> list[int]:
    return d(st.lists(SIZE, min_size=rank[0], max_size=rank[1]))


@given(st.data())
def test_fuzz_prepared_kernel_construction(data: st.DataObject) -> None:
    # Constructors must refuse what they cannot run with a clear error (or
    # MemoryError / DnnlError where the sizes are merely too large for this
    # machine or for oneDNN) and never compute a size past int64. A kernel
    # that is made must then refuse wrong arrays, and compute right ones.
    d = data.draw
    which = d(st.sampled_from(["Gemm", "EigenGemm", "BlasGemm", "Conv2d", "EigenConv2d",
                               "BlasConv2d", "EmbeddingBag", "Eltwise", "Softmax", "Pool2d",
                               "Add", "Concat", "BatchNorm", "LayerNorm", "Transpose",
                               "TrilFlatten", "GlobalAvgPool"]))
    threads = d(st.one_of(THREADS, BAD_THREADS))
    makers: dict[str, Callable[[], Any]] = {
        "Gemm": lambda: ops.Gemm(d(SIZE), d(SIZE), d(SIZE), batch=d(HUGE), threads=threads),
        "EigenGemm": lambda: ops.EigenGemm(d(SIZE), d(SIZE), d(SIZE), threads=threads),
        "BlasGemm": lambda: ops.BlasGemm(d(SIZE), d(SIZE), d(SIZE), bias=True,
                                         threads=threads),
        "EmbeddingBag": lambda: ops.EmbeddingBag(d(SIZE), d(SIZE), threads=threads),
        "Eltwise": lambda: ops.Eltwise("relu", _shape(d), threads=threads),
        "Softmax": lambda: ops.Softmax(_shape(d), axis=d(st.integers(-5, 5)), threads=threads),
        "Pool2d": lambda: ops.Pool2d("max", _shape(d, (4, 4)), (d(SIZE), d(SIZE)),
                                     stride=(d(SIZE), d(SIZE)), padding=d(SIZE),
                                     threads=threads),
        "Add": lambda: ops.Add(s := _shape(d), [1] * len(s), threads=threads),
        "Concat": lambda: ops.Concat([_shape(d, (2, 2)), _shape(d, (2, 2))],
                                     axis=d(st.integers(-3, 3)), threads=threads),
        "BatchNorm": lambda: ops.BatchNorm(_shape(d, (2, 4)), threads=threads),
        "LayerNorm": lambda: ops.LayerNorm(_shape(d), threads=threads),
        "Transpose": lambda: ops.Transpose(s := _shape(d), list(range(len(s)))[::-1],
                                           threads=threads),
        "TrilFlatten": lambda: ops.TrilFlatten([d(SIZE), m := d(SIZE), m], threads=threads),
        "GlobalAvgPool": lambda: ops.GlobalAvgPool(_shape(d, (4, 4)), threads=threads),
    }
    for name, cls in (("Conv2d", ops.Conv2d), ("EigenConv2d", ops.EigenConv2d),
                      ("BlasConv2d", ops.BlasConv2d)):
        makers[name] = (lambda c=cls: c(_shape(d, (4, 4)), d(SIZE), (d(SIZE), d(SIZE)),
                                        stride=d(SIZE), padding=d(SIZE), dilation=d(SIZE),
                                        groups=d(SIZE), threads=threads))
    kernel = attempt(f"construct/{which}", makers[which], KERNEL_ERRORS)
    if kernel is None:
        return
    # Made: the wrong arrays are refused (the right ones are the other tests').
    # 7 is no size drawn above, so this shape fits no kernel made here.
    wrong = np.zeros((7, 1, 5), np.float32)
    runs: dict[str, Callable[[], Any]] = {
        "EmbeddingBag": lambda: kernel.run(wrong, np.zeros((2, 2), np.int64)),
        "Add": lambda: kernel.run(wrong, wrong),
        "Concat": lambda: kernel.run([wrong, wrong]),
        "BatchNorm": lambda: kernel.run(wrong, wrong, wrong, wrong, wrong),
        "LayerNorm": lambda: kernel.run(wrong, wrong, wrong),
    }
    if which.endswith("Gemm"):
        runs[which] = lambda: kernel.run(wrong, wrong, None)
    if which.endswith("Conv2d"):
        runs[which] = lambda: (kernel.set_weights(wrong, None), kernel.run(wrong))
    run = runs.get(which, lambda: kernel.run(wrong))
    # out=None is allocated first: for an absurd output that is a MemoryError.
    assert attempt(f"run-wrong/{which}", run, (ValueError, TypeError, IndexError, MemoryError)
                   ) is None


@pytest.mark.parametrize("threads", [0, -5, 4097, 100_000, 2**31, 2**63, -(2**63)])
def test_thread_counts_out_of_range_are_refused(threads: int) -> None:
    # 100,000 threads made the OpenMP runtime crash the process (SIGSEGV),
    # 40,000 made it abort: counts are bounded before anything starts them.
    x = np.ones(4, np.float32)
    with pytest.raises((ValueError, TypeError)):
        ops.relu(x, threads=threads)
    with pytest.raises((ValueError, TypeError)):
        ops.Gemm(2, 2, 2, threads=threads)
    with pytest.raises((ValueError, TypeError)):
        Pool("std", threads)
    with pytest.raises((ValueError, TypeError)):
        Settings(operator="framework", intra_op=threads)


def test_the_thread_bound_is_the_same_in_python_and_cpp() -> None:
    from pyparbench._checks import MAX_THREADS
    from pyparbench._core import ops as native

    assert native.Gemm(2, 2, 2, threads=MAX_THREADS).threads == MAX_THREADS
    with pytest.raises(ValueError, match=f"threads must be <= {MAX_THREADS}"):
        native.Gemm(2, 2, 2, threads=MAX_THREADS + 1)
    with pytest.raises(ValueError, match=f"threads must be at most {MAX_THREADS}"):
        ops.gemm(np.ones((2, 2)), np.ones((2, 2)), threads=MAX_THREADS + 1)


@pytest.mark.parametrize("make", [
    lambda: ops.Gemm(1, 1, 2**32),  # oneDNN died of SIGFPE here
    lambda: ops.Gemm(2**62, 2**62, 2),
    lambda: ops.Gemm(2, 2, 2**63 - 1, batch=2),
    lambda: ops.Eltwise("relu", [2**40, 2**40]),
    lambda: ops.Pool2d("max", (1, 1, 2**62, 2**62), 3),
    lambda: ops.GlobalAvgPool([2**62, 2**62, 2, 2]),
    lambda: ops.EigenConv2d((1, 1, 2**31, 2**31), 1, 3),
    lambda: ops.BlasConv2d((1, 1, 2**31, 2**31), 1, 3),
    lambda: ops.Conv2d((1, 1, 8, 8), 1, 3, padding=2**62),
    lambda: ops.EmbeddingBag(2**62, 2**62),
], ids=["gemm-2^32", "gemm", "gemm-k", "eltwise", "pool", "gap", "eigen-conv", "blas-conv",
        "conv-pad", "bag"])
def test_absurd_sizes_are_refused_before_any_size_is_computed(make: Callable[[], Any]) -> None:
    # These multiplied sizes past int64 (undefined behaviour, found by
    # UBSan) and went on with the wrapped value, or crashed oneDNN.
    with pytest.raises(ValueError, match="2\\*\\*48 elements|must be <= 2147483647|"
                                         "dimension over 2147483647"):
        make()
