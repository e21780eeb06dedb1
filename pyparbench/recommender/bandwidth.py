"""Whether a graph streams its weights from memory on every run.

A decoder's decode step reads every weight once per token at about half a
FLOP per byte: once the weights outgrow the last-level caches, its time is
bytes / memory bandwidth, and bandwidth stops growing long before the cores
run out (one core draws a fraction of a socket's). Threads past that point
buy nothing; they only take cores another request could use. So among the
settings predicted alike, such a graph takes the fewest threads, where a
compute-bound one takes the most (:mod:`pyparbench.recommender.selection`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyparbench.graph import NO_KERNEL_OPS, Graph
from pyparbench.graph.passes.precision import BF16_OPS
from pyparbench.graph.passes.quantize import INT8_OPS
from pyparbench.threading.topology import Topology

__all__ = ["Streaming", "streaming"]

# Bytes per weight at each precision, and the nodes whose weights a
# precision's plan holds so (an int8 graph keeps its matmuls float).
_WEIGHT_BYTES = {"fp32": 4, "bf16": 2, "int8": 1}
_CONVERTED_OPS = {"fp32": frozenset(), "bf16": BF16_OPS, "int8": frozenset(INT8_OPS)}


@dataclass(frozen=True)
class Streaming:
    """How a graph meets memory: its FLOPs per byte moved, its weight bytes
    and the last-level cache they are held against."""

    flop_per_byte: float
    weight_bytes: int
    cache_bytes: int
    ridge: float

    @property
    def memory_bound(self) -> bool:
        """Below the ridge and too large for the caches: every run streams
        its weights from memory."""
        return self.flop_per_byte < self.ridge and self.weight_bytes > self.cache_bytes

    def reason(self, saturates_at: int | None) -> str:
        """The reason line for a memory-bound graph."""
        at = (f"; memory bandwidth stops growing at about {saturates_at} threads per socket "
              f"(a socket's bandwidth over one core's)" if saturates_at else "")
        return (f"memory-bound: {self.flop_per_byte:.2f} FLOP per byte (ridge "
                f"{self.ridge:g}) and {self.weight_bytes / 1e6:.0f} MB of weights against "
                f"{self.cache_bytes / 1e6:.0f} MB of last-level cache, so each run streams "
                f"its weights from memory{at}: among settings predicted alike the fewest "
                f"threads are taken (more only take cores, as llama.cpp's users find for "
                f"decoding)")


def streaming(graph: Graph, topo: Topology, *, ridge: float, cache_per_package: int,
              precision: str = "fp32") -> Streaming:
    """How ``graph`` meets memory on ``topo``: the last-level cache is the
    sum of the topology's L3 caches, or ``cache_per_package`` per package
    where the topology gives none (a synthetic description)."""
    weight_bytes = _WEIGHT_BYTES.get(precision, 4)
    converted = _CONVERTED_OPS.get(precision, frozenset())
    flops = nbytes = weights = 0.0
    for n in graph:
        if n.op in NO_KERNEL_OPS:
            continue
        s = graph.stats[n.id]
        flops += s.flops
        nbytes += s.bytes
        weights += 4 * s.params
        if n.op in converted:
            # The stats count float32 weights; a lower precision's plan
            # converts a matrix node's weights (tables and activations stay
            # float32).
            nbytes -= s.params * (4 - weight_bytes)
            weights -= s.params * (4 - weight_bytes)
        elif n.op in INT8_OPS.values():  # an int8 graph's node: its weights one byte each
            weights -= 3 * math.prod(n.params.shapes["weight"])
    l3 = sum(int(c.size) for c in topo.cache_instances if c.level == 3 and c.type != "instruction")
    cache = l3 or cache_per_package * max(1, len(topo.packages))
    return Streaming(flops / max(nbytes, 1.0), int(weights), int(cache), ridge)
