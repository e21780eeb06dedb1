"""Analysis of a graph: FLOPs, parameters, bytes moved, and the study's graph
metrics (depth, average width, maximum width, work / span).

Analysis conventions (per node, and summed over the graph):

* FLOPs: a multiply-add is 2 FLOPs (conv2d, linear, matmul); every other
  elementary operation is 1 FLOP per element: a fused bias or ReLU adds 1 per
  output element, an embedding bag 1 add per gathered element (plus 1 divide
  per output element for ``mean``), eltwise per :data:`ELTWISE_FLOPS`, pooling
  1 per window element read per output element (+1 divide for avg), global
  average pooling 1 per input element (+1 per output), batch_norm 4 per element
  (subtract, divide, multiply, add; 3 without scale), layer_norm 8 per element
  (mean: 1; variance: subtract, square, add; normalise: subtract, divide;
  scale, shift), softmax 5 per element (max, subtract, exp, sum, divide),
  rms_norm 4 per element, rotary 3 (with positions, 5 more per position
  and frequency: the angle, cos, sin, the scaling of both), glu its
  activation's + 1, attention 2
  per multiply-add of q kᵀ and p v plus the softmax's 5 (and the mask's 1)
  per score.
  Data movement (concat, reshape, transpose, tril_flatten), inputs and
  constants are 0.
* Parameters: every array of every node, batch-norm statistics included (as
  Keras' ``count_params`` counts them); ``trainable_params`` leaves the
  statistics out (as PyTorch's parameter count does).
* Bytes moved: every input read once, the output written once, the parameters
  read once (float32 4 bytes, int64 8), except that an embedding bag reads
  only the rows it gathers, not its whole table. Reshape and transpose count
  as copies; graph inputs and constants themselves move nothing (their
  readers count them).
* Heavy ops: conv2d, linear, matmul, embedding_bag (the study's GEMM / conv /
  embedding lookups). Depth is the longest chain of heavy ops along the
  dependencies, other ops being transparent; average width = heavy ops /
  depth (the study's tuner). Maximum width is the largest set of heavy ops no
  two of which depend on each other (the largest antichain of the heavy-op
  order), computed exactly (Dilworth: heavy ops minus a maximum matching of
  the comparability graph) up to :data:`EXACT_WIDTH_LIMIT` heavy ops, and above
  that approximated by the most heavy ops on one depth level (a lower bound).
  Work / span is total FLOPs over the FLOPs of the heaviest dependency path.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

from pyparbench.graph._jsonable import jsonable
from pyparbench.graph.node import Node
from pyparbench.graph.opdefs import DTYPE_BYTES, ELTWISE_FLOPS

__all__ = ["EXACT_WIDTH_LIMIT", "GraphAnalysis", "NodeStats"]

EXACT_WIDTH_LIMIT = 2000


@dataclass(frozen=True)
class NodeStats:
    """Analysis of one node; ``level`` is the heavy-op depth up to and including it."""

    id: int
    name: str
    op: str
    heavy: bool
    flops: int
    macs: int
    params: int
    bytes: int
    level: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)



class GraphAnalysis:
    """The analysis of :class:`~pyparbench.graph.ir.Graph` (its base class):
    per-node statistics and the graph's totals and metrics."""

    name: str
    nodes: tuple[Node, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    meta: dict[str, Any]


    @cached_property
    def stats(self) -> tuple[NodeStats, ...]:
        """Per-node FLOPs, multiply-adds, parameters, bytes and heavy level."""
        levels: list[int] = []
        out: list[NodeStats] = []
        for n in self.nodes:
            ins = [self.nodes[j] for j in n.inputs]
            flops, macs = _flops(n, ins)
            level = max((levels[j] for j in n.inputs), default=0) + int(n.heavy)
            levels.append(level)
            out.append(NodeStats(id=n.id, name=n.name, op=n.op, heavy=n.heavy, flops=flops,
                                 macs=macs, params=n.num_params, bytes=_bytes(n, ins),
                                 level=level))
        return tuple(out)

    @property
    def flops(self) -> int:
        """Total FLOPs of one forward pass (the work)."""
        return sum(s.flops for s in self.stats)

    @property
    def macs(self) -> int:
        """Multiply-adds of conv2d, linear and matmul (what papers quote as 'FLOPs')."""
        return sum(s.macs for s in self.stats)

    @property
    def num_params(self) -> int:
        """Every parameter, batch-norm statistics included (Keras' count_params)."""
        return sum(s.params for s in self.stats)

    @property
    def trainable_params(self) -> int:
        """Parameters less batch-norm statistics (PyTorch's count)."""
        return sum(n.trainable_params for n in self.nodes)

    @property
    def bytes_moved(self) -> int:
        return sum(s.bytes for s in self.stats)

    @property
    def heavy_ops(self) -> int:
        return sum(1 for n in self.nodes if n.heavy)

    @property
    def depth(self) -> int:
        """Longest chain of heavy ops along the dependencies (0 with none)."""
        return max((s.level for s in self.stats), default=0)

    @property
    def avg_width(self) -> float:
        """Heavy ops / depth: the study's average width (0.0 with no heavy op)."""
        return self.heavy_ops / self.depth if self.depth else 0.0

    @cached_property
    def span(self) -> int:
        """FLOPs along the heaviest dependency path (the critical path)."""
        upto: list[int] = []
        for n, s in zip(self.nodes, self.stats, strict=True):
            upto.append(s.flops + max((upto[j] for j in n.inputs), default=0))
        return max(upto, default=0)

    @property
    def work_span(self) -> float:
        """Work / span: the speed-up an unbounded number of workers could reach
        (1.0 for a graph with no FLOPs)."""
        return self.flops / self.span if self.span else 1.0

    @property
    def level_width(self) -> int:
        """Most heavy ops on one heavy-depth level."""
        counts: dict[int, int] = {}
        for s in self.stats:
            if s.heavy:
                counts[s.level] = counts.get(s.level, 0) + 1
        return max(counts.values(), default=0)

    @cached_property
    def max_width(self) -> int:
        """Most heavy ops that can run at once: the largest antichain of heavy ops.

        Exact up to EXACT_WIDTH_LIMIT heavy ops, else ``level_width`` (a lower bound).
        """
        heavy = [n.id for n in self.nodes if n.heavy]
        if len(heavy) > EXACT_WIDTH_LIMIT:
            return self.level_width
        return _max_antichain(self, heavy)

    @property
    def max_width_exact(self) -> bool:
        return self.heavy_ops <= EXACT_WIDTH_LIMIT

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return dict(sorted(counts.items()))

    def report_stats(self) -> dict[str, Any]:
        """The figures a report shows of the graph (the study's tuner's input):
        what travels with a run's plan, so that a report never rebuilds a
        model (a model that is a file cannot be rebuilt by name)."""
        return {"gflops": self.flops / 1e9, "heavy_ops": self.heavy_ops, "depth": self.depth,
                "avg_width": self.avg_width, "nodes": len(self.nodes)}

    def summary(self) -> dict[str, Any]:
        """Totals and the study's graph metrics, JSON-able."""
        return {
            "name": self.name,
            "meta": jsonable(self.meta),
            "nodes": len(self.nodes),
            "inputs": {self.nodes[i].name: list(self.nodes[i].shape) for i in self.inputs},
            "outputs": {self.nodes[i].name: list(self.nodes[i].shape) for i in self.outputs},
            "flops": self.flops,
            "gflops": self.flops / 1e9,
            "macs": self.macs,
            "params": self.num_params,
            "trainable_params": self.trainable_params,
            "bytes_moved": self.bytes_moved,
            "heavy_ops": self.heavy_ops,
            "depth": self.depth,
            "avg_width": self.avg_width,
            "max_width": self.max_width,
            "max_width_exact": self.max_width_exact,
            "level_width": self.level_width,
            "span_flops": self.span,
            "work_span": self.work_span,
            "op_counts": self.op_counts(),
        }


def _size(n: Node) -> int:
    return math.prod(n.shape)


def _flops(n: Node, ins: Sequence[Node]) -> tuple[int, int]:
    """(FLOPs, multiply-adds) of one node, by the module's conventions."""
    a = n.attrs
    out = _size(n)
    fused = out * (int("bias" in n.params) + int(bool(a.get("relu", False))))
    # What the optimisation passes fuse: an activation, a conv's residual add.
    if a.get("activation"):
        fused += ELTWISE_FLOPS[a["activation"]] * out
    if n.op == "conv2d" and len(n.inputs) == 2:
        fused += out
    if n.op in ("quantized_conv2d", "quantized_linear"):
        # Integer multiply-adds, counted as float ones; the input's
        # quantisation (4 per element) and the output's (2, 4 more when
        # requantised) as element-wise work.
        w = n.params.shapes["weight"]
        per_out = math.prod(w[1:])
        macs = out * per_out
        grid = 4 * _size(ins[0]) + (6 if a["out_dtype"] != "float32" else 0) * out
        return 2 * macs + fused + grid, macs
    if n.op in ("dynamic_quantized_conv2d", "dynamic_quantized_linear"):
        # Integer multiply-adds, counted as float ones; the input's range
        # and quantisation (6 per element: min, max, divide, round, add,
        # clamp) and the output's scale and bias (2).
        macs = out * math.prod(n.params.shapes["weight"][1:])
        return 2 * macs + 6 * _size(ins[0]) + 2 * out, macs
    if n.op == "fake_quantize":
        return 6 * out, 0  # divide, round, add, clamp, subtract, multiply
    if n.op == "conv2d":
        _, i, kh, kw = n.params.shapes["weight"]
        macs = out * i * kh * kw
        return 2 * macs + fused, macs
    if n.op == "linear":
        macs = out * ins[0].shape[-1]
        return 2 * macs + fused, macs
    if n.op == "matmul":
        k = ins[0].shape[-1]
        macs = out * k
        return 2 * macs + fused, macs
    if n.op == "embedding_bag":
        return _size(ins[0]) * n.shape[-1] + (out if a["mode"] == "mean" else 0), 0
    if n.op == "eltwise":
        return ELTWISE_FLOPS[a["kind"]] * out, 0
    if n.op in ("add", "mul"):
        return out + fused, 0
    if n.op == "pool2d":
        kh, kw = a["kernel"]
        return out * (kh * kw + int(a["kind"] == "avg")), 0
    if n.op == "global_avg_pool":
        return _size(ins[0]) + out, 0
    if n.op == "batch_norm":
        return out * (4 if "scale" in n.params else 3), 0
    if n.op == "layer_norm":
        return 8 * out, 0
    if n.op == "softmax":
        return 5 * out, 0
    if n.op == "rms_norm":
        return 4 * out, 0
    if n.op == "rotary":
        computed = 5 * _size(ins[1]) * (n.shape[-1] // 2) if "inv_freq" in n.params else 0
        return 3 * out + computed, 0
    if n.op == "glu":
        return (ELTWISE_FLOPS[a["kind"]] + 1) * out, 0
    if n.op == "attention":
        # q kᵀ and p v (multiply-adds), the mask, and the softmax's 5 per score.
        sk, d = ins[1].shape[2], ins[0].shape[3]
        rows = out // n.shape[-1]
        macs = rows * sk * (d + n.shape[-1])
        return 2 * macs + rows * sk * (5 + int(len(ins) > 3)), macs
    if n.op == "decode_attention":
        # As attention's, over the past and the new keys; on a cache kept in
        # place (an int64 length input) over the whole context, the most a
        # step reads.
        cached = len(ins) > 5 and ins[5].dtype == "int64"
        sk, d = ins[3].shape[2] + (0 if cached else ins[1].shape[2]), ins[0].shape[3]
        rows = out // n.shape[-1]
        macs = rows * sk * (d + n.shape[-1])
        return 2 * macs + rows * sk * (5 + int(len(ins) > 5 and not cached)), macs
    return 0, 0  # inputs, constants and data movement


def _byte_rowwise(n: Node) -> bool:
    """Whether embedding bag ``n`` reads an 8-bit rowwise table."""
    return n.attrs.get("table_format") == "byte_rowwise"


def _bytes(n: Node, ins: Sequence[Node]) -> int:
    if n.op in ("input", "constant", "slice"):  # a slice is a view of its input's rows
        return 0
    moved = sum(_size(i) * DTYPE_BYTES[i.dtype] for i in ins) + _size(n) * DTYPE_BYTES[n.dtype]
    if n.op == "embedding_bag":  # only the gathered rows (8-bit ones: a byte each, scale, bias)
        row = n.shape[-1] + 8 if _byte_rowwise(n) else n.shape[-1] * 4
        return moved + _size(ins[0]) * row
    if n.op in ("quantized_linear", "quantized_conv2d", "dynamic_quantized_linear",
                "dynamic_quantized_conv2d"):  # weights held as int8
        weights = math.prod(n.params.shapes["weight"])
        return moved + weights + 4 * (n.num_params - weights)
    return moved + 4 * n.num_params


def _max_antichain(g: GraphAnalysis, heavy: Sequence[int]) -> int:
    """Largest antichain of the heavy ops' dependency order (Dilworth / König).

    It equals the number of heavy ops minus a maximum matching in the bipartite
    graph with an edge u -> v whenever heavy op u is an ancestor of heavy op v.
    """
    pos = {h: k for k, h in enumerate(heavy)}
    anc: list[int] = []  # bitset over heavy positions: heavy ancestors of each node
    for n in g.nodes:
        bits = 0
        for j in n.inputs:
            bits |= anc[j]
            if j in pos:
                bits |= 1 << pos[j]
        anc.append(bits)
    preds = [[u for u in range(len(heavy)) if anc[h] >> u & 1] for h in heavy]
    succs: list[list[int]] = [[] for _ in heavy]
    for v, us in enumerate(preds):
        for u in us:
            succs[u].append(v)
    match_of_v = [-1] * len(heavy)  # right side v -> its matched left u

    def augment(root: int) -> bool:
        # Iterative Kuhn search for an augmenting path from left vertex `root`.
        seen: set[int] = set()
        stack: list[tuple[int, Iterator[int]]] = [(root, iter(succs[root]))]
        path: list[int] = []  # right vertices tried along the current path
        while stack:
            u, it = stack[-1]
            for v in it:
                if v in seen:
                    continue
                seen.add(v)
                if match_of_v[v] == -1:
                    # Flip the path: each right vertex on it moves to its left vertex.
                    path.append(v)
                    for (left, _), right in zip(stack, path, strict=True):
                        match_of_v[right] = left
                    return True
                path.append(v)
                stack.append((match_of_v[v], iter(succs[match_of_v[v]])))
                break
            else:
                stack.pop()
                if path:
                    path.pop()
        return False

    matching = sum(1 for u in range(len(heavy)) if augment(u))
    return len(heavy) - matching


