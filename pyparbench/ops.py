"""Single operators on numpy arrays, run by the native oneDNN / OpenMP core.

The heavy ops (``gemm``, ``linear``, ``conv2d``) take ``library=``, the math
library that computes them (the study's Library layer): ``"onednn"`` (the
default), ``"eigen"`` (Eigen tensor contractions on an Eigen thread pool, as
TensorFlow's non-oneDNN path) or ``"blas"`` (the system OpenBLAS's
cblas_sgemm); convolution through eigen or blas is im2col followed by a
matrix product, NCHW only. Prepared kernels exist for each library
(``Gemm``, ``EigenGemm``, ``BlasGemm``; ``Conv2d``, ``EigenConv2d``,
``BlasConv2d``; ``GemmConv2d``, oneDNN's matmul on channels-last patches
gathered by pyparbench) and share the interfaces ``GemmOp`` and
``Conv2dOp``.
``Linear`` is a fully connected layer whose constant weights oneDNN packs
once, as the graph executor runs one.

Two ways in:

* Functions (``gemm``, ``conv2d``, ``embedding_bag``, ...) take any array-like
  input and **convert** it to C-contiguous float32 (a copy only when needed;
  indices to int64 unless already int32/int64). The prepared kernel behind a
  call is cached per (shapes, attributes, threads), so repeated calls create
  no primitive. (``embedding_bag``'s kernel holds no prepared state: given
  arrays that need no conversion, a call goes straight to it from C++.)
* Prepared kernels (``Gemm``, ``Conv2d``, ``EmbeddingBag``, ...) are created
  once for fixed shapes and a fixed thread count; their ``run()`` creates
  nothing, and ``timeit()`` runs them in a C++ loop. They **do not convert**:
  an input that is not float32 and C-contiguous raises TypeError saying how
  to fix it, so a timing loop never hides a copy.

``gemm``, ``linear`` and ``conv2d`` (and the prepared ``Gemm``, ``Linear``,
``Conv2d``) take ``precision=``: ``"fp32"`` (the default) or ``"bf16"``, where
the inputs and weights are bfloat16 (``ml_dtypes.bfloat16`` arrays, or float
arrays the functions round to nearest even, through float32, once per call;
a prepared kernel rounds its weights once, in ``set_weights``), the products
accumulate in fp32 and the output is float32. bf16 runs on the onednn
library; :func:`implementation` says which oneDNN implementation a call runs
and whether it emulates bf16 (no bf16 dot-product instructions under it).

Every op takes ``threads=`` (intra-op threads; None = the current default, see
``pyparbench.set_default_threads``) and ``out=`` (a preallocated float32
C-contiguous array of the output's shape, fully overwritten). The GIL is
released while the kernel runs. Bad input raises ValueError (shapes, sizes,
counts), TypeError (dtypes, non-arrays) or IndexError (embedding indices,
axes), naming the bad value; oneDNN failures raise ``pyparbench.DnnlError``.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args

import numpy as np
import numpy.typing as npt

from pyparbench._bfloat16 import is_bfloat16, to_bfloat16
from pyparbench._core import ops as _k
from pyparbench._checks import is_int as _is_int
from pyparbench._checks import padding4 as _padding4
from pyparbench._checks import pair as _pair
from pyparbench._checks import thread_count as _thread_count
from pyparbench.choices import LIBRARIES
from pyparbench.threading.defaults import get_default_threads

__all__ = [
    "LIBRARIES",
    "PRECISIONS",
    "Add",
    "BatchNorm",
    "Binary",
    "BlasConv2d",
    "BlasGemm",
    "Concat",
    "Conv2d",
    "Conv2dOp",
    "Attention",
    "DecodeAttention",
    "EigenConv2d",
    "EigenGemm",
    "EmbeddingBag",
    "Eltwise",
    "Gemm",
    "GemmConv2d",
    "GemmOp",
    "GlobalAvgPool",
    "Glu",
    "Implementation",
    "LayerNorm",
    "Linear",
    "Pool2d",
    "PositionIds",
    "QuantizedConv2d",
    "QuantizedKernel",
    "QuantizedLinear",
    "RmsNorm",
    "Rotary",
    "Softmax",
    "StreamedLinear",
    "Transpose",
    "TrilFlatten",
    "add",
    "avg_pool2d",
    "batch_norm",
    "clear_cache",
    "concat",
    "conv2d",
    "embedding_bag",
    "gemm",
    "global_avg_pool2d",
    "implementation",
    "layer_norm",
    "linear",
    "max_pool2d",
    "mul",
    "quantized_conv2d",
    "quantized_gemm",
    "quantized_implementation",
    "quantized_linear",
    "relu",
    "softmax",
    "transpose",
    "tril_flatten",
]

Array = npt.NDArray[np.float32]
Precision = Literal["fp32", "bf16"]
# What each precision is called, in the order the functions document them.
PRECISIONS: tuple[str, ...] = get_args(Precision)
IntPair = int | tuple[int, int]
Padding = int | tuple[int, int] | tuple[int, int, int, int]


GemmOp = _k.GemmOp
Conv2dOp = _k.Conv2dOp
Gemm = _k.Gemm
EigenGemm = _k.EigenGemm
BlasGemm = _k.BlasGemm
Linear = _k.Linear
# A linear node of at most STREAMED_MAX_ROWS rows without an activation, as
# the executor runs it on the onednn library (a decode step's products).
StreamedLinear = _k.StreamedLinear
STREAMED_MAX_ROWS: int = _k.STREAMED_MAX_ROWS
EmbeddingBag = _k.EmbeddingBag
Eltwise = _k.Eltwise
Softmax = _k.Softmax
GlobalAvgPool = _k.GlobalAvgPool
Binary = _k.Binary
Transpose = _k.Transpose
TrilFlatten = _k.TrilFlatten
Concat = _k.Concat
BatchNorm = _k.BatchNorm
LayerNorm = _k.LayerNorm
# A decoder's kernels (see their docstrings): padding-aware positions,
# normalisation, rotary positions, attention, gated units, and a decode step's
# attention over a key / value cache.
PositionIds = _k.PositionIds
RmsNorm = _k.RmsNorm
Rotary = _k.Rotary
Attention = _k.Attention
Glu = _k.Glu
DecodeAttention = _k.DecodeAttention


# ---------------------------------------------------------------- arguments


def _threads(threads: int | None) -> int:
    if threads is None:
        return get_default_threads()
    if not _is_int(threads):
        raise TypeError(f"threads must be an int or None, got {threads!r}")
    return _thread_count(threads, "threads")


def _library(library: str) -> str:
    """The checked math-library name (ValueError lists the valid ones)."""
    if not isinstance(library, str):
        raise TypeError(f"library must be a str, got {library!r}")
    return _k.parse_library(library)


def _f32(x: Any, name: str) -> Array:
    """C-contiguous float32 view of x, copying only when needed."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    return np.asarray(arr, dtype=np.float32, order="C")


def _opt_f32(x: Any, name: str) -> Array | None:
    return None if x is None else _f32(x, name)


def _precision(precision: str) -> str:
    """The checked precision name (ValueError names the bad one)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")
    return precision


def _bf16(x: Any, name: str) -> npt.NDArray[Any]:
    """x as a C-contiguous ``ml_dtypes.bfloat16`` array: bfloat16 input as it
    is (copied only when not contiguous), real numbers through float32 and
    rounded to nearest even."""
    arr = np.asarray(x)
    return to_bfloat16(arr if is_bfloat16(arr.dtype) else _f32(arr, name))


def _inputs(x: Any, name: str, precision: str) -> npt.NDArray[Any]:
    """An activation or weight in the kernel's form for `precision`."""
    return _bf16(x, name) if precision == "bf16" else _f32(x, name)


def _indices(x: Any, name: str) -> npt.NDArray[np.integer[Any]]:
    arr = np.asarray(x)
    if arr.dtype == np.int32 or arr.dtype == np.int64:
        return np.ascontiguousarray(arr)
    if arr.dtype.kind in "iu" or arr.size == 0:
        return np.ascontiguousarray(arr, dtype=np.int64)
    raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")


def _rank(x: npt.NDArray[Any], name: str, ranks: Sequence[int]) -> None:
    if x.ndim not in ranks:
        want = " or ".join(f"{r}-D" for r in ranks)
        raise ValueError(f"{name} must be {want}, got shape {x.shape}")


# ------------------------------------------------------------------ caching

K = TypeVar("K")
# Prepared kernels by key, each with a lock for calls that change the
# kernel's state before running it (conv2d's weights): two threads sharing a
# cached kernel must not interleave those steps.
_CACHE: OrderedDict[tuple[Any, ...], tuple[Any, threading.Lock]] = OrderedDict()
_CACHE_SIZE = 128
_CACHE_LOCK = threading.Lock()  # the functions may be called from several threads


def _cached(key: tuple[Any, ...], make: Callable[[], K]) -> tuple[K, threading.Lock]:
    """The prepared kernel for `key` and its lock, created on first use (LRU of 128)."""
    with _CACHE_LOCK:
        entry = _CACHE.get(key)
        if entry is not None:
            _CACHE.move_to_end(key)
            return entry
    k = make()  # outside the lock: creating a kernel may take a while
    with _CACHE_LOCK:
        entry = _CACHE.setdefault(key, (k, threading.Lock()))
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return entry


def _kernel(key: tuple[Any, ...], make: Callable[[], K]) -> K:
    """The prepared kernel for `key` (see :func:`_cached`)."""
    return _cached(key, make)[0]


def clear_cache() -> None:
    """Drop every cached prepared kernel."""
    with _CACHE_LOCK:
        _CACHE.clear()


# ------------------------------------------------------- prepared wrappers


class _Conv2dArgs:
    """The constructor of every prepared convolution class: ints or tuples in,
    the native constructor's tuples out.

    Parameters
    ----------
    input_shape
        (N, C, H, W), or (N, H, W, C) with ``nhwc=True`` (onednn only).
    out_channels, kernel_size
        Output channels and (kh, kw) or one int.
    stride, dilation
        An int or a pair; dilation 1 is a dense kernel.
    padding
        An int, (pad_h, pad_w) or (top, bottom, left, right).
    groups
        Channel groups; ``groups == C == out_channels`` is depthwise.
    bias, relu
        Add a bias per output channel; apply ReLU.
    threads
        Intra-op threads (None: the current default).
    precision
        ``"fp32"``, or ``"bf16"`` (``Conv2d`` only): x is a bfloat16 array,
        the weights are stored in bf16, fp32 accumulation and output.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        out_channels: int,
        kernel_size: IntPair,
        *,
        stride: IntPair = 1,
        padding: Padding = 0,
        dilation: IntPair = 1,
        groups: int = 1,
        bias: bool = False,
        relu: bool = False,
        nhwc: bool = False,
        threads: int | None = None,
        precision: Precision = "fp32",
    ) -> None:
        if len(input_shape) != 4:
            raise ValueError(f"input_shape must have 4 dimensions, got {tuple(input_shape)}")
        super().__init__(  # type: ignore[call-arg]  # the native class after this one in the MRO
            tuple(int(d) for d in input_shape),
            out_channels,
            _pair("kernel_size", kernel_size),
            stride=_pair("stride", stride),
            padding=_padding4(padding),
            dilation=_pair("dilation", dilation),
            groups=groups,
            bias=bias,
            relu=relu,
            nhwc=nhwc,
            threads=threads,
            precision=_precision(precision),
        )


class Conv2d(_Conv2dArgs, _k.Conv2d):
    """Prepared 2-D convolution through oneDNN (see the native class for the full contract)."""


class GemmConv2d(_Conv2dArgs, _k.GemmConv2d):
    """Prepared channels-last 2-D convolution as gathered patches and one oneDNN
    matmul (groups 1), as the graph's ``im2col`` pass runs small feature maps."""


class EigenConv2d(_Conv2dArgs, _k.EigenConv2d):
    """Prepared 2-D convolution through Eigen: im2col + tensor contraction, NCHW only."""


class BlasConv2d(_Conv2dArgs, _k.BlasConv2d):
    """Prepared 2-D convolution through OpenBLAS: im2col + cblas_sgemm, NCHW only."""


# The prepared class of each math library.
_GEMM: dict[str, Callable[..., _k.GemmOp]] = {"onednn": Gemm, "eigen": EigenGemm,
                                             "blas": BlasGemm}
_CONV2D: dict[str, Callable[..., _k.Conv2dOp]] = {"onednn": Conv2d, "eigen": EigenConv2d,
                                                 "blas": BlasConv2d}


class Add(_k.Binary):
    """Prepared a + b (b broadcast where its size is 1), optional fused ReLU."""

    def __init__(self, a_shape: Sequence[int], b_shape: Sequence[int], *, relu: bool = False,
                 threads: int | None = None) -> None:
        super().__init__("add", list(a_shape), list(b_shape), relu=relu, threads=threads)


class Pool2d(_k.Pool2d):
    """Prepared max or average pooling ("max" or "avg").

    ``input_shape`` is NCHW; with ``nhwc`` the data passed to ``run`` is stored
    channels-last, (N, H, W, C). ``impl`` is "onednn", "direct" (a channels-last
    loop of pyparbench's own: each output row's window rows folded into one,
    then each pixel's window columns of it) or "auto": direct
    for channels-last data, where oneDNN 2.6 runs max pooling and averages
    that leave the padding out 2-10x slower on AVX2 machines, except an
    average counting the padding (oneDNN's is faster); oneDNN on NCHW.
    """

    def __init__(
        self,
        kind: str,
        input_shape: Sequence[int],
        kernel_size: IntPair,
        *,
        stride: IntPair | None = None,
        padding: Padding = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        threads: int | None = None,
        nhwc: bool = False,
        impl: str = "auto",
    ) -> None:
        if len(input_shape) != 4:
            raise ValueError(f"input_shape must have 4 dimensions, got {tuple(input_shape)}")
        kernel = _pair("kernel_size", kernel_size)
        super().__init__(
            kind,
            [int(d) for d in input_shape],
            kernel,
            stride=kernel if stride is None else _pair("stride", stride),
            padding=_padding4(padding),
            ceil_mode=ceil_mode,
            count_include_pad=count_include_pad,
            threads=threads,
            nhwc=nhwc,
            impl=impl,
        )


# ---------------------------------------------------------------- functions


@dataclass(frozen=True)
class Implementation:
    """What computes an op: ``name`` is oneDNN's implementation name
    (``impl_info_str``: ``"brg:avx512_core_bf16"``, ``"gemm:jit"``, ...), or
    the library's (``"eigen"``, ``"blas"``, ``"im2col+..."``); ``emulated``:
    bf16 without bf16 dot-product instructions (False for fp32)."""

    name: str
    precision: str
    emulated: bool


def _gemm_kernel(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    bias: npt.ArrayLike | None,
    relu: bool,
    trans_a: bool,
    trans_b: bool,
    library: str,
    threads: int | None,
    precision: str,
) -> tuple[_k.GemmOp, npt.NDArray[Any], npt.NDArray[Any], Array | None]:
    """The cached prepared gemm for these arguments, and the arguments in its form."""
    prec = _precision(precision)
    a_, b_ = _inputs(a, "a", prec), _inputs(b, "b", prec)
    _rank(a_, "a", (2, 3))
    _rank(b_, "b", (2, 3))
    if a_.ndim != b_.ndim:
        raise ValueError(f"a and b must have the same rank, got shapes {a_.shape} and {b_.shape}")
    batch = a_.shape[0] if a_.ndim == 3 else 0
    if a_.ndim == 3 and b_.shape[0] != batch:
        raise ValueError(f"batch sizes differ: a {a_.shape} and b {b_.shape}")
    m, k = a_.shape[-2:][::-1] if trans_a else a_.shape[-2:]
    kb, n = b_.shape[-2:][::-1] if trans_b else b_.shape[-2:]
    if k != kb:
        raise ValueError(
            f"inner dimensions differ: a {a_.shape} (trans_a={trans_a}) and "
            f"b {b_.shape} (trans_b={trans_b}) give k={k} and k={kb}"
        )
    bias_ = _opt_f32(bias, "bias")
    t, lib = _threads(threads), _library(library)
    key = ("gemm", lib, batch, m, n, k, trans_a, trans_b, bias_ is not None, relu, t, prec)
    g = _kernel(key, lambda: _GEMM[lib](m, n, k, batch=batch, trans_a=trans_a, trans_b=trans_b,
                                        bias=bias_ is not None, relu=relu, threads=t,
                                        precision=prec))
    return g, a_, b_, bias_


def gemm(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    bias: npt.ArrayLike | None = None,
    *,
    relu: bool = False,
    trans_a: bool = False,
    trans_b: bool = False,
    library: str = "onednn",
    threads: int | None = None,
    out: Array | None = None,
    precision: Precision = "fp32",
) -> Array:
    """C = op(A)·op(B) (+ bias) (+ ReLU).

    A is (m, k) — (k, m) with ``trans_a`` — and B is (k, n) — (n, k) with
    ``trans_b``; both may carry the same leading batch dimension (3-D: a
    batched matmul). ``bias`` has length n and is added to every row.
    ``library`` is ``"onednn"`` (a oneDNN matmul), ``"eigen"`` or ``"blas"``.
    ``precision="bf16"`` (onednn only): A and B are rounded to bfloat16 (kept
    as they are when already ``ml_dtypes.bfloat16``), the products accumulate
    in fp32, the bias and C are float32.
    """
    g, a_, b_, bias_ = _gemm_kernel(a, b, bias, relu, trans_a, trans_b, library, threads,
                                    precision)
    return g.run(a_, b_, bias_, out)


def linear(
    x: npt.ArrayLike,
    weight: npt.ArrayLike,
    bias: npt.ArrayLike | None = None,
    *,
    relu: bool = False,
    library: str = "onednn",
    threads: int | None = None,
    out: Array | None = None,
    precision: Precision = "fp32",
) -> Array:
    """y = x·weightᵀ (+ bias) (+ ReLU); weight is (out_features, in_features) as in PyTorch.

    ``library`` and ``precision`` as in :func:`gemm` (bf16: x and weight in
    bfloat16, fp32 accumulation, float32 y).
    """
    return gemm(x, weight, bias, relu=relu, trans_b=True, library=library, threads=threads,
                out=out, precision=precision)


def _conv2d_kernel(
    x: npt.ArrayLike,
    weight: npt.ArrayLike,
    bias: npt.ArrayLike | None,
    stride: IntPair,
    padding: Padding,
    dilation: IntPair,
    groups: int,
    relu: bool,
    layout: str,
    library: str,
    threads: int | None,
    precision: str,
) -> tuple[_k.Conv2dOp, threading.Lock, npt.NDArray[Any], npt.NDArray[Any], Array | None]:
    """The cached prepared convolution for these arguments, its lock, and the
    arguments in its form."""
    if layout not in ("nchw", "nhwc"):
        raise ValueError(f"layout must be 'nchw' or 'nhwc', got {layout!r}")
    prec = _precision(precision)
    x_, w_ = _inputs(x, "x", prec), _inputs(weight, "weight", prec)
    _rank(x_, "x", (4,))
    _rank(w_, "weight", (4,))
    if not _is_int(groups):
        raise TypeError(f"groups must be an int, got {groups!r}")
    nhwc = layout == "nhwc"
    c = x_.shape[3] if nhwc else x_.shape[1]
    if groups >= 1 and w_.shape[1] * groups != c:
        raise ValueError(
            f"weight {w_.shape} with groups={groups} expects {w_.shape[1] * groups} input "
            f"channels, but x {x_.shape} ({layout}) has {c}"
        )
    bias_ = _opt_f32(bias, "bias")
    st, dl, pad = _pair("stride", stride), _pair("dilation", dilation), _padding4(padding)
    t, lib = _threads(threads), _library(library)
    o, kh, kw = w_.shape[0], w_.shape[2], w_.shape[3]
    key = ("conv2d", lib, x_.shape, o, kh, kw, st, pad, dl, groups, bias_ is not None, relu,
           nhwc, t, prec)
    conv, lock = _cached(key, lambda: _CONV2D[lib](x_.shape, o, (kh, kw), stride=st,
                                                   padding=pad, dilation=dl, groups=groups,
                                                   bias=bias_ is not None, relu=relu,
                                                   nhwc=nhwc, threads=t, precision=prec))
    return conv, lock, x_, w_, bias_


def conv2d(
    x: npt.ArrayLike,
    weight: npt.ArrayLike,
    bias: npt.ArrayLike | None = None,
    *,
    stride: IntPair = 1,
    padding: Padding = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    relu: bool = False,
    layout: str = "nchw",
    library: str = "onednn",
    threads: int | None = None,
    out: Array | None = None,
    precision: Precision = "fp32",
) -> Array:
    """2-D convolution; x is NCHW (or NHWC with ``layout="nhwc"``, onednn only).

    weight is OIHW with I = C / groups (PyTorch's layout). ``padding`` is an
    int, (pad_h, pad_w) or (top, bottom, left, right); dilation 1 is dense.
    ``library`` is ``"onednn"`` (a oneDNN convolution), ``"eigen"`` or
    ``"blas"`` (im2col + matrix product). Each call copies the weights into
    the kernel (reordered for oneDNN); a prepared ``Conv2d`` (``EigenConv2d``,
    ``BlasConv2d``) does that once. ``precision="bf16"`` (onednn only): x and
    the weights are rounded to bfloat16 (kept as they are when already
    ``ml_dtypes.bfloat16``), the products accumulate in fp32, the bias and
    the output are float32.
    """
    conv, lock, x_, w_, bias_ = _conv2d_kernel(x, weight, bias, stride, padding, dilation,
                                               groups, relu, layout, library, threads,
                                               precision)
    with lock:  # another thread's weights must not slip in between
        conv.set_weights(w_, bias_)
        return conv.run(x_, out)


def implementation(op: Literal["gemm", "linear", "conv2d"], *args: Any,
                   **kwargs: Any) -> Implementation:
    """What the call ``op(*args, **kwargs)`` (``gemm``, ``linear`` or
    ``conv2d``, with the same arguments) runs on, without running it: the
    prepared kernel behind it (created and cached as the call would) says
    its implementation and whether it emulates bf16."""
    kernel: _k.GemmOp | _k.Conv2dOp
    if op == "gemm":
        kernel = _gemm_kernel(*_call_args(gemm, args, kwargs))[0]
    elif op == "linear":
        x, weight, bias, relu, library, threads, precision = _call_args(linear, args, kwargs)
        kernel = _gemm_kernel(x, weight, bias, relu, False, True, library, threads, precision)[0]
    elif op == "conv2d":
        kernel = _conv2d_kernel(*_call_args(conv2d, args, kwargs))[0]
    else:
        raise ValueError(f"op must be 'gemm', 'linear' or 'conv2d', got {op!r}")
    return Implementation(kernel.implementation, kernel.precision, kernel.emulated)


def _call_args(fn: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> list[Any]:
    """fn's parameters (but ``out``) bound to args and kwargs with fn's
    defaults, in fn's order: the positional arguments of its _kernel helper."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return [v for name, v in bound.arguments.items() if name != "out"]


# ------------------------------------------------------------------ int8

QuantizedKernel = _k.QuantizedKernel
QuantizedLinear = _k.QuantizedLinear
QuantizedConv2d = _k.QuantizedConv2d
OutDtype = Literal["float32", "uint8", "int8"]


def _int8_input(x: Any, name: str) -> npt.NDArray[Any]:
    """x as a C-contiguous uint8 or int8 array (its dtype is the kernel's)."""
    arr = np.asarray(x)
    if arr.dtype not in (np.uint8, np.int8):
        raise TypeError(f"{name} must be uint8 or int8 (quantise it with "
                        f"pyparbench.quantization.quantize), got dtype {arr.dtype}")
    return np.ascontiguousarray(arr)


def _int8_weight(w: Any, name: str) -> npt.NDArray[np.int8]:
    arr = np.asarray(w)
    if arr.dtype != np.int8:
        raise TypeError(f"{name} must be int8 (symmetric, per output channel), got dtype "
                        f"{arr.dtype}")
    return np.ascontiguousarray(arr)


def _weight_scales(scale: npt.ArrayLike, zero_point: npt.ArrayLike,
                   channels: int) -> tuple[float, ...]:
    """One float32 scale per output channel; a weight zero point other than 0
    is refused (the kernels take symmetric weights)."""
    zp = np.asarray(zero_point)
    if np.any(zp != 0):
        raise ValueError(f"weight_zero_point must be 0 (the int8 kernels take symmetric "
                         f"weights; quantise them with zero point 0), got {zero_point!r}")
    s = np.asarray(scale, dtype=np.float32)
    if s.ndim == 0:
        s = np.full(channels, s, dtype=np.float32)
    if s.shape != (channels,):
        raise ValueError(f"weight_scale must be a scalar or hold one scale per output channel "
                         f"({channels}), got shape {s.shape}")
    return tuple(float(v) for v in s)


def _out_quantization(out_dtype: str, out_scale: float | None,
                      out_zero_point: int) -> tuple[str, float, int]:
    if out_dtype not in get_args(OutDtype):
        raise ValueError(f"out_dtype must be 'float32', 'uint8' or 'int8', got {out_dtype!r}")
    if out_dtype == "float32":
        if out_scale is not None or out_zero_point != 0:
            raise ValueError("out_scale and out_zero_point are for a uint8 / int8 output; "
                             "the float32 output is dequantised")
        return out_dtype, 1.0, 0
    if out_scale is None:
        raise ValueError(f"out_dtype={out_dtype!r} needs out_scale (and out_zero_point)")
    return out_dtype, float(out_scale), int(out_zero_point)


def _quantized_linear_kernel(
    x: npt.ArrayLike, weight: npt.ArrayLike, bias: npt.ArrayLike | None, x_scale: float,
    x_zero_point: int, weight_scale: npt.ArrayLike, weight_zero_point: npt.ArrayLike,
    out_dtype: str, out_scale: float | None, out_zero_point: int, relu: bool,
    threads: int | None,
) -> tuple[_k.QuantizedLinear, threading.Lock, npt.NDArray[Any], npt.NDArray[np.int8],
           Array | None]:
    x_, w_ = _int8_input(x, "x"), _int8_weight(weight, "weight")
    _rank(x_, "x", (2,))
    _rank(w_, "weight", (2,))
    if x_.shape[1] != w_.shape[1]:
        raise ValueError(f"x {x_.shape} and weight {w_.shape} differ in in_features")
    m, k = x_.shape
    n = w_.shape[0]
    scales = _weight_scales(weight_scale, weight_zero_point, n)
    od, os_, oz = _out_quantization(out_dtype, out_scale, out_zero_point)
    bias_ = _opt_f32(bias, "bias")
    t = _threads(threads)
    xd = str(x_.dtype)
    key = ("quantized_linear", m, n, k, xd, float(x_scale), int(x_zero_point), scales, od, os_,
           oz, bias_ is not None, relu, t)
    kernel, lock = _cached(key, lambda: QuantizedLinear(
        m, n, k, weight_scales=list(scales), x_dtype=xd, x_scale=float(x_scale),
        x_zero_point=int(x_zero_point), out_dtype=od, out_scale=os_, out_zero_point=oz,
        bias=bias_ is not None, relu=relu, threads=t))
    return kernel, lock, x_, w_, bias_


def quantized_linear(
    x: npt.ArrayLike,
    weight: npt.ArrayLike,
    bias: npt.ArrayLike | None = None,
    *,
    x_scale: float,
    x_zero_point: int = 0,
    weight_scale: npt.ArrayLike,
    weight_zero_point: npt.ArrayLike = 0,
    out_dtype: OutDtype = "float32",
    out_scale: float | None = None,
    out_zero_point: int = 0,
    relu: bool = False,
    threads: int | None = None,
    out: npt.NDArray[Any] | None = None,
) -> npt.NDArray[Any]:
    """int8 y = x·weightᵀ (+ bias) (+ ReLU) on oneDNN, with s32 accumulation.

    x (m, k) is uint8 or int8, ``(x - x_zero_point) · x_scale`` in real
    terms; weight (n, k) is int8 with ``weight_scale`` per output channel (or
    one for all) and no zero point (a nonzero ``weight_zero_point`` raises
    ValueError). ``out_dtype="float32"``: y = acc · x_scale · weight_scale[oc]
    + bias (float32 bias, added after dequantisation as ONNX's QLinearConv
    and ONNX Runtime do with their int32 bias at scale x_scale ·
    weight_scale); ``"uint8"`` / ``"int8"``: that value (after ReLU) divided
    by ``out_scale``, rounded half to even, plus ``out_zero_point``,
    saturated. pyparbench.quantization makes the arrays and scales.
    """
    kernel, lock, x_, w_, bias_ = _quantized_linear_kernel(
        x, weight, bias, x_scale, x_zero_point, weight_scale, weight_zero_point, out_dtype,
        out_scale, out_zero_point, relu, threads)
    with lock:
        kernel.set_weights(w_, bias_)
        return kernel.run(x_, out)


def quantized_gemm(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    bias: npt.ArrayLike | None = None,
    *,
    a_scale: float,
    a_zero_point: int = 0,
    b_scale: npt.ArrayLike,
    b_zero_point: npt.ArrayLike = 0,
    out_dtype: OutDtype = "float32",
    out_scale: float | None = None,
    out_zero_point: int = 0,
    relu: bool = False,
    threads: int | None = None,
    out: npt.NDArray[Any] | None = None,
) -> npt.NDArray[Any]:
    """int8 C = A·B (+ bias) (+ ReLU): A (m, k) uint8 or int8, B (k, n) int8
    with ``b_scale`` per column (output channel); otherwise as
    :func:`quantized_linear`, which it calls with weight = Bᵀ."""
    b_ = _int8_weight(b, "b")
    _rank(b_, "b", (2,))
    return quantized_linear(a, np.ascontiguousarray(b_.T), bias, x_scale=a_scale,
                            x_zero_point=a_zero_point, weight_scale=b_scale,
                            weight_zero_point=b_zero_point, out_dtype=out_dtype,
                            out_scale=out_scale, out_zero_point=out_zero_point, relu=relu,
                            threads=threads, out=out)


def _quantized_conv2d_kernel(
    x: npt.ArrayLike, weight: npt.ArrayLike, bias: npt.ArrayLike | None, x_scale: float,
    x_zero_point: int, weight_scale: npt.ArrayLike, weight_zero_point: npt.ArrayLike,
    stride: IntPair, padding: Padding, dilation: IntPair, groups: int, out_dtype: str,
    out_scale: float | None, out_zero_point: int, relu: bool, layout: str,
    threads: int | None,
) -> tuple[_k.QuantizedConv2d, threading.Lock, npt.NDArray[Any], npt.NDArray[np.int8],
           Array | None]:
    if layout not in ("nchw", "nhwc"):
        raise ValueError(f"layout must be 'nchw' or 'nhwc', got {layout!r}")
    x_, w_ = _int8_input(x, "x"), _int8_weight(weight, "weight")
    _rank(x_, "x", (4,))
    _rank(w_, "weight", (4,))
    if not _is_int(groups):
        raise TypeError(f"groups must be an int, got {groups!r}")
    nhwc = layout == "nhwc"
    n, c, h, w = (x_.shape[0], x_.shape[3], x_.shape[1], x_.shape[2]) if nhwc else x_.shape
    if groups >= 1 and w_.shape[1] * groups != c:
        raise ValueError(
            f"weight {w_.shape} with groups={groups} expects {w_.shape[1] * groups} input "
            f"channels, but x {x_.shape} ({layout}) has {c}"
        )
    o, kh, kw = w_.shape[0], w_.shape[2], w_.shape[3]
    scales = _weight_scales(weight_scale, weight_zero_point, o)
    od, os_, oz = _out_quantization(out_dtype, out_scale, out_zero_point)
    bias_ = _opt_f32(bias, "bias")
    st, dl, pad = _pair("stride", stride), _pair("dilation", dilation), _padding4(padding)
    t = _threads(threads)
    xd = str(x_.dtype)
    key = ("quantized_conv2d", x_.shape, o, kh, kw, st, pad, dl, groups, xd, float(x_scale),
           int(x_zero_point), scales, od, os_, oz, bias_ is not None, relu, nhwc, t)
    kernel, lock = _cached(key, lambda: QuantizedConv2d(
        [n, c, h, w], o, (kh, kw), stride=st, padding=list(pad), dilation=dl, groups=groups,
        weight_scales=list(scales), x_dtype=xd, x_scale=float(x_scale),
        x_zero_point=int(x_zero_point), out_dtype=od, out_scale=os_, out_zero_point=oz,
        bias=bias_ is not None, relu=relu, nhwc=nhwc, threads=t))
    return kernel, lock, x_, w_, bias_


def quantized_conv2d(
    x: npt.ArrayLike,
    weight: npt.ArrayLike,
    bias: npt.ArrayLike | None = None,
    *,
    x_scale: float,
    x_zero_point: int = 0,
    weight_scale: npt.ArrayLike,
    weight_zero_point: npt.ArrayLike = 0,
    stride: IntPair = 1,
    padding: Padding = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    out_dtype: OutDtype = "float32",
    out_scale: float | None = None,
    out_zero_point: int = 0,
    relu: bool = False,
    layout: str = "nchw",
    threads: int | None = None,
    out: npt.NDArray[Any] | None = None,
) -> npt.NDArray[Any]:
    """int8 2-D convolution on oneDNN: x NCHW (or NHWC) uint8 or int8, weight
    OIHW int8 with ``weight_scale`` per output channel; the geometry as
    :func:`conv2d`'s, the quantisation as :func:`quantized_linear`'s."""
    kernel, lock, x_, w_, bias_ = _quantized_conv2d_kernel(
        x, weight, bias, x_scale, x_zero_point, weight_scale, weight_zero_point, stride,
        padding, dilation, groups, out_dtype, out_scale, out_zero_point, relu, layout, threads)
    with lock:
        kernel.set_weights(w_, bias_)
        return kernel.run(x_, out)


def quantized_implementation(op: Literal["quantized_linear", "quantized_conv2d"], *args: Any,
                             **kwargs: Any) -> tuple[str, bool]:
    """What the call ``op(*args, **kwargs)`` runs on, without running it:
    oneDNN's implementation name and whether it runs int8 dot-product
    instructions (VNNI, AMX) natively."""
    kernel: _k.QuantizedKernel
    if op == "quantized_linear":
        kernel = _quantized_linear_kernel(*_call_args(quantized_linear, args, kwargs))[0]
    elif op == "quantized_conv2d":
        kernel = _quantized_conv2d_kernel(*_call_args(quantized_conv2d, args, kwargs))[0]
    else:
        raise ValueError(f"op must be 'quantized_linear' or 'quantized_conv2d', got {op!r}")
    return kernel.implementation, kernel.native


def embedding_bag(
    table: npt.ArrayLike,
    indices: npt.ArrayLike,
    offsets: npt.ArrayLike | None = None,
    *,
    mode: str = "sum",
    per_sample_weights: npt.ArrayLike | None = None,
    threads: int | None = None,
    out: Array | None = None,
    precision: Precision = "fp32",
) -> Array:
    """Sum or mean of table rows per bag (PyTorch's ``embedding_bag`` conventions).

    ``indices`` is 1-D with ``offsets`` (offsets[i] = start of bag i,
    offsets[0] = 0, non-decreasing) or 2-D (bags, bag_size) with no offsets.
    Empty bags give zeros. ``per_sample_weights`` (mode "sum" only) has the
    shape of ``indices``. An index outside [0, rows) raises IndexError naming
    the index and its position. A table of ``ml_dtypes.bfloat16`` is read as
    it is (rows widened to fp32, summed in fp32, float32 output);
    ``precision="bf16"`` rounds a float table to bfloat16 first (once per
    call). A uint8 table (rows, dim + 8) is 8-bit rowwise, PyTorch's
    ``embedding_bag_byte_prepack`` layout
    (:func:`pyparbench.quantization.byte_rowwise_prepack` makes one): each
    value reads as value · scale + bias of its row, summed in fp32.
    """
    # Arguments already in the kernel's form (the usual call) go straight to
    # the kernel; anything else is converted and checked below.
    prec = _precision(precision)
    if prec == "fp32":
        res = _k.embedding_bag_direct(table, indices, offsets, per_sample_weights, out, mode,
                                      threads)
        if res is not None:
            return res
    byte_rowwise = np.asarray(table).dtype == np.uint8
    bf16_table = prec == "bf16" or is_bfloat16(np.asarray(table).dtype)
    if byte_rowwise:
        if prec != "fp32":
            raise ValueError("an 8-bit rowwise (uint8) table is read as it is: leave precision "
                             f"'fp32', got {precision!r}")
        t_ = np.ascontiguousarray(np.asarray(table))
    else:
        t_ = _bf16(table, "table") if bf16_table else _f32(table, "table")
    _rank(t_, "table", (2,))
    if byte_rowwise and t_.shape[1] < 9:
        raise ValueError(f"an 8-bit rowwise table is (rows, dim + 8) with dim >= 1, got shape "
                         f"{t_.shape}")
    idx = _indices(indices, "indices")
    off = None if offsets is None else _indices(offsets, "offsets")
    if off is not None and off.dtype != idx.dtype:
        off = off.astype(idx.dtype)
    w = _opt_f32(per_sample_weights, "per_sample_weights")
    t = _threads(threads)
    rows, dim = t_.shape[0], t_.shape[1] - (8 if byte_rowwise else 0)
    e = _kernel(("embedding_bag", rows, dim, mode, t),
                lambda: EmbeddingBag(rows, dim, mode=mode, threads=t))
    return e.run(t_, idx, off, w, out)


def _unary(key: tuple[Any, ...], make: Callable[[], _k.UnaryKernel], x: Array,
           out: Array | None) -> Array:
    return _kernel(key, make).run(x, out)


def relu(x: npt.ArrayLike, *, threads: int | None = None, out: Array | None = None) -> Array:
    """max(x, 0) element-wise. ``out`` may be ``x`` itself (in place)."""
    x_, t = _f32(x, "x"), _threads(threads)
    if x_.ndim == 0:  # oneDNN has no 0-d memory: compute on one element
        flat = relu(x_.reshape(1), threads=t, out=None if out is None else out.reshape(1))
        return out if out is not None else flat.reshape(())
    return _unary(("relu", x_.shape, t), lambda: Eltwise("relu", list(x_.shape), threads=t),
                  x_, out)


def softmax(
    x: npt.ArrayLike, *, axis: int = -1, threads: int | None = None, out: Array | None = None
) -> Array:
    """exp(x) / sum(exp(x)) along ``axis`` (computed stably)."""
    x_, t = _f32(x, "x"), _threads(threads)
    return _unary(("softmax", x_.shape, axis, t),
                  lambda: Softmax(list(x_.shape), axis=axis, threads=t), x_, out)


def max_pool2d(
    x: npt.ArrayLike,
    kernel_size: IntPair,
    stride: IntPair | None = None,
    padding: Padding = 0,
    *,
    ceil_mode: bool = False,
    threads: int | None = None,
    out: Array | None = None,
) -> Array:
    """Max pooling over NCHW; stride defaults to the kernel size (PyTorch's rule)."""
    return _pool("max", x, kernel_size, stride, padding, ceil_mode, True, threads, out)


def avg_pool2d(
    x: npt.ArrayLike,
    kernel_size: IntPair,
    stride: IntPair | None = None,
    padding: Padding = 0,
    *,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    threads: int | None = None,
    out: Array | None = None,
) -> Array:
    """Average pooling over NCHW; ``count_include_pad`` divides by the full window."""
    return _pool("avg", x, kernel_size, stride, padding, ceil_mode, count_include_pad, threads,
                 out)


def _pool(kind: str, x: npt.ArrayLike, kernel_size: IntPair, stride: IntPair | None,
          padding: Padding, ceil_mode: bool, count_include_pad: bool, threads: int | None,
          out: Array | None) -> Array:
    x_, t = _f32(x, "x"), _threads(threads)
    _rank(x_, "x", (4,))
    k = _pair("kernel_size", kernel_size)
    s = k if stride is None else _pair("stride", stride)
    p = _padding4(padding)
    key = ("pool", kind, x_.shape, k, s, p, ceil_mode, count_include_pad, t)
    return _unary(key, lambda: Pool2d(kind, x_.shape, k, stride=s, padding=p,
                                      ceil_mode=ceil_mode,
                                      count_include_pad=count_include_pad, threads=t), x_, out)


def global_avg_pool2d(
    x: npt.ArrayLike, *, threads: int | None = None, out: Array | None = None
) -> Array:
    """Mean over H and W: (N, C, H, W) -> (N, C)."""
    x_, t = _f32(x, "x"), _threads(threads)
    _rank(x_, "x", (4,))
    return _unary(("gap", x_.shape, t), lambda: GlobalAvgPool(list(x_.shape), threads=t), x_,
                  out)


def add(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    relu: bool = False,
    threads: int | None = None,
    out: Array | None = None,
) -> Array:
    """a + b (+ ReLU), b broadcast to a's shape as numpy does (fewer axes,
    or axes of size 1); the result has a's shape."""
    return _binary("add", a, b, relu, threads, out)


def mul(
    a: npt.ArrayLike, b: npt.ArrayLike, *, threads: int | None = None, out: Array | None = None
) -> Array:
    """a * b element-wise, b broadcast to a's shape as numpy does; the
    result has a's shape."""
    return _binary("mul", a, b, False, threads, out)


def _binary(kind: str, a: npt.ArrayLike, b: npt.ArrayLike, relu: bool, threads: int | None,
            out: Array | None) -> Array:
    a_, b_, t = _f32(a, "a"), _f32(b, "b"), _threads(threads)
    if b_.ndim > a_.ndim or any(bs not in (1, as_) for as_, bs in
                                zip(a_.shape[a_.ndim - b_.ndim:], b_.shape)):
        raise ValueError(f"{kind}: b of shape {b_.shape} does not broadcast to a of shape {a_.shape} "
                         "(the result has a's shape)")
    # numpy's rule, leading axes of size 1 added: the kernel takes b at a's rank.
    b_ = b_.reshape((1,) * (a_.ndim - b_.ndim) + b_.shape)
    k = _kernel((kind, a_.shape, b_.shape, relu, t),
                lambda: Binary(kind, list(a_.shape), list(b_.shape), relu=relu, threads=t))
    return k.run(a_, b_, out)


def transpose(
    x: npt.ArrayLike, perm: Sequence[int], *, threads: int | None = None,
    out: Array | None = None
) -> Array:
    """A dense copy with axes permuted: output axis i is input axis perm[i]."""
    x_, t = _f32(x, "x"), _threads(threads)
    p = tuple(int(v) for v in perm)
    return _unary(("transpose", x_.shape, p, t),
                  lambda: Transpose(list(x_.shape), list(p), threads=t), x_, out)


def tril_flatten(
    x: npt.ArrayLike, *, threads: int | None = None, out: Array | None = None
) -> Array:
    """(B, n, n) -> (B, n*(n-1)/2): each matrix's strictly lower triangle, row by row."""
    x_, t = _f32(x, "x"), _threads(threads)
    k = _kernel(("tril", x_.shape, t), lambda: TrilFlatten(list(x_.shape), threads=t))
    return k.run(x_, out)


def concat(
    xs: Sequence[npt.ArrayLike],
    *,
    axis: int = 1,
    threads: int | None = None,
    out: Array | None = None,
) -> Array:
    """Concatenate along ``axis`` (default 1: the channel axis of NCHW)."""
    if isinstance(xs, np.ndarray) or not isinstance(xs, Sequence):
        raise TypeError("xs must be a list or tuple of arrays")
    arrs = [_f32(x, f"xs[{i}]") for i, x in enumerate(xs)]
    t = _threads(threads)
    shapes = tuple(a.shape for a in arrs)
    k = _kernel(("concat", shapes, axis, t),
                lambda: Concat([list(s) for s in shapes], axis=axis, threads=t))
    return k.run(arrs, out)


def batch_norm(
    x: npt.ArrayLike,
    mean: npt.ArrayLike,
    var: npt.ArrayLike,
    scale: npt.ArrayLike,
    shift: npt.ArrayLike,
    *,
    eps: float = 1e-5,
    threads: int | None = None,
    out: Array | None = None,
) -> Array:
    """Inference batch norm: (x - mean) / sqrt(var + eps) * scale + shift, channels on axis 1."""
    x_, t = _f32(x, "x"), _threads(threads)
    k = _kernel(("bn", x_.shape, float(eps), t),
                lambda: BatchNorm(list(x_.shape), eps=eps, threads=t))
    return k.run(x_, _f32(mean, "mean"), _f32(var, "var"), _f32(scale, "scale"),
                 _f32(shift, "shift"), out)


def layer_norm(
    x: npt.ArrayLike,
    scale: npt.ArrayLike,
    shift: npt.ArrayLike,
    *,
    eps: float = 1e-5,
    threads: int | None = None,
    out: Array | None = None,
) -> Array:
    """Normalise over the last axis (its own mean and variance), then scale and shift."""
    x_, t = _f32(x, "x"), _threads(threads)
    k = _kernel(("ln", x_.shape, float(eps), t),
                lambda: LayerNorm(list(x_.shape), eps=eps, threads=t))
    return k.run(x_, _f32(scale, "scale"), _f32(shift, "shift"), out)
