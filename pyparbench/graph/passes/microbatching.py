"""Micro-batching: the leading, activation-bound part of a batched graph run
as several micro-batches whose tensors stay in cache, and the cache budget
that decides it (the share of the caches its team runs in)."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyparbench.graph.ir import Graph
from pyparbench.graph.node import Node, Params
from pyparbench.graph.opdefs import DTYPE_BYTES
from pyparbench.graph.passes.rewrite import Emitter

if TYPE_CHECKING:
    from pyparbench.threading.topology import Topology

__all__ = ["BUDGET_SHARE", "MAX_MICRO_BATCHES", "MicroBatchPlan", "cache_budget_bytes", "microbatch",
           "microbatch_plan", "split_batch"]


# Ops that compute each row of the batch from the same row of their inputs
# alone (under the attribute conditions of _batch_separable).
_ROW_WISE = frozenset({"conv2d", "pool2d", "eltwise", "add", "mul", "batch_norm", "reorder",
                       "global_avg_pool", "linear", "layer_norm", "concat", "softmax",
                       "transpose", "reshape"})
# A node joins the micro-batched part only if reading its weights once per
# micro-batch costs at most this share of the activation bytes it moves.
_WEIGHT_SHARE = 1 / 8
# Most micro-batches: each copies the micro-batched nodes once more.
MAX_MICRO_BATCHES = 16


def _nbytes(n: Node) -> int:
    return math.prod(n.shape) * DTYPE_BYTES[n.dtype]


def _batch_separable(g: Graph, n: Node, batch: int) -> bool:
    """Each of the node's ``batch`` output rows depends on the same row of
    each input alone: computing it on rows [a, b) of its inputs gives rows
    [a, b) of its output."""
    if n.op not in _ROW_WISE or n.dtype != "float32" or not n.shape or n.shape[0] != batch:
        return False
    if any(not g[i].shape or g[i].shape[0] != batch for i in n.inputs):
        return False
    if n.op in ("concat", "softmax"):
        return int(n.attrs["axis"]) != 0
    if n.op == "transpose":
        return int(tuple(n.attrs["perm"])[0]) == 0
    return True


@dataclass(frozen=True)
class MicroBatchPlan:
    """What :func:`microbatch` does to a graph: nodes ``0 .. last`` (those
    that are not graph inputs) run as ``count`` micro-batches of ``rows``
    rows each."""

    last: int
    count: int
    rows: int
    nodes: int           # nodes copied per micro-batch
    largest_bytes: int   # the largest node's activation bytes at the full batch
    budget_bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {"micro_batches": self.count, "rows": self.rows, "nodes": self.nodes,
                "largest_bytes": self.largest_bytes, "budget_bytes": self.budget_bytes}


def _micro_rows(batch: int, largest: int, budget: int) -> int:
    """The most rows per micro-batch (a divisor of ``batch``) that keep a
    node of ``largest`` bytes at the full batch within ``budget``, at most
    MAX_MICRO_BATCHES micro-batches."""
    fits = [d for d in range(1, batch + 1)
            if batch % d == 0 and batch // d <= MAX_MICRO_BATCHES]
    within = [d for d in fits if largest * d <= budget * batch]
    return max(within) if within else min(fits)


def microbatch_plan(g: Graph, budget_bytes: int) -> MicroBatchPlan | None:
    """Which leading nodes of ``g`` to micro-batch, or None.

    A node's activation bytes are its inputs' and output's. The candidates
    are the graph's leading run of batch-separable nodes whose weights are
    small next to their activations (re-reading them per micro-batch costs
    at most ``_WEIGHT_SHARE`` of those); the part micro-batched ends at the
    last candidate whose activations exceed ``budget_bytes``, and is cut
    into the fewest micro-batches that bring each node's activations
    within the budget."""
    inputs = [g[i] for i in g.inputs]
    batch = inputs[0].shape[0] if inputs and inputs[0].shape else 1
    if batch < 2:
        return None
    moved = {n.id: sum(_nbytes(g[i]) for i in n.inputs) + _nbytes(n) for n in g.nodes}
    weights = {n.id: 4 * n.num_params for n in g.nodes}
    run: list[Node] = []
    for n in g.nodes:
        if n.op == "input":
            continue
        if not _batch_separable(g, n, batch):
            break
        run.append(n)
    heavy = [n for n in run if moved[n.id] > budget_bytes]
    if not heavy:
        return None
    count = batch // _micro_rows(batch, max(moved[n.id] for n in heavy), budget_bytes)
    # Stop before the first node whose weights, read once per micro-batch,
    # would cost more than the activation traffic the micro-batches save.
    light = next((k for k, n in enumerate(run)
                  if weights[n.id] * count > _WEIGHT_SHARE * moved[n.id]), len(run))
    heavy = [n for n in run[:light] if moved[n.id] > budget_bytes]
    if not heavy:
        return None
    last = heavy[-1].id
    largest = max(moved[n.id] for n in heavy)
    rows = _micro_rows(batch, largest, budget_bytes)
    if rows == batch:
        return None
    nodes = sum(1 for n in g.nodes if n.id <= last and n.op != "input")
    return MicroBatchPlan(last, batch // rows, rows, nodes, largest, budget_bytes)


def microbatch(g: Graph, budget_bytes: int) -> Graph:
    """Run the leading, activation-bound part of ``g`` as micro-batches (see
    :func:`microbatch_plan`): per micro-batch a ``slice`` of each graph input
    it reads and a copy of its nodes on that many rows, emitted one
    micro-batch after the other; a ``concat`` along the batch joins the
    copies of each value read past that part (or a graph output), under
    its name. Values are unchanged."""
    plan = microbatch_plan(g, budget_bytes)
    return g if plan is None else split_batch(g, plan)


def split_batch(g: Graph, plan: MicroBatchPlan) -> Graph:
    """:func:`microbatch` with its plan made already (the pipeline reports it)."""
    em = Emitter()
    remap: dict[int, int] = {}
    for i in g.inputs:
        remap[i] = em.copy(g[i], ())
    part = [n for n in g.nodes if n.id <= plan.last and n.op != "input"]
    copies: dict[int, list[int]] = {n.id: [] for n in part}
    read_later = {i for n in g.nodes if n.id > plan.last for i in n.inputs} | set(g.outputs)
    # A micro-batch's slices also take the previous micro-batch's values read
    # later as inputs (they read only the first): they order the
    # micro-batches, so that under any schedule each one finds the buffers
    # the one before it used free, and warm.
    before: tuple[int, ...] = ()
    for j in range(plan.count):
        start = j * plan.rows
        local: dict[int, int] = {}
        for n in part:
            ins = []
            for i in n.inputs:
                if i not in local:  # a graph input: this micro-batch's rows of it
                    x = g[i]
                    local[i] = em.emit("slice", (remap[i], *before), {"start": start},
                                       Params({}, 0, 0), (plan.rows, *x.shape[1:]),
                                       x.dtype, f"{x.name}/mb{j}")
                ins.append(local[i])
            attrs = dict(n.attrs)
            inplace = attrs.get("inplace")
            if inplace is not None and g[n.inputs[int(inplace)]].op in ("input", "constant"):
                attrs.pop("inplace")  # never into the caller's input, nor a constant
            local[n.id] = em.emit(n.op, tuple(ins), attrs, n.params,
                                  (plan.rows, *n.shape[1:]), n.dtype, f"{n.name}/mb{j}")
            copies[n.id].append(local[n.id])
        before = tuple(local[n.id] for n in part if n.id in read_later)
    for n in part:
        if n.id in read_later:
            attrs = {"axis": 0, **({"layout": n.attrs["layout"]} if "layout" in n.attrs else {})}
            remap[n.id] = em.emit("concat", tuple(copies[n.id]), attrs, Params({}, 0, 0),
                                  n.shape, n.dtype, n.name)
    for n in g.nodes:
        if n.id > plan.last and n.op != "input":
            remap[n.id] = em.copy(n, (remap[i] for i in n.inputs))
    return em.graph(g, [remap[o] for o in g.outputs])


# The share of its team's cache a node's activations may take: the rest is
# left to weights, the next node's data and other processes. Measured on a
# 32 MiB-L3 Zen 4 with the team on every core: MobileNet-v2's pointwise convs
# run at 180-210 GFLOP/s moving 4.4 MB (an eighth) and at 85-100 moving
# 9-17 MB.
BUDGET_SHARE = 1 / 8


def cache_budget_bytes(topo: Topology | None = None, cpus: Sequence[int] | None = None) -> int:
    """The activation bytes a node may move and still find them in cache:
    :data:`BUDGET_SHARE` of the cache its team runs in
    (:func:`~pyparbench.threading.cache_share.team_cache_bytes`) on
    ``topo`` (default: this machine) and the team's ``cpus`` (default: every
    CPU this process may use)."""
    # Imported here: the topology loads the native core, which a framework's
    # child process (that builds graphs but runs them in its framework) must
    # never load next to the framework's own OpenMP.
    from pyparbench.threading.cache_share import team_cache_bytes  # noqa: PLC0415 (framework child: no native core)

    if topo is None:
        return _this_machine_budget(None if cpus is None else tuple(cpus))
    return int(team_cache_bytes(topo, cpus) * BUDGET_SHARE)


@functools.lru_cache(maxsize=256)
def _this_machine_budget(cpus: tuple[int, ...] | None) -> int:
    from pyparbench.threading.cache_share import team_cache_bytes  # noqa: PLC0415 (framework child: no native core)
    from pyparbench.threading.topology import topology  # noqa: PLC0415 (framework child: no native core)

    return int(team_cache_bytes(topology(), cpus) * BUDGET_SHARE)
