"""What the framework packages (``tensorflow/``, ``torch/``, ``onnxruntime/``,
``native/``) share: the interface of a prepared model, profile records and
their aggregation, timing in a Python loop, node names in a framework's
model, pooling geometry, and the branch structure of a graph."""

from __future__ import annotations

import bisect
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pyparbench.graph import Graph, Node

__all__ = [
    "KernelTime",
    "PoolGeometry",
    "Prepared",
    "Profile",
    "aggregate",
    "chains",
    "node_of_scope",
    "parallel_chains",
    "pool_geometry",
    "python_loop",
    "scope_name",
]

Array = npt.NDArray[Any]


@dataclass(frozen=True)
class KernelTime:
    """Time a framework's profiler gave one kind of kernel, per iteration.

    ``op`` is the graph op type it is charged to (a kernel that fused several
    graph ops is charged to the heavy one); "other" when it maps to none.
    """

    op: str
    name: str
    ns: float
    calls: float

    def as_dict(self) -> dict[str, Any]:
        return {"op": self.op, "name": self.name, "ns": self.ns, "calls": self.calls}


class Prepared(Protocol):
    """A graph made into a framework's model, with its inputs ready."""

    info: dict[str, Any]

    def time(self, repeats: int, warmup: int) -> list[float]:
        """Per-run nanoseconds of ``repeats`` runs after ``warmup`` runs."""

    def outputs(self) -> dict[str, Array]:
        """One run's outputs, by graph output name, in the graph's layout."""

    def profile(self, iterations: int) -> Profile:
        """Kernel times from the framework's own profiler, per iteration."""


@dataclass(frozen=True)
class Profile:
    """Kernel times per iteration, and the median profiled iteration's length
    (kernels and iteration both under the profiler, so comparable)."""

    kernels: list[KernelTime]
    iteration_ns: float


def aggregate(events: Sequence[tuple[float, str, str, float]],
              windows: Sequence[tuple[float, float]]) -> Profile:
    """Kernel times per iteration from a profile.

    ``events`` are (start, graph op, kernel name, ns) and ``windows`` the
    (start, end) of each profiled iteration on the same clock; an event
    belongs to the iteration it starts in (events outside every window are
    left out). Each (op, kernel) gets the median over iterations of its
    time and count, so that one iteration slowed by a preempted thread does
    not count.
    """
    if not windows:
        raise ValueError("a profile needs at least one iteration window")
    order = sorted(windows)
    starts = [w[0] for w in order]
    n = len(order)
    sums: dict[tuple[str, str], list[list[float]]] = {}
    for start, op, kind, ns in events:
        i = bisect.bisect_right(starts, start) - 1
        if i < 0 or start > order[i][1]:
            continue
        slot = sums.setdefault((op, kind), [[0.0] * n, [0.0] * n])
        slot[0][i] += ns
        slot[1][i] += 1
    kernels = [KernelTime(op, kind, float(np.median(t)), float(np.median(c)))
               for (op, kind), (t, c) in sorted(sums.items())]
    return Profile(kernels, float(np.median([e - s for s, e in order])))


def python_loop(step: Callable[[], object], repeats: int, warmup: int) -> list[float]:
    """Times ``step`` one call at a time, as a user's serving loop calls a model."""
    for _ in range(warmup):
        step()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        step()
        out.append(float(time.perf_counter_ns() - t0))
    return out


_BAD = re.compile(r"[^A-Za-z0-9_.\-]")
_SCOPE = re.compile(r"(?:^|/)n(\d+)_")


def scope_name(node: Node) -> str:
    """A framework-safe name that leads back to the node: 'n12_conv1.conv'."""
    return f"n{node.id}_" + _BAD.sub("_", node.name.replace("/", "."))


def node_of_scope(name: str) -> int | None:
    """The node id in a name made by :func:`scope_name` (None if there is none)."""
    m = _SCOPE.search(name)
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------ pooling


@dataclass(frozen=True)
class PoolGeometry:
    """A pool2d node's windows on its input, by the graph's (PyTorch's) rules.

    ``pads`` is (top, bottom, left, right) including the extra rows / columns
    a ceil-mode window reaches past the padding; ``count`` the divisor of
    every output position of an average pool.
    """

    kind: str
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]
    pads: tuple[int, int, int, int]
    out: tuple[int, int]
    count: Array | None

    @property
    def symmetric(self) -> bool:
        p = self.padding
        return p[0] == p[1] and p[2] == p[3]

    @property
    def overhang(self) -> bool:
        """A ceil-mode window reaches past the padding."""
        return self.pads != self.padding


def pool_geometry(node: Node, in_shape: Sequence[int]) -> PoolGeometry:
    a = node.attrs
    (kh, kw), (sh, sw), (pt, pb, pl, pr) = a["kernel"], a["stride"], a["padding"]
    h, w = int(in_shape[2]), int(in_shape[3])
    oh, ow = int(node.shape[2]), int(node.shape[3])
    eh = max(0, (oh - 1) * sh + kh - (h + pt + pb))
    ew = max(0, (ow - 1) * sw + kw - (w + pl + pr))
    count = None
    if a["kind"] == "avg":
        grid = ((pt, pb + eh), (pl, pr + ew))
        if a["count_include_pad"]:
            cells = np.pad(np.ones((h + pt + pb, w + pl + pr)), ((0, eh), (0, ew)))
        else:
            cells = np.pad(np.ones((h, w)), grid)
        win = np.lib.stride_tricks.sliding_window_view(cells, (kh, kw))[::sh, ::sw][:oh, :ow]
        count = win.sum(axis=(-2, -1)).astype(np.float32)
    return PoolGeometry(a["kind"], (kh, kw), (sh, sw), (pt, pb, pl, pr),
                        (pt, pb + eh, pl, pr + ew), (oh, ow), count)


# --------------------------------------------------------- branch structure


def chains(graph: Graph) -> list[list[int]]:
    """The graph cut into chains: a node continues its input's chain when it
    has exactly one input, that input feeds nothing else and is not a graph
    output; only a chain's first node reads values from outside it. Chains
    come in topological order of their first nodes; inputs are left out."""
    consumers = graph.consumers
    outputs = set(graph.outputs)
    chain_of: dict[int, int] = {}
    out: list[list[int]] = []
    for n in graph.nodes:
        if n.op == "input":
            continue
        if len(n.inputs) == 1:
            p = n.inputs[0]
            if p in chain_of and len(consumers[p]) == 1 and p not in outputs:
                chain_of[n.id] = chain_of[p]
                out[chain_of[p]].append(n.id)
                continue
        chain_of[n.id] = len(out)
        out.append([n.id])
    return out


def parallel_chains(graph: Graph, parts: Sequence[Sequence[int]]) -> list[bool]:
    """For each chain: whether it holds a heavy op and another chain with a
    heavy op could run at the same time (neither depends on the other)."""
    chain_of = {nid: c for c, part in enumerate(parts) for nid in part}
    # Bitsets of ancestor chains, in topological order.
    anc: list[int] = []
    for part in parts:
        bits = 0
        for j in graph.nodes[part[0]].inputs:
            if j in chain_of:
                c = chain_of[j]
                bits |= anc[c] | (1 << c)
        anc.append(bits)
    heavy = [any(graph.nodes[i].heavy for i in part) for part in parts]
    out = []
    for c in range(len(parts)):
        free = heavy[c] and any(
            heavy[d] and d != c and not (anc[c] >> d & 1) and not (anc[d] >> c & 1)
            for d in range(len(parts)))
        out.append(free)
    return out

