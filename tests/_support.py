"""What the tests share: random inputs (never zeros), output buffers that
show unwritten elements, the error measure, the thread counts to test, and
the float64 numpy references of every single op (the graph-level oracle is
:mod:`pyparbench.reference`, whose convolution these reuse)."""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import pyparbench
from pyparbench._core import graph as _g
from pyparbench.executor import compile_graph
from pyparbench.graph import Graph
from pyparbench.graph.builder import pool_output_size
from pyparbench.reference import conv2d_reference
from pyparbench.settings import Settings

# The folder this pyparbench is imported from (site-packages when installed,
# a checkout with its built core otherwise): what a child's PYTHONPATH needs
# for it to import the same pyparbench, never a checkout without the core.
IMPORTED_FROM = str(Path(pyparbench.__file__).resolve().parents[1])


def run_isa_capped(code: str, isa: str, *, timeout: float = 120) -> dict[str, Any]:
    """Run ``code`` in a child whose oneDNN is capped to ``isa``
    (ONEDNN_MAX_CPU_ISA: the cap only takes effect before oneDNN's first
    primitive, so it needs a fresh process); the child prints one JSON object
    on its last line, which is returned."""
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA=isa, PYTHONPATH=IMPORTED_FROM)
    env.pop("DNNL_MAX_CPU_ISA", None)
    done = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@functools.cache
def onednn_bf16_refusal() -> str | None:
    """oneDNN's own refusal of a bf16 matmul in this process (oneDNN 2.x
    dispatching below avx512_core, an aarch64 build without the Arm Compute
    Library), or None where it runs one: asked of oneDNN, not read from the
    CPU's flags, so a test skips only where the op refuses by name."""
    try:
        pyparbench.ops.Gemm(1, 1, 1, precision="bf16")
    except RuntimeError as e:
        if "precision 'bf16' is not available" not in str(e):
            raise
        return str(e)
    return None


def needs_onednn_bf16() -> pytest.MarkDecorator:
    """Skip where oneDNN refuses bf16 products here, naming its refusal."""
    refusal = onednn_bf16_refusal()
    return pytest.mark.skipif(refusal is not None,
                              reason=f"oneDNN runs no bf16 product here: {refusal}")


@functools.cache
def int8_weight_bits() -> int:
    """The weight bits the int8 tests quantise to: 8, or 7 where this CPU's
    oneDNN int8 kernels sum u8 · s8 pairs in int16 (no VNNI or AMX) and so
    refuse full-range weights (pyparbench.PrecisionUnavailable), as
    oneDNN's guidance and ONNX Runtime's reduce_range have it there."""
    x = np.full((1, 8), 255, np.uint8)
    w = np.full((1, 8), 127, np.int8)
    try:
        pyparbench.ops.quantized_linear(x, w, x_scale=1.0, weight_scale=1.0)
    except pyparbench.PrecisionUnavailable:
        return 7
    return 8


def int8_weight_reach() -> int:
    """The largest |weight| the int8 tests draw: 127, or 63 at 7 bits."""
    return 2 ** (int8_weight_bits() - 1) - 1


@functools.cache
def signed_int8_conv_refusal() -> str | None:
    """The refusal of int8 (s8) activations by this CPU's oneDNN int8
    convolution (an implementation without int8 dot products), or None."""
    x = np.ones((1, 3, 3, 4), np.int8)  # channels last
    w = np.ones((2, 4, 1, 1), np.int8)
    try:
        pyparbench.ops.quantized_conv2d(x, w, x_scale=1.0, weight_scale=1.0, layout="nhwc")
    except pyparbench.PrecisionUnavailable as e:
        return str(e)
    return None


def skip_where_signed_int8_conv_is_refused(x_dtype: str) -> None:
    """Skip a test of int8 activations where the convolution refuses them."""
    refusal = signed_int8_conv_refusal() if x_dtype == "int8" else None
    if refusal is not None:
        pytest.skip(f"int8 activations refused here: {refusal}")


def int8_weights(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random int8 weight values (as float32) over the reach the int8 tests use."""
    reach = int8_weight_reach()
    return rng.integers(-reach, reach + 1, shape).astype(np.float32)


def conv_c_output(g: Graph, x: np.ndarray, settings: Settings) -> np.ndarray:
    """The int8 test graphs' output ``conv_c`` for input ``x`` under ``settings``."""
    cg = compile_graph(g)
    cg.set_inputs({"x": x})
    cg.run(settings, repeats=1, warmup=0)
    return cg.outputs()["conv_c"].copy()


F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


# The CPUs this process may use (os.sched_getaffinity): the one reading of
# the machine that the thread counts take.
CPUS = len(os.sched_getaffinity(0))

# 1, 2 and 3 threads on every machine (3 an odd team; on a machine of fewer
# CPUs, oversubscribed), then a team of every CPU this process may use and one
# more than that (oversubscribed): the same five counts at most on a 1-CPU
# container and on a 64-core server, never one per CPU.
THREAD_COUNTS = sorted({1, 2, 3, CPUS, CPUS + 1})


def physical_cores() -> int:
    """Physical cores holding a CPU this process may use, read from this
    machine's hwloc topology as the planner reads it
    (:func:`pyparbench.settings.allowed_cores`). A team or pools placed
    ``compact`` with ``smt=False`` (the default) take one CPU per core: a
    2-vCPU VM of one SMT core has two CPUs but one core."""
    from pyparbench.settings import allowed_cores
    from pyparbench.threading import topology

    return allowed_cores(topology())


def needs_cores(n: int) -> pytest.MarkDecorator:
    """Skip unless this process may use ``n`` physical cores, naming the reading."""
    have = physical_cores()
    return pytest.mark.skipif(
        have < n, reason=f"needs {n} physical cores for a compact placement with smt=False; "
                         f"this process may use {have} (allowed_cores of this machine's topology)")


def compact_cpus(pools: int, threads: int = 1) -> list[list[int]]:
    """The CPU lists a ``compact`` placement with ``smt=False`` gives ``pools``
    pools of ``threads`` threads on this machine: what a run's
    ``worker_cpus`` must be (CPUs 0 and 1 only where those are the first
    two cores this process may use)."""
    from pyparbench.threading import place, topology

    return [list(p or ()) for p in place(topology(), "compact", pools, threads).pools]


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """float32 values in [-1, 1) with no exact zeros."""
    x = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    x[x == 0] = 0.5
    return x


def poisoned(shape: tuple[int, ...]) -> np.ndarray:
    """An out= buffer full of NaN, so an element left unwritten shows."""
    return np.full(shape, np.nan, dtype=np.float32)


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    """Relative error against the float64 reference, scaled by its magnitude."""
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got)), "non-finite values in the result"
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    err = float(np.abs(got.astype(np.float64) - want).max()) / scale if want.size else 0.0
    assert err <= rtol, f"max relative error {err:.3g} > {rtol:.3g}"


# ------------------------------------------------------- heavy-op references

# fp32 accumulation over k terms of O(1) values: error grows ~ sqrt(k) * 6e-8.
GEMM_RTOL = 2e-5
# fp32 sums of C/g*kh*kw products of O(1) values.
CONV_RTOL = 3e-5

# (m, n, k): ones, odd sizes, a long k, a wide n.
GEMM_SHAPES = [(1, 1, 1), (1, 7, 3), (5, 1, 9), (17, 13, 11), (64, 33, 129), (3, 300, 2)]

CONV_CASES = [
    # (n, c, h, w, o, k, stride, padding, dilation, groups)
    (1, 3, 8, 8, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (2, 5, 11, 7, 6, (3, 2), (2, 1), (0, 0, 0, 0), (1, 1), 1),
    (1, 4, 9, 9, 8, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 2),
    (3, 8, 10, 12, 8, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 8),  # depthwise
    (1, 6, 13, 5, 3, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 3),
    (2, 3, 7, 9, 5, (5, 3), (1, 2), (2, 1, 0, 3), (1, 1), 1),  # asymmetric padding
    (1, 16, 14, 14, 32, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (1, 1, 1, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    (1, 3, 17, 17, 4, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),
]


def gemm_reference(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None, relu: bool,
                   trans_a: bool, trans_b: bool) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if trans_a:
        a64 = np.swapaxes(a64, -1, -2)
    if trans_b:
        b64 = np.swapaxes(b64, -1, -2)
    c = a64 @ b64
    if bias is not None:
        c = c + bias
    return np.maximum(c, 0) if relu else c


def gemm_operands(rng: np.random.Generator, batch: int, m: int, n: int, k: int, trans_a: bool,
                  trans_b: bool) -> tuple[np.ndarray, np.ndarray]:
    lead = (batch,) if batch else ()
    a = rand(rng, *lead, *((k, m) if trans_a else (m, k)))
    b = rand(rng, *lead, *((n, k) if trans_b else (k, n)))
    return a, b


conv_reference = conv2d_reference  # direct convolution by windows, float64


# -------------------------------------------------------- glue-op references

RTOL_EXACT = 0.0  # relu, relu6, max pooling, concat: no arithmetic, so no rounding
RTOL = 1e-5  # everything that adds, divides, exponentiates or normalises in fp32


def _f64(x: npt.ArrayLike) -> F64:
    return np.asarray(x, dtype=np.float64)


def ref_relu(x: F32) -> F64:
    return np.maximum(_f64(x), 0.0)


def ref_gelu_tanh(x: F32) -> F64:
    v = _f64(x)
    return 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))


def ref_gelu_erf(x: F32) -> F64:
    from scipy.special import erf

    v = _f64(x)
    return np.asarray(0.5 * v * (1.0 + erf(v / math.sqrt(2.0))), dtype=np.float64)


ELTWISE_REFS: dict[str, Callable[[F32], F64]] = {
    "relu": ref_relu,
    "relu6": lambda x: np.clip(_f64(x), 0.0, 6.0),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-_f64(x))),
    "tanh": lambda x: np.tanh(_f64(x)),
    "gelu": ref_gelu_erf,
    "gelu_tanh": ref_gelu_tanh,
    "swish": lambda x: _f64(x) / (1.0 + np.exp(-_f64(x))),
    "hardswish": lambda x: _f64(x) * np.clip(_f64(x) + 3.0, 0.0, 6.0) / 6.0,
}
# Input scale per kind, so that relu6's upper clip and the saturating tails are reached.
ELTWISE_SCALE = {"relu": 1.0, "relu6": 8.0, "sigmoid": 6.0, "tanh": 4.0, "gelu": 4.0,
                 "gelu_tanh": 4.0, "swish": 6.0, "hardswish": 5.0}
ELTWISE_RTOL = {"relu": RTOL_EXACT, "relu6": RTOL_EXACT, "sigmoid": RTOL, "tanh": RTOL,
                "gelu": RTOL, "gelu_tanh": RTOL, "swish": RTOL, "hardswish": RTOL}


def ref_add(a: F32, b: F32, relu: bool) -> F64:
    y = _f64(a) + _f64(b)  # numpy broadcasting: b's size-1 axes stretch to a's
    return np.maximum(y, 0.0) if relu else y


def ref_concat(xs: Sequence[F32], axis: int) -> F64:
    return np.concatenate([_f64(x) for x in xs], axis=axis)


pooled_size = pool_output_size  # PyTorch's output-size rule


def ref_pool2d(
    x: F32,
    kind: str,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
    ceil_mode: bool,
    count_include_pad: bool,
) -> F64:
    """Window by window. Padding never wins a max; an average divides either by
    the window clipped to the padded input [-pad_lo, n + pad_hi) (include) or by
    the number of real elements in it (exclude)."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (pt, pb, pl, pr) = kernel, stride, padding
    oh = pooled_size(h, kh, sh, pt, pb, ceil_mode)
    ow = pooled_size(w, kw, sw, pl, pr, ceil_mode)
    xd = _f64(x)
    y = np.empty((n, c, oh, ow))
    for i in range(oh):
        h0 = i * sh - pt
        h1 = h0 + kh
        for j in range(ow):
            w0 = j * sw - pl
            w1 = w0 + kw
            win = xd[:, :, max(h0, 0):min(h1, h), max(w0, 0):min(w1, w)]
            if kind == "max":
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                if count_include_pad:
                    div = (min(h1, h + pb) - h0) * (min(w1, w + pr) - w0)
                else:
                    div = win.shape[2] * win.shape[3]
                y[:, :, i, j] = win.sum(axis=(2, 3)) / div
    return y


def ceil_window_clipped(
    shape: Sequence[int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
) -> bool:
    """Whether ceil mode adds a last window that runs past the bottom/right padding
    (it always does when it gives more windows than floor mode)."""
    _, _, h, w = shape
    (kh, kw), (sh, sw), (pt, pb, pl, pr) = kernel, stride, padding
    oh = pooled_size(h, kh, sh, pt, pb, True)
    ow = pooled_size(w, kw, sw, pl, pr, True)
    return (oh - 1) * sh - pt + kh > h + pb or (ow - 1) * sw - pl + kw > w + pr


def ref_global_avg_pool(x: F32) -> F64:
    y: F64 = _f64(x).mean(axis=(2, 3))
    return y


def _per_channel(v: F32, ndim: int) -> F64:
    return _f64(v).reshape((1, -1) + (1,) * (ndim - 2))


def ref_batch_norm(x: F32, mean: F32, var: F32, scale: F32, shift: F32, eps: float) -> F64:
    def c(v: F32) -> F64:
        return _per_channel(v, x.ndim)

    return (_f64(x) - c(mean)) / np.sqrt(c(var) + eps) * c(scale) + c(shift)


def ref_softmax(x: F32, axis: int) -> F64:
    e = np.exp(_f64(x) - _f64(x).max(axis=axis, keepdims=True))
    y: F64 = e / e.sum(axis=axis, keepdims=True)
    return y


def ref_layer_norm(x: F32, scale: F32, shift: F32, eps: float) -> F64:
    xd = _f64(x)
    mean = xd.mean(axis=-1, keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=-1, keepdims=True)  # biased, as in inference
    y: F64 = (xd - mean) / np.sqrt(var + eps) * _f64(scale) + _f64(shift)
    return y


def ref_linear(x: F32, weight: F32, bias: F32 | None, relu: bool) -> F64:
    y = _f64(x) @ _f64(weight).T
    if bias is not None:
        y = y + _f64(bias)
    return np.maximum(y, 0.0) if relu else y



# ------------------------------------------------------ embedding_bag reference

def ref_embedding_bag(table: npt.ArrayLike, indices: npt.ArrayLike,
                      offsets: npt.ArrayLike | None, mode: str,
                      weights: npt.ArrayLike | None) -> F64:
    """Bags of table rows, summed or averaged (an empty bag is zeros), in
    float64: fixed-size bags when ``offsets`` is None (indices (B, L)), else
    flat indices cut at ``offsets``; ``weights`` scale each row."""
    t = np.asarray(table, dtype=np.float64)
    idx = np.asarray(indices)
    w = None if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    if offsets is None:
        starts = np.arange(idx.shape[0]) * (idx.shape[1] if idx.ndim == 2 else 0)
    else:
        starts = np.asarray(offsets).reshape(-1)
    flat = idx.reshape(-1)
    ends = [*starts[1:], flat.size][: len(starts)]
    out = np.zeros((len(starts), t.shape[1]))
    for b, (lo, hi) in enumerate(zip(starts, ends, strict=True)):
        rows = t[flat[lo:hi]]
        if w is not None:
            rows = rows * w[lo:hi, None]
        if hi > lo:
            out[b] = rows.sum(0) if mode == "sum" else rows.mean(0)
    return out


def assert_lifetimes_disjoint(g: Graph, slots: list[int]) -> None:
    """Whatever the schedule: two values sharing a buffer never overlap. The
    later owner's node must have every writer and reader of the earlier
    value among its ancestors."""
    anc: list[set[int]] = []
    for n in g.nodes:
        a: set[int] = set()
        for i in n.inputs:
            a |= anc[i] | {i}
        anc.append(a)

    def owner(i: int) -> int:
        n = g[i]
        if n.op in ("reshape", "slice"):  # views of their (first) input
            return owner(n.inputs[0])
        if "inplace" in n.attrs:
            return owner(n.inputs[int(n.attrs["inplace"])])
        return i

    users: dict[int, set[int]] = {}
    for n in g.nodes:
        users.setdefault(owner(n.id), set()).add(n.id)
        for i in n.inputs:
            users.setdefault(owner(i), set()).add(n.id)
    owners = sorted({owner(n.id) for n in g.nodes})
    kept = {owner(i) for i in (*g.inputs, *g.outputs)}
    for i, a in enumerate(owners):
        for b in owners[i + 1:]:
            if slots[a] != slots[b]:
                continue
            assert a not in kept, f"kept value {g[a].name} shares a buffer"
            assert users[a] <= anc[b], f"{g[b].name} may overwrite {g[a].name} in use"


def node_spec(op: str, name: str, inputs: list[int], shape: list[int],
              **attrs: Any) -> _g.NodeSpec:
    """A C++ graph node, as the executor's own tests build plans by hand."""
    s = _g.NodeSpec()
    s.op, s.name, s.inputs, s.shape = op, name, inputs, shape
    for k, v in attrs.items():
        setattr(s, k, v)
    return s


def outputs_per_setting(graph: Graph, inputs: dict[str, np.ndarray],
                        output: str) -> Iterator[tuple[Settings, np.ndarray]]:
    """``graph`` compiled once and run on ``inputs`` at 1 and 2 threads and
    in framework mode at 2: each setting with a copy of the named output."""
    cg = compile_graph(graph)
    cg.set_inputs(inputs)
    for settings in (Settings(intra_op=1), Settings(intra_op=2),
                     Settings(intra_op=2, operator="framework")):
        cg.run(settings, repeats=1, warmup=0)
        yield settings, cg.outputs()[output].copy()


def cli_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``pyparbench ARGV`` in this process: (exit status, stdout, stderr)."""
    from pyparbench.cli import main

    try:
        code = main(list(argv))
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def squeeze_excite_graph(batch: int) -> Any:
    """conv -> hardswish -> x * gate + gate (the gate: global mean, 1x1 convs,
    swish, sigmoid) -> conv, as MobileNet-v3 and EfficientNet write their
    blocks: a per-channel (N, C, 1, 1) broadcast onto image data."""
    from pyparbench.graph import GraphBuilder

    b = GraphBuilder("se", seed=9)
    x = b.eltwise(b.conv2d(b.input("x", (batch, 32, 9, 7)), 32, 3, padding=1), "hardswish")
    s = b.reshape(b.global_avg_pool(x), (batch, 32, 1, 1))
    gate = b.eltwise(b.conv2d(b.eltwise(b.conv2d(s, 16, 1), "swish"), 32, 1), "sigmoid")
    y = b.conv2d(b.add(b.mul(x, gate), gate), 16, 1)
    return b.build([b.global_avg_pool(y)])


# -- the main job's real results folders ----------------------------------------------

# A small quick suite of the main job (the Criteo-Kaggle-like DLRM at batch 1,
# with the recommender, whose setting and confirmation rounds measure some
# settings in several processes: a folder's spread between processes), fp32
# alone: every native configuration times runs for at least 0.3 s, so a row
# holds thousands of per-run samples, as the folders users compare do.
MAIN_JOB_SUITE = ("--quick", "--models", "dlrm-kaggle", "--batches", "1", "--no-operators",
                  "--no-frameworks", "--repeats", "3", "--precision", "fp32")


def cli_process(*args: str, cpus: str | None = None,
                timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m pyparbench ARGS`` in a process of its own (on CPUs ``cpus``
    through taskset, when given), its output captured."""
    cmd = [sys.executable, "-P", "-m", "pyparbench", *args]
    if cpus is not None:
        cmd = ["taskset", "-c", cpus, *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "120"})


def main_job_folders(root: Path, suite: Sequence[str]) -> dict[str, Path]:
    """``run`` with ``suite`` into root/a and root/b on this machine, and
    root/one on CPU 0 (where taskset is)."""
    out = {}
    for name, cpus in (("a", None), ("b", None), ("one", "0")):
        if cpus is not None and shutil.which("taskset") is None:
            continue
        folder = root / name
        done = cli_process("run", *suite, "-o", str(folder), cpus=cpus)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        out[name] = folder
    return out
