"""The executor's per-node trace as a profile by op type, comparable with
the frameworks' profilers."""

from __future__ import annotations

from collections.abc import Sequence

from pyparbench.frameworks._common import KernelTime, Profile
from pyparbench.graph import NO_KERNEL_OPS, Graph

__all__ = ["per_op_type"]


def per_op_type(graph: Graph, node_ns: Sequence[float], iteration_ns: float) -> Profile:
    """Per op type the per-node times ``node_ns`` of ``graph`` (the
    optimised graph the plan runs: a folded batch norm or a fused activation
    is in its conv's time, as in the frameworks' fused kernels), summed, with
    the node count; inputs, reshapes and slices (views) are left out."""
    agg: dict[str, list[float]] = {}
    for n, t in zip(graph.nodes, node_ns, strict=True):
        if n.op in NO_KERNEL_OPS:
            continue
        slot = agg.setdefault(n.op, [0.0, 0.0])
        slot[0] += t
        slot[1] += 1
    return Profile([KernelTime(op, op, ns, calls) for op, (ns, calls) in sorted(agg.items())],
                   iteration_ns)
