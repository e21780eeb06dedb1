"""Resident memory stays flat over 10,000 op calls and 1,000 graph runs,
calls that raise included (a leak of even a few hundred bytes per call
would show as megabytes here).

Resident memory is read from /proc/self/statm after a warm-up (kernel
caches, allocator pools and OpenMP / pool threads exist by then), and must
not grow by more than :data:`BOUND` over the measured calls.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _fuzz import FIGURES
from pyparbench import ops
from pyparbench.executor import compile_graph
from pyparbench.graph import GraphBuilder
from pyparbench.settings import Settings

STATM = Path("/proc/self/statm")
PAGE = os.sysconf("SC_PAGE_SIZE")
# Allowed growth over the measured calls: allocator noise is well under a
# MiB; a leak of 512 bytes per call would be 5 MiB over 10,000 calls.
BOUND = 4 << 20
OP_CALLS = 10_000
GRAPH_RUNS = 1_000

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not STATM.exists(), reason="needs /proc/self/statm")]


def resident() -> int:
    gc.collect()
    return int(STATM.read_text().split()[1]) * PAGE


# What a refused call raises: a clear Python error, never a crash.
REFUSALS = (ValueError, TypeError, IndexError)


def measure(name: str, calls: list[Callable[[], Any]], n: int, warmup: int, *,
            refused: Sequence[Callable[[], Any]] = ()) -> None:
    """Run ``calls`` (each must succeed) and ``refused`` (each must raise one
    of REFUSALS, every time) round-robin, ``warmup`` times then ``n`` times,
    and check resident memory over the ``n``."""
    every = [(c, False) for c in calls] + [(c, True) for c in refused]

    def go(count: int) -> None:
        for i in range(count):
            call, must_raise = every[i % len(every)]
            if must_raise:
                with pytest.raises(REFUSALS):
                    call()
            else:
                call()

    go(warmup)
    before = resident()
    go(n)
    after = resident()
    FIGURES[f"resident memory, {name}"] = (f"{before / 2**20:.1f} MiB after a warm-up of "
                                           f"{warmup}, {after / 2**20:.1f} MiB after {n} more "
                                           f"({(after - before) / 2**10:+.0f} KiB)")
    assert after - before <= BOUND, f"{name}: resident memory grew {after - before} bytes"


def test_op_calls_do_not_leak() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random((16, 24), np.float32), rng.random((24, 8), np.float32)
    x = rng.random((1, 3, 10, 10), np.float32)
    w = rng.random((4, 3, 3, 3), np.float32)
    table = rng.random((100, 16), np.float32)
    idx = rng.integers(0, 100, (32, 4))
    bad_idx = np.full((32, 4), 100)
    conv = ops.Conv2d(x.shape, 4, 3, padding=1)
    conv.set_weights(w)
    out = np.empty((1, 4, 10, 10), np.float32)
    calls: list[Callable[[], Any]] = [
        lambda: ops.gemm(a, b, threads=1),
        lambda: ops.gemm(a, b, library="eigen", threads=2),
        lambda: ops.gemm(a, b, library="blas"),
        lambda: ops.conv2d(x, w, padding=1),
        lambda: conv.run(x, out),
        lambda: ops.embedding_bag(table, idx, mode="mean"),
        lambda: ops.relu(x),
        lambda: ops.softmax(a),
        lambda: ops.max_pool2d(x, 2),
        lambda: ops.concat([x, x]),
        lambda: ops.layer_norm(a, np.ones(24), np.zeros(24)),
        lambda: ops.transpose(x, (0, 2, 3, 1)),
    ]
    refused: list[Callable[[], Any]] = [  # from Python and from C++
        lambda: ops.gemm(a, a),  # inner dimensions differ
        lambda: ops.embedding_bag(table, bad_idx),  # index out of range
        lambda: conv.run(a),  # wrong shape
        lambda: conv.run(x.astype(np.float64)),  # wrong dtype
        lambda: ops.Gemm(0, 1, 1),  # refused by the native constructor
        lambda: ops.relu(x, threads=0),
    ]
    measure("op calls", calls, OP_CALLS, 2_000, refused=refused)


def test_graph_runs_do_not_leak() -> None:
    b = GraphBuilder("leak")
    x = b.input("x", (2, 4, 8, 8))
    idx = b.input("idx", (2, 3), "int64")
    c1 = b.conv2d(x, 4, 3, padding=1, relu=True)
    c2 = b.conv2d(x, 4, 1)
    y = b.global_avg_pool(b.add(c1, c2))
    e = b.embedding_bag(idx, 50, 4)
    g = b.build(b.linear(b.concat([y, e], axis=1), 3))
    cg = compile_graph(g)
    good = g.random_inputs(seed=0)
    bad = dict(good, idx=np.full((2, 3), 50, np.int64))
    settings = [Settings(),
                Settings(scheduler="async", inter_op=2),
                Settings(scheduler="async", inter_op=2, operator="framework", intra_op=2,
                         pool="std"),
                Settings(operator="framework", intra_op=2, pool="eigen"),
                Settings(operator="framework", intra_op=2, pool="openmp", library="blas")]

    def failing_run() -> None:
        cg.set_inputs(bad)
        try:
            cg.run(settings[1], repeats=1, warmup=0)
        finally:
            cg.set_inputs(good)

    calls: list[Callable[[], Any]] = [
        *(lambda s=s: cg.run(s, repeats=1, warmup=0) for s in settings),
        lambda: compile_graph(g).run(repeats=1, warmup=0),
    ]
    measure("graph runs", calls, GRAPH_RUNS, 200, refused=[failing_run])
