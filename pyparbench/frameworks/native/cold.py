"""Kernels timed with their operands out of cache, as a model's chain meets them.

A kernel timed alone in a loop finds its weights and activations in cache;
in a model's chain, between two calls of one node every other node's
operands pass through the caches, and a model whose weights exceed a cache
streams them from the next level. Each kernel is timed here one call at a
time (its C++ timer, ``repeats=1``), after reading a buffer between calls:

* ``chain``: a buffer as large as what one run of the model touches
  (parameters and activations): the reuse distance a node's data have in
  the chain; the difference from warm is what the chain pays in cache
  misses;
* ``cold``: a buffer twice the caches the topology reports (level 2 and
  up, whole instances): nothing of the kernel's is left in any cache, an
  upper bound (data from memory).

Warm is timed the same way (single calls, no buffer read between them), so
the differences hold no timing method's cost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from pyparbench.graph import Graph
from pyparbench.threading.cache_share import team_cache_bytes
from pyparbench.threading.topology import topology

__all__ = ["Flush", "all_caches_bytes", "single_call_times", "working_set_bytes"]


def working_set_bytes(graph: Graph) -> int:
    """What one run of ``graph`` touches: every parameter array and every
    node's output (inputs included), in bytes."""
    total = 0
    for n in graph.nodes:
        total += int(np.prod(n.shape, dtype=np.int64)) * np.dtype(n.dtype).itemsize
        total += 4 * sum(int(s.size) for s in n.params.specs.values())  # float32
    return total


def all_caches_bytes(cpus: Iterable[int] | None = None) -> int:
    """Twice the data and unified caches of level 2 and up that the CPUs
    (default: those this process may use) run in, each instance whole (a VM's
    share cap is not applied: its host's cache must be flushed too)."""
    topo = topology()
    return 2 * team_cache_bytes(topo, cpus, under_hypervisor=False)


class Flush:
    """A buffer of ``nbytes`` read whole by :meth:`touch`, evicting what was
    in cache before (read, not written: no write-backs timed after it)."""

    def __init__(self, nbytes: int) -> None:
        if nbytes < 0:
            raise ValueError(f"a flush buffer needs bytes >= 0, got {nbytes}")
        self.nbytes = int(nbytes)
        # Ones, written once: every page is mapped before any timing.
        self._buf = np.ones(max(self.nbytes // 4, 1), np.float32)

    def touch(self) -> None:
        self._buf.sum()


Timer = Callable[[int, int], Any]  # (repeats, warmup) -> per-run ns


def single_call_times(run: Timer, repeats: int, flush: Flush | None) -> list[float]:
    """``repeats`` single calls of a kernel's timer (ns each), ``flush``
    read before each (None: back to back, warm). Warm-up calls first: a
    kernel's first call builds its primitive."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    run(2, 2)
    out = []
    for _ in range(repeats):
        if flush is not None:
            flush.touch()
        out.append(float(np.asarray(run(1, 0))[0]))
    return out
