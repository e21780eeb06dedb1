"""Several Python threads at once: prepared kernels, the op functions, the
pools and whole graphs (sync and async schedulers, every pool kind) give the
results of a single-threaded run, run after run.

Every native call releases the GIL, so these threads really run the C++ side
by side. The same tests run under ThreadSanitizer in ``.ci/sanitize``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from _support import rand
from pyparbench import ops
from pyparbench.executor import compile_graph
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings
from pyparbench.threading import Pool, serial_work

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

F32 = npt.NDArray[np.float32]

# Python threads per test, and how often each repeats its work: enough for
# runs to overlap many times, short enough for two cores.
THREADS = 4
ROUNDS = int(os.environ.get("PPB_CONCURRENCY_ROUNDS", "12"))
# Under ThreadSanitizer (.ci/sanitize tsan) every kernel runs on one thread:
# the OpenMP runtime's hand-overs between team threads are invisible to it.
TSAN = os.environ.get("PPB_TSAN") == "1"
INTRA = 1 if TSAN else 2


@pytest.fixture(autouse=True)
def frequent_switches() -> Iterator[None]:
    # Python switches threads every 5 ms by default, so a window between two
    # calls of one thread would rarely be hit; switch as often as possible.
    saved = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(saved)


def in_threads(work: Callable[[int], Any], n: int = THREADS) -> list[Any]:
    """work(i) for i in range(n), each in its own thread, started together;
    the first exception of any thread is raised here."""
    barrier = threading.Barrier(n)

    def start(i: int) -> Any:
        barrier.wait()
        return work(i)

    with ThreadPoolExecutor(n) as ex:
        return [f.result() for f in [ex.submit(start, i) for i in range(n)]]


# ------------------------------------------------------------ prepared kernels


@dataclass
class KernelCase:
    """A prepared kernel factory and how to call it on fresh inputs."""

    name: str
    make: Callable[[int], Any]  # threads -> kernel
    inputs: Callable[[Any, np.random.Generator], tuple[Any, ...]]

    def run(self, kernel: Any, args: tuple[Any, ...]) -> F32:
        out = np.full(kernel_output_shape(kernel, args), np.nan, np.float32)
        kernel.run(*args, out=out)
        return out


def kernel_output_shape(kernel: Any, args: tuple[Any, ...]) -> tuple[int, ...]:
    if isinstance(kernel, ops.EmbeddingBag):
        return (args[1].shape[0], kernel.dim)
    shape = getattr(kernel, "out_shape", None) or getattr(kernel, "output_shape")
    return tuple(shape)


def _gemm(cls: Callable[..., Any]) -> KernelCase:
    return KernelCase(f"{getattr(cls, '__name__', cls)}", lambda t: cls(33, 17, 29, bias=True,
                                                                        relu=True, threads=t),
                      lambda k, r: (rand(r, 33, 29), rand(r, 29, 17), rand(r, 17)))


def _conv(cls: Callable[..., Any]) -> KernelCase:
    def make(t: int) -> Any:
        k = cls((2, 4, 9, 9), 6, 3, padding=1, bias=True, threads=t)
        rng = np.random.default_rng(1)
        k.set_weights(rand(rng, 6, 4, 3, 3), rand(rng, 6))
        return k

    return KernelCase(cls.__name__, make, lambda k, r: (rand(r, 2, 4, 9, 9),))


def _bag_inputs(k: Any, r: np.random.Generator) -> tuple[Any, ...]:
    table = rand(r, 50, 8)
    return (table, r.integers(0, 50, size=(16, 5), dtype=np.int64))


KERNELS = [
    _gemm(ops.Gemm), _gemm(ops.EigenGemm), _gemm(ops.BlasGemm),
    _conv(ops.Conv2d), _conv(ops.EigenConv2d), _conv(ops.BlasConv2d),
    KernelCase("EmbeddingBag", lambda t: ops.EmbeddingBag(50, 8, threads=t), _bag_inputs),
    KernelCase("Eltwise", lambda t: ops.Eltwise("gelu", [3, 5, 7], threads=t),
               lambda k, r: (rand(r, 3, 5, 7),)),
    KernelCase("Softmax", lambda t: ops.Softmax([6, 11], axis=1, threads=t),
               lambda k, r: (rand(r, 6, 11),)),
    KernelCase("Pool2d", lambda t: ops.Pool2d("avg", (2, 3, 8, 8), 3, stride=2, padding=1,
                                              threads=t),
               lambda k, r: (rand(r, 2, 3, 8, 8),)),
    KernelCase("Add", lambda t: ops.Add([4, 6], [1, 6], relu=True, threads=t),
               lambda k, r: (rand(r, 4, 6), rand(r, 1, 6))),
    KernelCase("Concat", lambda t: ops.Concat([[2, 3, 4], [2, 5, 4]], axis=1, threads=t),
               lambda k, r: ([rand(r, 2, 3, 4), rand(r, 2, 5, 4)],)),
    KernelCase("BatchNorm", lambda t: ops.BatchNorm([2, 5, 3, 3], threads=t),
               lambda k, r: (rand(r, 2, 5, 3, 3), rand(r, 5), np.abs(rand(r, 5)) + 0.1,
                             rand(r, 5), rand(r, 5))),
    KernelCase("LayerNorm", lambda t: ops.LayerNorm([4, 9], threads=t),
               lambda k, r: (rand(r, 4, 9), rand(r, 9), rand(r, 9))),
    KernelCase("Transpose", lambda t: ops.Transpose([2, 3, 5], [2, 0, 1], threads=t),
               lambda k, r: (rand(r, 2, 3, 5),)),
    KernelCase("TrilFlatten", lambda t: ops.TrilFlatten([3, 6, 6], threads=t),
               lambda k, r: (rand(r, 3, 6, 6),)),
]


@pytest.mark.parametrize("shared", [True, False], ids=["one-kernel", "kernel-per-thread"])
@pytest.mark.parametrize("case", KERNELS, ids=lambda c: c.name)
def test_prepared_kernels_from_several_threads(case: KernelCase, shared: bool) -> None:
    # Each thread has its own inputs; the answers come from one thread first.
    threads = INTRA
    one = case.make(threads)
    inputs = [case.inputs(one, np.random.default_rng(i)) for i in range(THREADS)]
    want = [case.run(one, args) for args in inputs]
    kernels = [one] * THREADS if shared else [case.make(threads) for _ in range(THREADS)]

    def work(i: int) -> int:
        bad = 0
        for _ in range(ROUNDS):
            got = case.run(kernels[i], inputs[i])
            bad += not np.array_equal(got, want[i])
        return bad

    assert in_threads(work) == [0] * THREADS


# ---------------------------------------------------------------- functions


def test_conv2d_function_with_other_weights_in_each_thread() -> None:
    # Same shapes, so every thread shares one cached kernel: weights set by
    # one thread must never be used for another's call.
    rng = np.random.default_rng(0)
    x = rand(rng, 1, 4, 8, 8)
    weights = [rand(rng, 4, 4, 3, 3) for _ in range(THREADS)]
    want = [ops.conv2d(x, w, padding=1, threads=1) for w in weights]

    def work(i: int) -> int:
        return sum(not np.array_equal(ops.conv2d(x, weights[i], padding=1, threads=1), want[i])
                   for _ in range(ROUNDS * 400))

    assert in_threads(work) == [0] * THREADS


def test_op_functions_while_the_kernel_cache_turns_over() -> None:
    # More shapes than the cache holds, from every thread: kernels are
    # created, reused and evicted under each other's feet.
    def work(i: int) -> int:
        rng = np.random.default_rng(i)
        bad = 0
        for j in range(ROUNDS * 25):
            n = int(rng.integers(1, 300))
            x = rand(rng, 2, n)
            bad += not np.array_equal(ops.relu(x, threads=1), np.maximum(x, 0))
            if j % 5 == 0:
                a, b = rand(rng, 3, n), rand(rng, n, 2)
                got = ops.gemm(a, b, threads=1 + j % INTRA)
                bad += not np.allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
        return bad

    assert in_threads(work) == [0] * THREADS


# -------------------------------------------------------------------- pools


@pytest.mark.parametrize("mode", ["parallel_for", "submit"])
@pytest.mark.parametrize("kind", ["std", "eigen"] + ([] if TSAN else ["openmp"]))
def test_one_pool_driven_from_several_threads(kind: str, mode: str) -> None:
    rng = np.random.default_rng(3)
    work_items = [(rng.integers(0, 2**63, size=200, dtype=np.uint64),
                   rng.integers(0, 500, size=200, dtype=np.int64)) for _ in range(THREADS)]
    want = [serial_work(s, it) for s, it in work_items]
    with Pool(kind, 2) as pool:
        def work(i: int) -> int:
            s, it = work_items[i]
            return sum(not np.array_equal(pool.work(s, it, mode=mode), want[i])  # type: ignore[arg-type]
                       for _ in range(ROUNDS))

        assert in_threads(work) == [0] * THREADS


# ------------------------------------------------------------------- graphs


def branchy_graph(batch: int = 2) -> Graph:
    """Three parallel branches (conv, pooling, linear) joined twice: small,
    but with the fork / join structure the async scheduler overlaps."""
    b = GraphBuilder("branchy")
    x = b.input("x", (batch, 4, 10, 10))
    c1 = b.conv2d(x, 6, 3, padding=1, relu=True)
    c2 = b.conv2d(x, 6, 1)
    p = b.pool2d(x, "max", 3, stride=1, padding=1)
    p = b.conv2d(p, 6, 1)
    bn = b.batch_norm(b.add(c1, c2))
    cat = b.concat([bn, p], axis=1)
    g = b.global_avg_pool(b.eltwise(cat, "gelu"))
    h1 = b.linear(g, 16, relu=True)
    h2 = b.linear(g, 16)
    out = b.softmax(b.mul(h1, h2))
    return b.build(out)


def mlp_graph(batch: int = 3) -> Graph:
    b = GraphBuilder("mlp")
    x = b.input("x", (batch, 24))
    for _ in range(4):
        x = b.linear(x, 24, relu=True)
    return b.build(b.layer_norm(x))


def bag_graph(batch: int = 4) -> Graph:
    b = GraphBuilder("bags")
    idx = b.input("idx", (batch, 3), dtype="int64")
    dense = b.input("dense", (batch, 8))
    e1 = b.embedding_bag(idx, 40, 8)
    e2 = b.embedding_bag(idx, 40, 8, mode="mean")
    d = b.linear(dense, 8)
    z = b.concat([b.reshape(e1, (batch, 1, 8)), b.reshape(e2, (batch, 1, 8)),
                  b.reshape(d, (batch, 1, 8))], axis=1)
    inter = b.tril_flatten(b.matmul(z, z, trans_b=True))
    return b.build(b.linear(b.concat([d, inter], axis=1), 1))


GRAPHS = [branchy_graph, mlp_graph, bag_graph]

# Every scheduler and pool, library and framework operator modes.
GRAPH_SETTINGS = [
    Settings(),
    Settings(scheduler="async", inter_op=2),
    Settings(scheduler="async", inter_op=3, operator="framework", intra_op=2, pool="std"),
    Settings(scheduler="async", inter_op=2, operator="framework", intra_op=2, pool="eigen"),
    Settings(operator="framework", intra_op=2, pool="openmp"),
    Settings(scheduler="async", inter_op=2, intra_op=2, library="eigen"),
    Settings(scheduler="async", inter_op=2, library="blas", operator="framework",
             intra_op=2, pool="std"),
]
if TSAN:  # one-thread kernels only: library mode at intra_op 1, or std / eigen pools
    GRAPH_SETTINGS = [s for s in GRAPH_SETTINGS if s.pool != "openmp" and
                      (s.operator == "framework" or s.intra_op == 1)]

# fp32 kernels against the float64 reference.
RTOL = 1e-4


def _close(got: dict[str, F32], want: dict[str, Any]) -> bool:
    return all(np.allclose(got[k], want[k], rtol=RTOL, atol=RTOL) for k in want)


def _same(got: dict[str, F32], want: dict[str, F32]) -> bool:
    return got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)


def test_many_graphs_from_several_threads_at_once() -> None:
    # Thread i compiles its own graphs and runs them under every setting,
    # round after round; each (graph, setting) must give the outputs of a
    # lone run of it, bit for bit, and the reference's within fp32 error.
    graphs = [make() for make in GRAPHS]
    refs = [reference_forward(g, g.random_inputs(seed=0)) for g in graphs]
    alone: dict[tuple[int, int], dict[str, F32]] = {}
    for gi, g in enumerate(graphs):
        cg = compile_graph(g)
        for si, s in enumerate(GRAPH_SETTINGS):
            cg.run(s, repeats=1, warmup=0)
            alone[gi, si] = cg.outputs()
            assert _close(alone[gi, si], refs[gi]), (g.name, s.label())

    def work(i: int) -> list[str]:
        compiled = [compile_graph(g) for g in graphs]
        wrong = []
        for r in range(max(1, ROUNDS // 4)):
            for gi, cg in enumerate(compiled):
                for si, s in enumerate(GRAPH_SETTINGS):
                    if (gi + si + i + r) % 2:  # threads mix settings differently each round
                        continue
                    cg.run(s, repeats=2, warmup=0)
                    if not _same(cg.outputs(), alone[gi, si]):
                        wrong.append(f"{graphs[gi].name} {s.label()}")
        return wrong

    assert in_threads(work) == [[]] * THREADS


def test_one_compiled_graph_run_from_several_threads() -> None:
    # One plan, several threads: runs take turns, and each thread's run
    # leaves the outputs every run gives.
    g = branchy_graph()
    cg = compile_graph(g)
    cg.run(repeats=1, warmup=0)
    want = cg.outputs()
    settings: Sequence[Settings] = GRAPH_SETTINGS

    def work(i: int) -> int:
        bad = 0
        for r in range(ROUNDS):
            cg.run(settings[(i + r) % len(settings)], repeats=1, warmup=0)
            bad += not _close(cg.outputs(), want)
        return bad

    assert in_threads(work) == [0] * THREADS


def test_outputs_read_while_another_thread_runs_come_from_one_run() -> None:
    # One thread runs the graph on two sets of inputs in turn; another reads
    # the outputs meanwhile: every read must be one run's outputs, whole
    # (not a buffer half rewritten, nor outputs of two different runs).
    b = GraphBuilder("outputs")
    idx = b.input("idx", (64, 16), "int64")
    e1, e2 = b.embedding_bag(idx, 500, 32), b.embedding_bag(idx, 500, 32, mode="mean")
    cat = b.concat([e1, e2, e1], axis=1)
    g = b.build([e1, e2, cat, b.linear(cat, 8)])
    cg = compile_graph(g)
    feeds = [g.random_inputs(seed=s) for s in (1, 2)]
    want = []
    for f in feeds:
        cg.set_inputs(f)
        cg.run(repeats=1, warmup=0)
        want.append(cg.outputs())
    reads, torn = [0], [0]
    done = threading.Event()

    def runner() -> None:
        for r in range(ROUNDS * 20):
            cg.set_inputs(feeds[r % 2])
            cg.run(repeats=1, warmup=0)
        done.set()

    def reader() -> None:
        while not done.is_set():
            got = cg.outputs()
            reads[0] += 1
            torn[0] += not (_same(got, want[0]) or _same(got, want[1]))

    threads = [threading.Thread(target=runner), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert reads[0] and torn[0] == 0, f"{torn[0]} of {reads[0]} reads mixed two runs"


def test_errors_in_one_thread_leave_the_others_unharmed() -> None:
    # A graph whose embedding indices are out of range fails in its worker;
    # the other threads' graphs are unaffected and the failing plan keeps
    # working once its inputs are fixed.
    g = bag_graph()
    good = compile_graph(g)
    good.run(Settings(scheduler="async", inter_op=2), repeats=1, warmup=0)
    want = good.outputs()
    inputs = g.random_inputs(seed=0)
    bad_inputs = dict(inputs, idx=np.full_like(inputs["idx"], 10**6))

    def work(i: int) -> int:
        cg = compile_graph(g)
        wrong = 0
        for r in range(ROUNDS):
            pools = ("std", "eigen") if TSAN else ("std", "eigen", "openmp")
            s = Settings(scheduler="async", inter_op=2, operator="framework", intra_op=2,
                         pool=pools[(i + r) % len(pools)])
            if i % 2:
                cg.set_inputs(bad_inputs)
                with pytest.raises(IndexError, match="index 1000000"):
                    cg.run(s, repeats=1, warmup=0)
                cg.set_inputs(inputs)
            cg.run(s, repeats=1, warmup=0)
            wrong += not _close(cg.outputs(), want)
        return wrong

    assert in_threads(work) == [0] * THREADS
