"""The glue ops against float64 numpy references, and their bad-input errors.

Covers relu (and the other Eltwise kinds), add, concat, max/avg/global-avg
pooling, batch_norm, softmax, layer_norm and linear, both through the
functions in ``pyparbench.ops`` (which convert their inputs) and through the
prepared kernel classes (which do not, and which have ``timeit``).

Tolerances are relative to the reference's magnitude (see ``assert_close``):
ops that only move, compare or clip values must be exact (0); every op that
does fp32 arithmetic is held to 1e-5 (measured errors are ~1e-7).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from _support import (
    ELTWISE_REFS,
    ELTWISE_RTOL,
    ELTWISE_SCALE,
    RTOL,
    RTOL_EXACT,
    assert_close,
    ceil_window_clipped,
    poisoned,
    rand,
    ref_add,
    ref_batch_norm,
    ref_concat,
    ref_global_avg_pool,
    ref_layer_norm,
    ref_linear,
    ref_pool2d,
    ref_relu,
    ref_softmax,
)
from pyparbench import ops
from pyparbench._checks import padding4, pair


F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]



# ----------------------------------------------------------------- helpers


def bn_params(rng: np.random.Generator, c: int) -> tuple[F32, F32, F32, F32]:
    """mean, var (> 0), scale, shift for c channels."""
    var = (np.abs(rand(rng, c)) + 0.05).astype(np.float32)
    return rand(rng, c), var, rand(rng, c), rand(rng, c)


def check_all_ways(
    call: Callable[..., Any], x: F32, want: F64, rtol: float, *, in_place: bool
) -> None:
    """call(x, out=...) returns a new array, fills a poisoned out= completely,
    leaves x alone, and (when the op allows it) gives the same result in place."""
    before = x.copy()
    assert_close(call(x), want, rtol)
    out = poisoned(want.shape)
    assert call(x, out=out) is out
    assert_close(out, want, rtol)
    np.testing.assert_array_equal(x, before)
    if in_place:
        y = x.copy()
        assert call(y, out=y) is y
        assert_close(y, want, rtol)


def noncontiguous(a: F32) -> F32:
    """The same values as a strided (not C-contiguous) view."""
    axis = next(i for i, d in enumerate(a.shape) if d > 1)  # size-1 axes never break contiguity
    shape = list(a.shape)
    shape[axis] *= 2
    view = np.zeros(shape, a.dtype)[(slice(None),) * axis + (slice(None, None, 2),)]
    view[...] = a
    assert not view.flags.c_contiguous
    return view


def grown(shape: Sequence[int]) -> tuple[int, ...]:
    """A wrong shape: the last axis one longer."""
    return (*shape[:-1], shape[-1] + 1)


def shape_msg(name: str, got: Sequence[int], want: Sequence[int]) -> str:
    """The native shape-mismatch message, as a regex."""
    return re.escape(f"{name} has shape {tuple(got)}, expected {tuple(want)}")




# --------------------------------------------------- functions: correctness


# Besides tiny and 1-sized shapes, each op gets one case large and odd enough
# to reach the vectorised main loops, their tails and a split across threads.


@pytest.mark.aarch64
@pytest.mark.parametrize("shape", [(7,), (3, 5), (1, 4, 1, 9), (2, 3, 5, 7), (2, 1, 3, 1, 5),
                                   (5, 1031)])
def test_relu(threads: int, rng: np.random.Generator, shape: tuple[int, ...]) -> None:
    x = rand(rng, *shape)
    check_all_ways(lambda v, out=None: ops.relu(v, threads=threads, out=out), x, ref_relu(x),
                   RTOL_EXACT, in_place=True)


ADD_SHAPES = [
    ((2, 3, 5, 7), (2, 3, 5, 7)),  # residual add
    ((2, 3, 5, 7), (1, 3, 1, 1)),  # per-channel bias
    ((2, 3, 5, 7), (2, 1, 5, 7)),  # over channels
    ((2, 3, 5, 7), (1, 1, 1, 7)),  # along the last axis
    ((2, 3, 5, 7), (1, 1, 1, 1)),  # a scalar
    ((9, 1), (1, 1)),
    ((5, 11), (5, 1)),
    ((13,), (13,)),
    ((4, 37, 11, 13), (1, 37, 1, 1)),
    # b with fewer axes, as numpy broadcasts it: leading axes of size 1
    ((2, 3), (3,)),
    ((2, 3, 5, 7), (7,)),
    ((2, 3, 5, 7), (5, 1)),
    ((4, 37, 11, 13), (37, 1, 1)),
]


@pytest.mark.aarch64
@pytest.mark.parametrize("relu", [False, True], ids=["plain", "relu"])
@pytest.mark.parametrize(("a_shape", "b_shape"), ADD_SHAPES)
def test_add(threads: int, rng: np.random.Generator, a_shape: tuple[int, ...],
             b_shape: tuple[int, ...], relu: bool) -> None:
    a, b = rand(rng, *a_shape), rand(rng, *b_shape)
    want = ref_add(a, b, relu)
    check_all_ways(lambda v, out=None: ops.add(v, b, relu=relu, threads=threads, out=out), a,
                   want, RTOL, in_place=True)
    if a_shape == b_shape:  # b may be the output too when nothing broadcasts
        b2 = b.copy()
        assert ops.add(a, b2, relu=relu, threads=threads, out=b2) is b2
        assert_close(b2, want, RTOL)


CONCAT_CASES = [
    ([(2, 3, 5, 7), (2, 1, 5, 7)], 1),
    ([(2, 3, 5, 7), (2, 4, 5, 7), (2, 1, 5, 7)], 1),
    ([(1, 2, 3, 3), (1, 5, 3, 3), (1, 1, 3, 3), (1, 7, 3, 3)], 1),  # an Inception block
    ([(1, 3, 5), (2, 3, 5), (4, 3, 5)], 0),
    ([(2, 3, 1, 4), (2, 3, 6, 4)], 2),
    ([(3, 2, 5, 1), (3, 2, 5, 2), (3, 2, 5, 9)], 3),
    ([(4, 3), (4, 1), (4, 5), (4, 2)], -1),
    ([(2, 3, 4), (2, 5, 4)], -2),
    ([(2, 17, 9, 11), (2, 33, 9, 11)], 1),
]


@pytest.mark.aarch64
@pytest.mark.parametrize(("shapes", "axis"), CONCAT_CASES)
def test_concat(threads: int, rng: np.random.Generator, shapes: list[tuple[int, ...]],
                axis: int) -> None:
    xs = [rand(rng, *s) for s in shapes]
    rest = xs[1:]
    check_all_ways(lambda v, out=None: ops.concat([v, *rest], axis=axis, threads=threads,
                                                  out=out),
                   xs[0], ref_concat(xs, axis), RTOL_EXACT, in_place=False)


# (input shape, kernel_size, stride (None = the kernel), padding as passed to the function)
POOL_CASES = [
    pytest.param((2, 3, 9, 11), 3, 2, 1, id="resnet-stem"),  # odd sizes
    pytest.param((1, 4, 5, 6), (2, 3), (2, 2), 0, id="nonsquare-kernel"),
    pytest.param((3, 2, 8, 5), (3, 2), (1, 3), (1, 0), id="pad-hw"),
    pytest.param((1, 3, 9, 7), 3, 2, (0, 2, 1, 0), id="pad-tblr"),
    pytest.param((1, 2, 10, 9), (3, 3), (3, 2), (2, 1, 0, 2), id="pad-tblr-stride-hw"),
    pytest.param((2, 1, 1, 5), (1, 3), (1, 2), (0, 0, 1, 1), id="height-1"),
    pytest.param((1, 2, 6, 6), 2, None, 0, id="default-stride"),
    pytest.param((1, 1, 4, 7), (4, 7), None, 0, id="one-window"),
    pytest.param((2, 3, 5, 5), 3, 1, 1, id="same-size"),
    # ceil mode drops the window that would start in the bottom padding
    pytest.param((1, 2, 5, 6), 3, 2, 1, id="ceil-drops-window"),
    # ceil mode's last window runs off the input: [1, 2] [3, pad]
    pytest.param((1, 1, 1, 3), (1, 2), (1, 2), 0, id="ceil-minimal"),
    pytest.param((2, 19, 23, 29), 3, 2, (1, 0, 1, 1), id="large"),
]
POOL_MODES = [("max", True), ("avg", True), ("avg", False)]


def test_pool_cases_include_clipped_ceil_windows() -> None:
    # The last ceil-mode window running past the padding needs its own divisor
    # for avg with count_include_pad; the cases must exercise it.
    hits = [c for c in POOL_CASES
            if ceil_window_clipped(c.values[0], pair("kernel", c.values[1]),
                                   pair("stride", c.values[1] if c.values[2] is None
                                        else c.values[2]),
                                   padding4(c.values[3]))]
    assert len(hits) >= 2




def pool_cases(test: Callable[..., None]) -> Callable[..., None]:
    """Every pooling case (POOL_CASES), mode and rounding mode."""
    for mark in (pytest.mark.parametrize(("shape", "kernel", "stride", "padding"), POOL_CASES),
                 pytest.mark.parametrize(("kind", "count_include_pad"), POOL_MODES,
                                         ids=["max", "avg-incl", "avg-excl"]),
                 pytest.mark.parametrize("ceil_mode", [False, True], ids=["floor", "ceil"])):
        test = mark(test)
    return test


@pool_cases
def test_pool2d(threads: int, rng: np.random.Generator,
                shape: tuple[int, int, int, int], kernel: int | tuple[int, int],
                stride: int | tuple[int, int] | None, padding: ops.Padding,
                kind: str, count_include_pad: bool, ceil_mode: bool) -> None:
    k = pair("kernel", kernel)
    s = k if stride is None else pair("stride", stride)
    p = padding4(padding)
    x = rand(rng, *shape)
    want = ref_pool2d(x, kind, k, s, p, ceil_mode, count_include_pad)

    def call(v: F32, out: F32 | None = None) -> F32:
        if kind == "max":
            return ops.max_pool2d(v, kernel, stride, padding, ceil_mode=ceil_mode,
                                  threads=threads, out=out)
        return ops.avg_pool2d(v, kernel, stride, padding, ceil_mode=ceil_mode,
                              count_include_pad=count_include_pad, threads=threads, out=out)

    check_all_ways(call, x, want, RTOL_EXACT if kind == "max" else RTOL, in_place=False)


@pytest.mark.parametrize("impl", ["direct", "onednn"])
@pytest.mark.parametrize("channels", [None, 43], ids=["c-case", "c43"])  # 43: 32 + 8 + 3
@pool_cases
def test_pool2d_channels_last(threads: int, rng: np.random.Generator,
                              shape: tuple[int, int, int, int], kernel: int | tuple[int, int],
                              stride: int | tuple[int, int] | None, padding: ops.Padding,
                              kind: str, count_include_pad: bool, ceil_mode: bool,
                              channels: int | None, impl: str) -> None:
    """Pool2d(nhwc=True): oneDNN's and pyparbench's own channels-last kernel
    both match the reference, the channel count covering every block size."""
    if channels is not None:
        shape = (shape[0], channels, shape[2], shape[3])
    k = pair("kernel", kernel)
    s = k if stride is None else pair("stride", stride)
    p = padding4(padding)
    x = rand(rng, *shape)
    want = ref_pool2d(x, kind, k, s, p, ceil_mode, count_include_pad).transpose(0, 2, 3, 1)
    pool = ops.Pool2d(kind, shape, k, stride=s, padding=p, ceil_mode=ceil_mode,
                      count_include_pad=count_include_pad, threads=threads, nhwc=True,
                      impl=impl)
    assert pool.impl == impl
    out = poisoned(want.shape)
    pool.run(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), out)
    assert_close(out, want, RTOL_EXACT if kind == "max" else RTOL)


@pytest.mark.aarch64
@pytest.mark.parametrize(("kind", "count_include_pad"), POOL_MODES,
                         ids=["max", "avg-incl", "avg-excl"])
@pytest.mark.parametrize(("shape", "kernel", "stride", "padding"), POOL_CASES)
def test_pool2d_channels_last_own_kernel(rng: np.random.Generator,
                                         shape: tuple[int, int, int, int],
                                         kernel: int | tuple[int, int],
                                         stride: int | tuple[int, int] | None,
                                         padding: ops.Padding, kind: str,
                                         count_include_pad: bool) -> None:
    """A share of the cases above for the emulated arm64 job: pyparbench's
    own channels-last kernel (the build this CPU runs), 43 channels, ceil
    mode, two threads."""
    test_pool2d_channels_last(2, rng, shape, kernel, stride, padding, kind, count_include_pad,
                              True, 43, "direct")


@pytest.mark.aarch64
@pytest.mark.parametrize(("kind", "count_include_pad", "nhwc", "impl"),
                         [("max", True, True, "direct"), ("avg", False, True, "direct"),
                          ("avg", True, True, "onednn"), ("max", True, False, "onednn"),
                          ("avg", False, False, "onednn")])
def test_pool2d_auto_impl(kind: str, count_include_pad: bool, nhwc: bool, impl: str) -> None:
    """"auto" takes the direct kernel on channels-last data, except for an
    average counting the padding, where oneDNN 2.6 is the faster one
    (bench/pool_nhwc.py)."""
    pool = ops.Pool2d(kind, (1, 8, 6, 6), 3, count_include_pad=count_include_pad, nhwc=nhwc)
    assert pool.impl == impl


@pytest.mark.aarch64
@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (1, 1, 1, 1), (3, 5, 1, 8), (1, 4, 6, 1),
                                   (2, 37, 11, 13)])
def test_global_avg_pool2d(threads: int, rng: np.random.Generator,
                           shape: tuple[int, ...]) -> None:
    x = rand(rng, *shape)
    check_all_ways(lambda v, out=None: ops.global_avg_pool2d(v, threads=threads, out=out), x,
                   ref_global_avg_pool(x), RTOL, in_place=False)


@pytest.mark.aarch64
@pytest.mark.parametrize("eps", [1e-5, 0.3])  # a large eps shows it is really used
@pytest.mark.parametrize("shape", [(5, 7), (1, 1), (9, 1), (3, 7, 5, 9), (2, 1, 1, 3),
                                   (2, 37, 11, 13)])
def test_batch_norm(threads: int, rng: np.random.Generator, shape: tuple[int, ...],
                    eps: float) -> None:
    x = rand(rng, *shape)
    params = bn_params(rng, shape[1])
    check_all_ways(lambda v, out=None: ops.batch_norm(v, *params, eps=eps, threads=threads,
                                                      out=out),
                   x, ref_batch_norm(x, *params, eps), RTOL, in_place=True)


SOFTMAX_CASES = [
    ((4, 10), -1),
    ((4, 10), 0),
    ((3, 5, 7), 1),
    ((2, 3, 4, 5), -3),
    ((2, 3, 4, 5), 3),
    ((6, 1), 1),  # a single element: all ones
    ((1, 9), 0),
    ((17,), 0),
    ((3, 129), -1),
    ((5, 67, 3), 1),
]


@pytest.mark.aarch64
@pytest.mark.parametrize(("shape", "axis"), SOFTMAX_CASES)
def test_softmax(threads: int, rng: np.random.Generator, shape: tuple[int, ...],
                 axis: int) -> None:
    x = rand(rng, *shape)
    check_all_ways(lambda v, out=None: ops.softmax(v, axis=axis, threads=threads, out=out), x,
                   ref_softmax(x, axis), RTOL, in_place=True)


@pytest.mark.aarch64
def test_softmax_is_stable_for_large_inputs(threads: int, rng: np.random.Generator) -> None:
    # exp(±300) over- or underflows fp32: only the max-subtracted form stays finite.
    x = (rand(rng, 3, 33) * 300).astype(np.float32)
    assert_close(ops.softmax(x, axis=1, threads=threads), ref_softmax(x, 1), RTOL)


@pytest.mark.aarch64
@pytest.mark.parametrize("eps", [1e-5, 0.3])
@pytest.mark.parametrize("shape", [(7, 33), (1, 5), (3, 5, 17), (2, 1, 9), (4, 1),
                                   (3, 5, 129)])
def test_layer_norm(threads: int, rng: np.random.Generator, shape: tuple[int, ...],
                    eps: float) -> None:
    x = rand(rng, *shape)
    scale, shift = rand(rng, shape[-1]), rand(rng, shape[-1])
    check_all_ways(lambda v, out=None: ops.layer_norm(v, scale, shift, eps=eps, threads=threads,
                                                      out=out),
                   x, ref_layer_norm(x, scale, shift, eps), RTOL, in_place=True)


@pytest.mark.aarch64
@pytest.mark.parametrize("relu", [False, True], ids=["plain", "relu"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize(("m", "k", "n"), [(7, 37, 5), (1, 129, 13), (33, 3, 1), (1, 1, 1),
                                             (65, 257, 31)])
def test_linear(threads: int, rng: np.random.Generator, m: int, k: int, n: int, bias: bool,
                relu: bool) -> None:
    x, w = rand(rng, m, k), rand(rng, n, k)
    b = rand(rng, n) if bias else None
    check_all_ways(lambda v, out=None: ops.linear(v, w, b, relu=relu, threads=threads, out=out),
                   x, ref_linear(x, w, b, relu), RTOL, in_place=False)


@pytest.mark.parametrize("convert", [
    pytest.param(lambda a: a.astype(np.float64), id="float64"),
    pytest.param(lambda a: (a * 4).astype(np.int64), id="int64"),
    pytest.param(np.asfortranarray, id="fortran"),
    pytest.param(lambda a: a.tolist(), id="list"),
])
@pytest.mark.aarch64
def test_functions_convert_their_inputs(rng: np.random.Generator,
                                        convert: Callable[[F32], Any]) -> None:
    # Unlike prepared kernels, the functions take any real array-like.
    a, b = rand(rng, 3, 5), rand(rng, 1, 5)
    cases: list[tuple[Callable[..., F32], tuple[F32, ...], Callable[..., F64]]] = [
        (ops.relu, (a,), ref_relu),
        (ops.add, (a, b), lambda p, q: ref_add(p, q, False)),
        (ops.softmax, (a,), lambda p: ref_softmax(p, -1)),
    ]
    for fn, args, ref in cases:
        conv = [convert(v) for v in args]
        want = ref(*[np.asarray(v, dtype=np.float32) for v in conv])
        assert_close(fn(*conv), want, RTOL)


# -------------------------------------------------------- prepared kernels


@dataclass(frozen=True)
class Prepared:
    """A prepared kernel, its inputs and its float64 reference."""

    make: Callable[[int], Any]  # threads -> kernel
    inputs: Callable[[np.random.Generator], list[F32]]  # every array argument, in order
    ref: Callable[..., F64]  # reference(*inputs)
    names: tuple[str, ...]  # each input's name in dtype / layout errors
    rtol: float = RTOL
    # run()'s positional arguments from the flat input list (Concat takes a list).
    pack: Callable[[list[F32]], tuple[Any, ...]] = tuple
    # each input's name in shape errors, when it differs from `names`
    shape_names: tuple[str, ...] = field(default=())


def _eltwise_case(kind: str) -> Any:
    shape = [3, 5, 7]
    return pytest.param(
        Prepared(make=lambda t: ops.Eltwise(kind, shape, threads=t),
                 inputs=lambda r: [(rand(r, *shape) * ELTWISE_SCALE[kind]).astype(np.float32)],
                 ref=ELTWISE_REFS[kind], names=("x",), rtol=ELTWISE_RTOL[kind]),
        id=f"Eltwise-{kind}")


def _pool_case(kind: str, ceil_mode: bool, count_include_pad: bool) -> Any:
    shape, k, s, p = (2, 3, 9, 7), (3, 2), (2, 1), (1, 0, 1, 1)
    return pytest.param(
        Prepared(make=lambda t: ops.Pool2d(kind, shape, k, stride=s, padding=p,
                                           ceil_mode=ceil_mode,
                                           count_include_pad=count_include_pad, threads=t),
                 inputs=lambda r: [rand(r, *shape)],
                 ref=lambda x: ref_pool2d(x, kind, k, s, p, ceil_mode, count_include_pad),
                 names=("x",), rtol=RTOL_EXACT if kind == "max" else RTOL),
        id=f"Pool2d-{kind}-{'ceil' if ceil_mode else 'floor'}-"
           f"{'incl' if count_include_pad else 'excl'}")


PREPARED = [
    *[_eltwise_case(kind) for kind in ELTWISE_REFS],
    pytest.param(Prepared(make=lambda t: ops.Softmax([4, 7, 3], axis=1, threads=t),
                          inputs=lambda r: [rand(r, 4, 7, 3)], ref=lambda x: ref_softmax(x, 1),
                          names=("x",)), id="Softmax-axis1"),
    pytest.param(Prepared(make=lambda t: ops.Softmax([5, 11], threads=t),
                          inputs=lambda r: [rand(r, 5, 11)], ref=lambda x: ref_softmax(x, -1),
                          names=("x",)), id="Softmax-default-axis"),
    _pool_case("max", True, True),
    _pool_case("avg", False, True),
    _pool_case("avg", True, False),
    pytest.param(Prepared(make=lambda t: ops.GlobalAvgPool([2, 5, 7, 3], threads=t),
                          inputs=lambda r: [rand(r, 2, 5, 7, 3)], ref=ref_global_avg_pool,
                          names=("x",)), id="GlobalAvgPool"),
    pytest.param(Prepared(make=lambda t: ops.Add([3, 4, 5, 6], [1, 4, 1, 1], relu=True,
                                                 threads=t),
                          inputs=lambda r: [rand(r, 3, 4, 5, 6), rand(r, 1, 4, 1, 1)],
                          ref=lambda a, b: ref_add(a, b, True), names=("a", "b")),
                 id="Add-broadcast-relu"),
    pytest.param(Prepared(make=lambda t: ops.Add([7, 9], [7, 9], threads=t),
                          inputs=lambda r: [rand(r, 7, 9), rand(r, 7, 9)],
                          ref=lambda a, b: ref_add(a, b, False), names=("a", "b")),
                 id="Add-same-shape"),
    pytest.param(Prepared(make=lambda t: ops.Concat([[2, 3, 4, 5], [2, 1, 4, 5], [2, 6, 4, 5]],
                                                    threads=t),
                          inputs=lambda r: [rand(r, 2, 3, 4, 5), rand(r, 2, 1, 4, 5),
                                            rand(r, 2, 6, 4, 5)],
                          ref=lambda *xs: ref_concat(xs, 1), rtol=RTOL_EXACT,
                          names=("xs[0]", "xs[1]", "xs[2]"),
                          shape_names=("input 0", "input 1", "input 2"),
                          pack=lambda xs: (list(xs),)), id="Concat-axis1"),
    pytest.param(Prepared(make=lambda t: ops.Concat([[3, 2], [3, 5]], axis=-1, threads=t),
                          inputs=lambda r: [rand(r, 3, 2), rand(r, 3, 5)],
                          ref=lambda *xs: ref_concat(xs, -1), rtol=RTOL_EXACT,
                          names=("xs[0]", "xs[1]"), shape_names=("input 0", "input 1"),
                          pack=lambda xs: (list(xs),)), id="Concat-axis-1"),
    pytest.param(Prepared(make=lambda t: ops.BatchNorm([2, 3, 5, 7], eps=1e-3, threads=t),
                          inputs=lambda r: [rand(r, 2, 3, 5, 7), *bn_params(r, 3)],
                          ref=lambda x, m, v, s, b: ref_batch_norm(x, m, v, s, b, 1e-3),
                          names=("x", "mean", "var", "scale", "shift")), id="BatchNorm"),
    pytest.param(Prepared(make=lambda t: ops.LayerNorm([3, 4, 9], eps=1e-3, threads=t),
                          inputs=lambda r: [rand(r, 3, 4, 9), rand(r, 9), rand(r, 9)],
                          ref=lambda x, s, b: ref_layer_norm(x, s, b, 1e-3),
                          names=("x", "scale", "shift")), id="LayerNorm"),
]


@pytest.mark.parametrize("case", PREPARED)
def test_prepared_run(threads: int, rng: np.random.Generator, case: Prepared) -> None:
    k = case.make(threads)
    assert k.threads == threads
    arrays = case.inputs(rng)
    want = case.ref(*arrays)
    assert tuple(k.output_shape) == want.shape
    assert_close(k.run(*case.pack(arrays)), want, case.rtol)
    out = poisoned(want.shape)
    assert k.run(*case.pack(arrays), out=out) is out
    assert_close(out, want, case.rtol)
    assert_close(k.run(*case.pack(arrays), out=out), want, case.rtol)  # a reused out


@pytest.mark.parametrize("case", PREPARED)
def test_prepared_timeit(threads: int, rng: np.random.Generator, case: Prepared) -> None:
    k = case.make(threads)
    arrays = case.inputs(rng)
    want = case.ref(*arrays)
    out = poisoned(want.shape)
    ns = k.timeit(*case.pack(arrays), out=out, repeats=5, warmup=1)
    assert isinstance(ns, np.ndarray) and ns.dtype == np.float64
    assert ns.shape == (5,)
    assert np.all(ns > 0)
    assert_close(out, want, case.rtol)  # the timed runs computed the real result
    assert k.timeit(*case.pack(arrays), repeats=1, warmup=0).shape == (1,)  # out optional


@pytest.mark.parametrize("case", PREPARED)
def test_prepared_rejects_inputs_it_would_have_to_copy(rng: np.random.Generator,
                                                       case: Prepared) -> None:
    # A timing loop must never hide a conversion: float64 or strided inputs are refused.
    k = case.make(1)
    arrays = case.inputs(rng)
    for i, name in enumerate(case.names):
        bad = list(arrays)
        bad[i] = arrays[i].astype(np.float64)
        with pytest.raises(TypeError, match=re.escape(
                f"{name} must be float32, got float64; convert with np.asarray(x, "
                "dtype=np.float32)")):
            k.run(*case.pack(bad))
        bad[i] = noncontiguous(arrays[i])
        with pytest.raises(TypeError, match=re.escape(
                f"{name} must be C-contiguous; copy it with np.ascontiguousarray(x)")):
            k.run(*case.pack(bad))
        bad[i] = arrays[i].tolist()
        with pytest.raises(TypeError, match=re.escape(f"{name} must be a numpy array")):
            k.run(*case.pack(bad))


@pytest.mark.parametrize("case", PREPARED)
def test_prepared_rejects_wrong_shapes(rng: np.random.Generator, case: Prepared) -> None:
    k = case.make(1)
    arrays = case.inputs(rng)
    names = case.shape_names or case.names
    for i, name in enumerate(names):
        bad = list(arrays)
        bad[i] = rand(rng, *grown(arrays[i].shape))
        with pytest.raises(ValueError, match=shape_msg(name, bad[i].shape, arrays[i].shape)):
            k.run(*case.pack(bad))
    good = tuple(k.output_shape)
    wrong = grown(good)
    with pytest.raises(ValueError, match=shape_msg("out", wrong, good)):
        k.run(*case.pack(arrays), out=poisoned(wrong))
    with pytest.raises(TypeError, match="out must be float32, got float64"):
        k.run(*case.pack(arrays), out=np.zeros(good))


@pytest.mark.parametrize("case", PREPARED)
@pytest.mark.parametrize(("threads", "exc", "match"), [
    (0, ValueError, "threads must be >= 1, got 0"),
    (-2, ValueError, "threads must be >= 1, got -2"),
    ("2", TypeError, "threads='2'"),
])
def test_prepared_rejects_bad_threads(case: Prepared, threads: Any, exc: type[Exception],
                                      match: str) -> None:
    with pytest.raises(exc, match=match):
        case.make(threads)


# --------------------------------------------------------------- bad input

X4 = np.ones((2, 3, 4, 5), np.float32)
X3 = np.ones((3, 4, 5), np.float32)
C3 = np.ones(3, np.float32)


def _ones(*shape: int) -> F32:
    return np.ones(shape, np.float32)


def _max_pool_in_place() -> Any:
    x = _ones(2, 3, 5, 5)  # 3x3, stride 1, pad 1 keeps the shape, so out=x is accepted as such
    return ops.max_pool2d(x, 3, 1, 1, out=x)


def _timeit_no_repeats() -> Any:
    return ops.Eltwise("relu", [2, 3]).timeit(_ones(2, 3), repeats=0)


E = re.escape
BAD_CALLS = [
    # relu / Eltwise
    ("relu-zero-size", lambda: ops.relu(_ones(2, 0, 3)), ValueError,
     E("input shape (2, 0, 3) has a dimension < 1")),
    ("relu-complex", lambda: ops.relu(X4.astype(np.complex64)), TypeError,
     "x must hold real numbers, got dtype complex64"),
    ("Eltwise-kind", lambda: ops.Eltwise("mish", [2, 3]), ValueError,
     "unknown eltwise kind 'mish'; expected relu, relu6, sigmoid, tanh, gelu, gelu_tanh, swish "
     "or hardswish"),
    ("Eltwise-rank-0", lambda: ops.Eltwise("relu", []), ValueError,
     "input shape must have at least 1 dimension"),
    ("timeit-repeats", _timeit_no_repeats, ValueError, "repeats must be >= 1, got 0"),
    # softmax
    ("softmax-axis", lambda: ops.softmax(X4, axis=4), IndexError,
     "axis 4 is out of range for rank 4"),
    ("softmax-negative-axis", lambda: ops.softmax(X4, axis=-5), IndexError,
     "axis -5 is out of range for rank 4"),
    ("Softmax-axis", lambda: ops.Softmax([3], axis=1), IndexError,
     "axis 1 is out of range for rank 1"),
    ("softmax-zero-size", lambda: ops.softmax(_ones(3, 0)), ValueError,
     E("input shape (3, 0) has a dimension < 1")),
    # add
    ("add-not-broadcastable", lambda: ops.add(X4, _ones(2, 3, 4, 3)), ValueError,
     E("b of shape (2, 3, 4, 3) does not broadcast to a of shape (2, 3, 4, 5)")),
    ("add-rank", lambda: ops.add(X4, _ones(1, 2, 3, 4, 5)), ValueError,
     E("b of shape (1, 2, 3, 4, 5) does not broadcast to a of shape (2, 3, 4, 5)")),
    ("mul-fewer-axes", lambda: ops.mul(X4, _ones(3, 5)), ValueError,
     E("b of shape (3, 5) does not broadcast to a of shape (2, 3, 4, 5)")),
    ("add-a-broadcasts", lambda: ops.add(_ones(1, 3), _ones(2, 3)), ValueError,
     E("b of shape (2, 3) does not broadcast to a of shape (1, 3)")),
    ("add-zero-size", lambda: ops.add(_ones(2, 0), _ones(2, 0)), ValueError,
     E("a (2, 0) has a dimension < 1")),
    # concat
    ("concat-mismatch", lambda: ops.concat([X4, _ones(2, 3, 4, 4)]), ValueError,
     E("input 1 has shape (2, 3, 4, 4), which does not match input 0 (2, 3, 4, 5) "
       "outside axis 1")),
    ("concat-rank", lambda: ops.concat([X4, X3]), ValueError,
     E("input 1 has shape (3, 4, 5), which does not match input 0 (2, 3, 4, 5)")),
    ("concat-axis", lambda: ops.concat([X4, X4], axis=4), IndexError,
     "axis 4 is out of range for rank 4"),
    ("concat-negative-axis", lambda: ops.concat([X4, X4], axis=-5), IndexError,
     "axis -5 is out of range for rank 4"),
    ("concat-no-inputs", lambda: ops.concat([]), ValueError, "concat needs at least one input"),
    ("concat-array", lambda: ops.concat(X4),  # type: ignore[arg-type]
     TypeError, "xs must be a list or tuple of arrays"),
    ("concat-zero-size", lambda: ops.concat([X4, _ones(2, 0, 4, 5)]), ValueError,
     E("input 1 (2, 0, 4, 5) has a dimension < 1")),
    ("Concat-input-count", lambda: ops.Concat([[2, 3], [2, 3]]).run([_ones(2, 3)]), ValueError,
     "concat was prepared for 2 inputs, got 1"),
    # pooling
    ("max-pool-kernel-too-tall", lambda: ops.max_pool2d(X4, 5), ValueError,
     E("kernel 5 is larger than the padded input height (4)")),
    ("avg-pool-kernel-too-wide", lambda: ops.avg_pool2d(X4, (1, 6)), ValueError,
     E("kernel 6 is larger than the padded input width (5)")),
    ("pool-rank", lambda: ops.max_pool2d(X3, 2), ValueError,
     E("x must be 4-D, got shape (3, 4, 5)")),
    ("Pool2d-rank", lambda: ops.Pool2d("max", [3, 4, 5], 2), ValueError,
     E("input_shape must have 4 dimensions, got (3, 4, 5)")),
    ("Pool2d-kind", lambda: ops.Pool2d("min", [2, 3, 4, 5], 2), ValueError,
     "pooling kind must be 'max' or 'avg', got 'min'"),
    ("Pool2d-impl", lambda: ops.Pool2d("max", [2, 3, 4, 5], 2, nhwc=True, impl="jit"),
     ValueError, "pooling impl must be 'auto', 'onednn' or 'direct', got 'jit'"),
    ("Pool2d-direct-nchw", lambda: ops.Pool2d("max", [2, 3, 4, 5], 2, impl="direct"),
     ValueError, E("pooling impl 'direct' needs channels-last or blocked data (nhwc=True)")),
    ("pool-padding", lambda: ops.max_pool2d(X4, 2, padding=2), ValueError,
     r"padding \(2, 2, 2, 2\) must be smaller than the kernel \(2, 2\)"),
    ("pool-stride", lambda: ops.max_pool2d(X4, 2, stride=0), ValueError,
     E("stride (0, 0) has a dimension < 1")),
    ("pool-kernel", lambda: ops.avg_pool2d(X4, 0), ValueError,
     E("kernel (0, 0) has a dimension < 1")),
    ("pool-kernel-triple", lambda: ops.max_pool2d(X4, (1, 2, 3)),  # type: ignore[arg-type]
     TypeError,
     E("kernel_size must be an int or a pair of ints, got (1, 2, 3)")),
    ("pool-zero-size", lambda: ops.max_pool2d(_ones(0, 3, 4, 4), 2), ValueError,
     E("input shape (0, 3, 4, 4) has a dimension < 1")),
    ("pool-in-place", _max_pool_in_place, ValueError,
     "out overlaps x; this op cannot work in place"),
    ("gap-rank", lambda: ops.global_avg_pool2d(X3), ValueError,
     E("x must be 4-D, got shape (3, 4, 5)")),
    ("GlobalAvgPool-rank", lambda: ops.GlobalAvgPool([3, 4, 5]), ValueError,
     E("pooling expects a 4-D NCHW input, got shape (3, 4, 5)")),
    ("gap-zero-size", lambda: ops.global_avg_pool2d(_ones(2, 3, 0, 4)), ValueError,
     E("input shape (2, 3, 0, 4) has a dimension < 1")),
    # batch norm
    ("batch-norm-rank", lambda: ops.batch_norm(X3, C3, C3, C3, C3), ValueError,
     E("expects an (N, C) or (N, C, H, W) input, got shape (3, 4, 5)")),
    ("batch-norm-mean", lambda: ops.batch_norm(X4, _ones(4), C3, C3, C3), ValueError,
     shape_msg("mean", (4,), (3,))),
    ("batch-norm-var", lambda: ops.batch_norm(X4, C3, _ones(1), C3, C3), ValueError,
     shape_msg("var", (1,), (3,))),
    ("batch-norm-shift", lambda: ops.batch_norm(X4, C3, C3, C3, _ones(3, 1)), ValueError,
     shape_msg("shift", (3, 1), (3,))),
    ("batch-norm-eps", lambda: ops.batch_norm(X4, C3, C3, C3, C3, eps=0.0), ValueError,
     "eps must be > 0"),
    ("batch-norm-zero-size", lambda: ops.batch_norm(_ones(0, 3), C3, C3, C3, C3), ValueError,
     E("input shape (0, 3) has a dimension < 1")),
    # layer norm
    ("layer-norm-rank", lambda: ops.layer_norm(_ones(5), _ones(5), _ones(5)), ValueError,
     E("layer_norm expects a 2-D to 5-D input, got shape (5,)")),
    ("layer-norm-scale", lambda: ops.layer_norm(X4, _ones(4), _ones(5)), ValueError,
     shape_msg("scale", (4,), (5,))),
    ("layer-norm-shift", lambda: ops.layer_norm(X4, _ones(5), _ones(6)), ValueError,
     shape_msg("shift", (6,), (5,))),
    ("layer-norm-eps", lambda: ops.layer_norm(X4, _ones(5), _ones(5), eps=-1.0), ValueError,
     "eps must be > 0"),
    ("layer-norm-zero-size", lambda: ops.layer_norm(_ones(2, 0), _ones(0), _ones(0)),
     ValueError, E("input shape (2, 0) has a dimension < 1")),
    # linear
    ("linear-inner", lambda: ops.linear(_ones(2, 3), _ones(4, 5)), ValueError,
     E("inner dimensions differ: a (2, 3)") + ".*" + E("b (4, 5)")),
    ("linear-rank", lambda: ops.linear(_ones(3), _ones(4, 3)), ValueError,
     E("a must be 2-D or 3-D, got shape (3,)")),
    ("linear-ranks-differ", lambda: ops.linear(X3, _ones(4, 5)), ValueError,
     E("a and b must have the same rank, got shapes (3, 4, 5) and (4, 5)")),
    ("linear-bias", lambda: ops.linear(_ones(2, 3), _ones(4, 3), _ones(5)), ValueError,
     shape_msg("bias", (5,), (4,))),
    ("linear-zero-size", lambda: ops.linear(_ones(0, 3), _ones(4, 3)), ValueError,
     "m must be >= 1, got 0"),
]


@pytest.mark.parametrize(("call", "exc", "match"),
                         [pytest.param(*c[1:], id=c[0]) for c in BAD_CALLS])
def test_bad_input(call: Callable[[], Any], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        call()


# Every function on one valid input, so the shared arguments can be checked once each.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "relu": lambda **kw: ops.relu(X4, **kw),
    "add": lambda **kw: ops.add(X4, _ones(1, 3, 1, 1), **kw),
    "concat": lambda **kw: ops.concat([X4, X4], **kw),
    "max_pool2d": lambda **kw: ops.max_pool2d(X4, 2, **kw),
    "avg_pool2d": lambda **kw: ops.avg_pool2d(X4, 3, 1, 1, **kw),
    "global_avg_pool2d": lambda **kw: ops.global_avg_pool2d(X4, **kw),
    "batch_norm": lambda **kw: ops.batch_norm(X4, C3, C3, C3, C3, **kw),
    "softmax": lambda **kw: ops.softmax(X4, axis=1, **kw),
    "layer_norm": lambda **kw: ops.layer_norm(X4, _ones(5), _ones(5), **kw),
    "linear": lambda **kw: ops.linear(_ones(2, 3), _ones(4, 3), _ones(4), **kw),
}


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize(("threads", "exc", "match"), [
    (0, ValueError, "threads must be >= 1, got 0"),
    (-1, ValueError, "threads must be >= 1, got -1"),
    ("2", TypeError, "threads must be an int or None, got '2'"),
    (2.0, TypeError, "threads must be an int or None, got 2.0"),
])
def test_functions_reject_bad_threads(name: str, threads: Any, exc: type[Exception],
                                      match: str) -> None:
    with pytest.raises(exc, match=match):
        FUNCTIONS[name](threads=threads)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_functions_reject_bad_out(name: str) -> None:
    fn = FUNCTIONS[name]
    good = fn().shape
    wrong = grown(good)
    with pytest.raises(ValueError, match=shape_msg("out", wrong, good)):
        fn(out=poisoned(wrong))
    with pytest.raises(TypeError, match=E("out must be float32, got float64; convert with")):
        fn(out=np.zeros(good))
    with pytest.raises(TypeError, match="out must be C-contiguous"):
        fn(out=noncontiguous(poisoned(good)))
    readonly = poisoned(good)
    readonly.setflags(write=False)
    with pytest.raises(ValueError, match="out is read-only"):
        fn(out=readonly)
