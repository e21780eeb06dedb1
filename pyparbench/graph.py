"""Graph IR of model-like networks, its builder, and its analysis.

A :class:`Graph` is a list of :class:`Node` in topological order (a node's
inputs always have smaller ids). Nodes are built with :class:`GraphBuilder`,
which infers and checks every output shape and gives each parameter a seeded
random initialiser. Parameters are made lazily (see :class:`Params`), so a
graph's analysis never allocates its weights: listing a DLRM with
gigabytes of tables costs nothing until something reads a table.

Op vocabulary (attributes in brackets; all tensors float32 except the int64
index inputs of ``embedding_bag``):

========================  ==========================================================
``input``                 [dtype] a named graph input
``conv2d``                [stride (h, w), padding (t, b, l, r), dilation (h, w), groups,
                          relu] NCHW; params ``weight`` OIHW (I = C / groups), ``bias``?
``linear``                [relu] x · weightᵀ + bias on the last axis of a 2-D or 3-D
                          input; params ``weight`` (out, in), ``bias``?
``matmul``                [trans_b] a · b (or a · bᵀ) of two nodes, 2-D or batched 3-D
``embedding_bag``         [mode sum|mean] params ``table`` (rows, dim); one input, int64
                          indices (batch, bag_size) -> (batch, dim)
``eltwise``               [kind relu|relu6|sigmoid|tanh|gelu]; gelu is the exact (erf) one
``add``                   [relu] a + b; b has a's rank and broadcasts where its size is 1
``mul``                   a * b, same shapes
``concat``                [axis] one or more inputs
``pool2d``                [kind max|avg, kernel, stride, padding (t, b, l, r), ceil_mode,
                          count_include_pad] PyTorch's output-size and divisor rules
``global_avg_pool``       (N, C, H, W) -> (N, C)
``batch_norm``            [eps] (x - mean) / sqrt(var + eps) * scale + shift, channels
                          on axis 1; params mean, var, shift and ``scale`` (absent = 1,
                          Keras' ``scale=False``)
``layer_norm``            [eps] over the last axis; params scale, shift
``softmax``               [axis]
``reshape``               [shape] the full output shape
``transpose``             [perm]
``tril_flatten``          (B, n, n) -> (B, n(n-1)/2): the strictly lower triangle, row
                          by row (DLRM's dot interaction without self-interaction)
========================  ==========================================================

Analysis conventions (per node, and summed over the graph):

* FLOPs: a multiply-add is 2 FLOPs (conv2d, linear, matmul); every other
  elementary operation is 1 FLOP per element: a fused bias or ReLU adds 1 per
  output element, an embedding bag 1 add per gathered element (plus 1 divide
  per output element for ``mean``), eltwise per :data:`ELTWISE_FLOPS`, pooling
  1 per window element read per output element (+1 divide for avg), global
  average pooling 1 per input element (+1 per output), batch_norm 4 per element
  (subtract, divide, multiply, add; 3 without scale), layer_norm 8 per element
  (mean: 1; variance: subtract, square, add; normalise: subtract, divide;
  scale, shift), softmax 5 per element (max, subtract, exp, sum, divide).
  Data movement (concat, reshape, transpose, tril_flatten) and inputs are 0.
* Parameters: every array of every node, batch-norm statistics included (as
  Keras' ``count_params`` counts them); ``trainable_params`` leaves the
  statistics out (as PyTorch's parameter count does).
* Bytes moved: every input read once, the output written once, the parameters
  read once (float32 4 bytes, int64 8), except that an embedding bag reads
  only the rows it gathers, not its whole table. Reshape and transpose count
  as copies; graph inputs themselves move nothing.
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

import contextlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from pyparbench.executor import CompiledGraph

__all__ = [
    "DTYPE_BYTES",
    "ELTWISE_FLOPS",
    "EXACT_WIDTH_LIMIT",
    "HEAVY_OPS",
    "OPS",
    "Graph",
    "GraphBuilder",
    "Node",
    "NodeStats",
    "ParamSpec",
    "Params",
]

OPS = frozenset({
    "input", "conv2d", "linear", "matmul", "embedding_bag", "eltwise", "add", "mul",
    "concat", "pool2d", "global_avg_pool", "batch_norm", "layer_norm", "softmax",
    "reshape", "transpose", "tril_flatten",
})
HEAVY_OPS = frozenset({"conv2d", "linear", "matmul", "embedding_bag"})
DTYPE_BYTES = {"float32": 4, "int64": 8}
# Elementary operations per element, transcendental functions counted as one.
ELTWISE_FLOPS = {
    "relu": 1,      # max
    "relu6": 2,     # max, min
    "sigmoid": 4,   # negate, exp, add, divide
    "tanh": 5,      # (exp(2x) - 1) / (exp(2x) + 1): multiply, exp, subtract, add, divide
    "gelu": 5,      # 0.5 * x * (1 + erf(x / sqrt 2)): divide, erf, add, multiply, multiply
}
EXACT_WIDTH_LIMIT = 2000

Shape = tuple[int, ...]
F32Array = npt.NDArray[np.float32]


# ---------------------------------------------------------------- parameters


@dataclass(frozen=True)
class ParamSpec:
    """Shape and random initialiser of one parameter array.

    ``init`` "normal" draws N(a, b²); "uniform" draws U(a, b).
    """

    shape: Shape
    init: Literal["normal", "uniform"]
    a: float
    b: float

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class Params(Mapping[str, F32Array]):
    """A node's parameters: read-only float32 arrays made on first access.

    Each array comes from its own generator, seeded with (graph seed, node id,
    position of the name), so its values do not depend on which other arrays
    were made, or in what order. Arrays are cached and read-only (they are
    shared by everyone who runs the graph).
    """

    def __init__(self, specs: Mapping[str, ParamSpec], seed: int, node_id: int) -> None:
        self._specs = dict(specs)
        self._seed = seed
        self._node_id = node_id
        self._made: dict[str, F32Array] = {}

    @property
    def specs(self) -> Mapping[str, ParamSpec]:
        return self._specs

    @property
    def shapes(self) -> dict[str, Shape]:
        return {k: s.shape for k, s in self._specs.items()}

    @property
    def materialized(self) -> tuple[str, ...]:
        """Names of the arrays made so far."""
        return tuple(self._made)

    def __getitem__(self, key: str) -> F32Array:
        arr = self._made.get(key)
        if arr is None:
            spec = self._specs[key]  # KeyError for an unknown name, as a dict
            pos = list(self._specs).index(key)
            rng = np.random.default_rng(
                np.random.SeedSequence(self._seed, spawn_key=(self._node_id, pos)))
            if spec.init == "normal":
                arr = rng.standard_normal(spec.shape, dtype=np.float32)
                arr *= np.float32(spec.b)
                arr += np.float32(spec.a)
            else:
                arr = rng.uniform(spec.a, spec.b, size=spec.shape).astype(np.float32)
            arr.flags.writeable = False
            self._made[key] = arr
        return arr

    def __contains__(self, key: object) -> bool:
        # Mapping's default would call __getitem__, making the array.
        return key in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"Params({self.shapes})"


# --------------------------------------------------------------------- nodes


@dataclass(frozen=True, eq=False)
class Node:
    """One operation: its op, input node ids, attributes, parameters and output.

    Frozen: fields cannot be reassigned (``attrs`` is a plain dict by
    convention left unmodified after building). Nodes compare by identity, so
    comparing never makes parameters.
    """

    id: int
    op: str
    inputs: tuple[int, ...]
    attrs: dict[str, Any]
    params: Params
    shape: Shape
    dtype: str
    name: str

    @property
    def heavy(self) -> bool:
        return self.op in HEAVY_OPS

    @property
    def num_params(self) -> int:
        return sum(s.size for s in self.params.specs.values())

    @property
    def trainable_params(self) -> int:
        """Parameters less the batch-norm statistics."""
        stats = ("mean", "var") if self.op == "batch_norm" else ()
        return sum(s.size for k, s in self.params.specs.items() if k not in stats)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able description, without weights."""
        return {
            "id": self.id,
            "name": self.name,
            "op": self.op,
            "inputs": list(self.inputs),
            "attrs": _jsonable(self.attrs),
            "params": {k: list(s) for k, s in self.params.shapes.items()},
            "shape": list(self.shape),
            "dtype": self.dtype,
        }


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(e) for k, e in v.items()}
    if isinstance(v, (tuple, list)):
        return [_jsonable(e) for e in v]
    return v


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------- graph


class Graph:
    """Nodes in topological order, the graph's inputs and outputs, and its analysis.

    Parameters
    ----------
    name
        The model's name.
    nodes
        Node ``i`` at position ``i``; every input id smaller than the node's.
    outputs
        Ids of the output nodes (their names are the output names).
    meta
        Free-form description (batch, family, configuration), JSON-able.

    Raises
    ------
    ValueError
        An unknown op, ids out of order, an input after its consumer,
        duplicate names, no outputs, or a node that reaches no output (dead
        code).
    """

    def __init__(self, name: str, nodes: Sequence[Node], outputs: Sequence[int],
                 meta: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self.outputs: tuple[int, ...] = tuple(int(o) for o in outputs)
        self.meta: dict[str, Any] = dict(meta or {})
        self._validate()
        self.inputs: tuple[int, ...] = tuple(n.id for n in self.nodes if n.op == "input")
        self._by_name = {n.name: n.id for n in self.nodes}

    def _validate(self) -> None:
        names: set[str] = set()
        for i, n in enumerate(self.nodes):
            if n.op not in OPS:
                raise ValueError(f"node {n.name!r} has unknown op {n.op!r}")
            if n.id != i:
                raise ValueError(f"node {n.name!r} has id {n.id} at position {i}")
            if any(not 0 <= j < i for j in n.inputs):
                raise ValueError(f"node {n.name!r} (id {i}) has inputs {n.inputs}: "
                                 "each must be an earlier node")
            if n.name in names:
                raise ValueError(f"duplicate node name {n.name!r}")
            names.add(n.name)
        if not self.outputs:
            raise ValueError("a graph needs at least one output")
        bad = [o for o in self.outputs if not 0 <= o < len(self.nodes)]
        if bad:
            raise ValueError(f"outputs {bad} are not node ids (0..{len(self.nodes) - 1})")
        live = set(self.outputs)
        for n in reversed(self.nodes):
            if n.id in live:
                live.update(n.inputs)
        dead = [n.name for n in self.nodes if n.id not in live]
        if dead:
            raise ValueError(f"nodes that reach no output: {dead}")

    # ------------------------------------------------------------- access

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __getitem__(self, key: int | str) -> Node:
        """A node by id or by name."""
        if isinstance(key, str):
            if key not in self._by_name:
                raise KeyError(f"no node named {key!r} in graph {self.name!r}")
            return self.nodes[self._by_name[key]]
        return self.nodes[key]

    def __repr__(self) -> str:
        return (f"Graph({self.name!r}, {len(self.nodes)} nodes, "
                f"inputs={self.input_names}, outputs={self.output_names})")

    @property
    def input_names(self) -> list[str]:
        return [self.nodes[i].name for i in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [self.nodes[i].name for i in self.outputs]

    @cached_property
    def consumers(self) -> tuple[tuple[int, ...], ...]:
        """For each node, the ids of the nodes that read it."""
        out: list[list[int]] = [[] for _ in self.nodes]
        for n in self.nodes:
            for j in n.inputs:
                out[j].append(n.id)
        return tuple(tuple(c) for c in out)

    def random_inputs(self, seed: int = 0) -> dict[str, npt.NDArray[Any]]:
        """Inputs for every graph input: float32 in [-1, 1) with no exact zeros,
        int64 indices uniform over the rows of every table they index."""
        rng = np.random.default_rng(seed)
        out: dict[str, npt.NDArray[Any]] = {}
        for i in self.inputs:
            n = self.nodes[i]
            if n.dtype == "int64":
                rows = min(self.nodes[c].params.shapes["table"][0] for c in self.consumers[i])
                out[n.name] = rng.integers(0, rows, size=n.shape, dtype=np.int64)
            else:
                x = rng.uniform(-1.0, 1.0, size=n.shape).astype(np.float32)
                x[x == 0] = 0.5
                out[n.name] = x
        return out

    # ----------------------------------------------------------- analysis

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

    def summary(self) -> dict[str, Any]:
        """Totals and the study's graph metrics, JSON-able."""
        return {
            "name": self.name,
            "meta": _jsonable(self.meta),
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

    def to_dict(self) -> dict[str, Any]:
        """The graph's structure (no weights) as JSON-able data."""
        return {
            "name": self.name,
            "meta": _jsonable(self.meta),
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "nodes": [n.to_dict() for n in self.nodes],
        }

    def compile(self) -> CompiledGraph:
        """Compile into a native plan (:mod:`pyparbench.executor`)."""
        from pyparbench.executor import compile_graph

        return compile_graph(self)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def _size(n: Node) -> int:
    return math.prod(n.shape)


def _flops(n: Node, ins: Sequence[Node]) -> tuple[int, int]:
    """(FLOPs, multiply-adds) of one node, by the module's conventions."""
    a = n.attrs
    out = _size(n)
    fused = out * (int("bias" in n.params) + int(bool(a.get("relu", False))))
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
        return 2 * macs, macs
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
    return 0, 0  # input and data movement


def _bytes(n: Node, ins: Sequence[Node]) -> int:
    if n.op == "input":
        return 0
    moved = sum(_size(i) * DTYPE_BYTES[i.dtype] for i in ins) + _size(n) * DTYPE_BYTES[n.dtype]
    if n.op == "embedding_bag":
        return moved + _size(ins[0]) * n.shape[-1] * 4  # only the gathered rows
    return moved + 4 * n.num_params


def _max_antichain(g: Graph, heavy: Sequence[int]) -> int:
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


# ------------------------------------------------------------------- builder


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _int_tuple(name: str, v: int | Sequence[int], n: int) -> tuple[int, ...]:
    """An int repeated n times, or a sequence of n ints, as a tuple."""
    if isinstance(v, (int, np.integer)) and _is_int(v):
        return (int(v),) * n
    t = tuple(v) if isinstance(v, Sequence) else ()
    if len(t) != n or not all(_is_int(e) for e in t):
        raise TypeError(f"{name} must be an int or {n} ints, got {v!r}")
    return tuple(int(e) for e in t)


def _padding4(v: int | Sequence[int]) -> tuple[int, int, int, int]:
    """int, (pad_h, pad_w) or (top, bottom, left, right)."""
    if not isinstance(v, (int, np.integer)) and len(tuple(v)) == 2:
        ph, pw = _int_tuple("padding", v, 2)
        return (ph, ph, pw, pw)
    top, bottom, left, right = _int_tuple("padding", v, 4)
    return (top, bottom, left, right)


def _pool_out(size: int, k: int, s: int, p0: int, p1: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size, with asymmetric padding (p0 before, p1 after)."""
    span = size + p0 + p1 - k
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p0:
        out -= 1  # the last window would start in the trailing padding
    return out


class GraphBuilder:
    """Builds a :class:`Graph` one op at a time, checking shapes as it goes.

    Every method returns the new node's id. Parameters get seeded random
    initialisers sized so activations stay O(1) through deep networks: He
    normal (std sqrt(2 / fan_in)) for conv and linear weights, small biases,
    batch-norm statistics near 0 and 1, embedding rows scaled by the bag size.

    Parameters
    ----------
    name
        The graph's name.
    seed
        Seed of every parameter's generator (see :class:`Params`).

    Raises
    ------
    ValueError
        From any method, for shapes or attributes that do not fit, naming them.
    """

    def __init__(self, name: str, seed: int = 0) -> None:
        self.name = name
        self.seed = int(seed)
        self._nodes: list[Node] = []
        self._names: set[str] = set()
        self._scope: list[str] = []

    # ------------------------------------------------------------ plumbing

    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Prefix the names of nodes made inside with ``name/``."""
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def shape(self, x: int) -> Shape:
        return self._node(x).shape

    def _node(self, x: int) -> Node:
        if not isinstance(x, (int, np.integer)) or not 0 <= x < len(self._nodes):
            raise ValueError(f"{x!r} is not a node id of this builder")
        return self._nodes[int(x)]

    def _f32(self, x: int, what: str) -> Shape:
        n = self._node(x)
        if n.dtype != "float32":
            raise ValueError(f"{what} needs a float32 input, got {n.name!r} ({n.dtype})")
        return n.shape

    def _add(self, op: str, inputs: Sequence[int], attrs: dict[str, Any], shape: Shape,
             name: str | None, params: Mapping[str, ParamSpec] | None = None,
             dtype: str = "float32") -> int:
        nid = len(self._nodes)
        base = name if name is not None else f"{op}_{nid}"
        full = "/".join([*self._scope, base])
        if full in self._names:
            raise ValueError(f"duplicate node name {full!r}")
        if any(d < 1 for d in shape):
            ins = ", ".join(f"{self._nodes[i].name} {self._nodes[i].shape}" for i in inputs)
            raise ValueError(f"{op} {full!r} would have output shape {shape} from {ins}")
        self._names.add(full)
        self._nodes.append(Node(nid, op, tuple(int(i) for i in inputs), attrs,
                                Params(params or {}, self.seed, nid), shape, dtype, full))
        return nid

    def build(self, outputs: int | Sequence[int], meta: Mapping[str, Any] | None = None) -> Graph:
        """The graph of every node made so far, with these outputs."""
        outs = [outputs] if isinstance(outputs, (int, np.integer)) else list(outputs)
        return Graph(self.name, self._nodes, outs, meta)

    # ----------------------------------------------------------------- ops

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> int:
        """A graph input; ``dtype`` "float32" or "int64" (embedding indices).

        Its name is the one callers feed, so no scope prefixes it.
        """
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"input dtype must be one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
        scope, self._scope = self._scope, []
        try:
            return self._add("input", (), {"dtype": dtype}, tuple(int(d) for d in shape), name,
                             dtype=dtype)
        finally:
            self._scope = scope

    def conv2d(self, x: int, out_channels: int, kernel: int | Sequence[int], *,
               stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
               dilation: int | Sequence[int] = 1, groups: int = 1, bias: bool = True,
               relu: bool = False, name: str | None = None) -> int:
        """2-D convolution of NCHW ``x``; padding int, (h, w) or (t, b, l, r)."""
        xs = self._f32(x, "conv2d")
        if len(xs) != 4:
            raise ValueError(f"conv2d input must be 4-D (N, C, H, W), got {xs}")
        n, c, h, w = xs
        kh, kw = _int_tuple("kernel", kernel, 2)
        sh, sw = _int_tuple("stride", stride, 2)
        dh, dw = _int_tuple("dilation", dilation, 2)
        pad = _padding4(padding)
        if min(kh, kw, sh, sw, dh, dw, groups, out_channels) < 1 or min(pad) < 0:
            raise ValueError(f"conv2d needs kernel, stride, dilation, groups, out_channels >= 1 "
                             f"and padding >= 0, got kernel {(kh, kw)}, stride {(sh, sw)}, "
                             f"dilation {(dh, dw)}, groups {groups}, out {out_channels}, "
                             f"padding {pad}")
        if c % groups or out_channels % groups:
            raise ValueError(f"conv2d groups={groups} must divide input channels ({xs}) and "
                             f"out_channels ({out_channels})")
        oh = (h + pad[0] + pad[1] - dh * (kh - 1) - 1) // sh + 1
        ow = (w + pad[2] + pad[3] - dw * (kw - 1) - 1) // sw + 1
        fan_in = c // groups * kh * kw
        params = {"weight": ParamSpec((out_channels, c // groups, kh, kw), "normal", 0.0,
                                      math.sqrt(2.0 / fan_in))}
        if bias:
            params["bias"] = ParamSpec((out_channels,), "normal", 0.0, 0.05)
        attrs = {"stride": (sh, sw), "padding": pad, "dilation": (dh, dw), "groups": groups,
                 "relu": relu}
        return self._add("conv2d", (x,), attrs, (n, out_channels, oh, ow), name, params)

    def linear(self, x: int, out_features: int, *, bias: bool = True, relu: bool = False,
               weight_scale: float = 1.0, name: str | None = None) -> int:
        """x · weightᵀ + bias over the last axis of a 2-D or 3-D input.

        ``weight_scale`` multiplies the initial weights and bias, e.g. to fold
        a constant factor of the model into the layer.
        """
        xs = self._f32(x, "linear")
        if len(xs) not in (2, 3):
            raise ValueError(f"linear input must be 2-D or 3-D, got {xs}")
        if out_features < 1:
            raise ValueError(f"linear out_features must be >= 1, got {out_features}")
        params = {"weight": ParamSpec((out_features, xs[-1]), "normal", 0.0,
                                      weight_scale * math.sqrt(2.0 / xs[-1]))}
        if bias:
            params["bias"] = ParamSpec((out_features,), "normal", 0.0, weight_scale * 0.05)
        return self._add("linear", (x,), {"relu": relu}, (*xs[:-1], out_features), name, params)

    def matmul(self, a: int, b: int, *, trans_b: bool = False, name: str | None = None) -> int:
        """a · b, or a · bᵀ with ``trans_b``; both 2-D, or 3-D with the same batch."""
        sa, sb = self._f32(a, "matmul"), self._f32(b, "matmul")
        if len(sa) != len(sb) or len(sa) not in (2, 3) or sa[:-2] != sb[:-2]:
            raise ValueError(f"matmul needs two 2-D or two 3-D inputs with one batch size, "
                             f"got {sa} and {sb}")
        kb, nb = (sb[-1], sb[-2]) if trans_b else (sb[-2], sb[-1])
        if sa[-1] != kb:
            raise ValueError(f"matmul inner dimensions differ: {sa} and {sb} "
                             f"(trans_b={trans_b})")
        return self._add("matmul", (a, b), {"trans_b": trans_b}, (*sa[:-1], nb), name)

    def embedding_bag(self, indices: int, rows: int, dim: int, *, mode: str = "sum",
                      name: str | None = None) -> int:
        """Sum or mean of ``table`` rows per bag; ``indices`` an int64 (batch, bag) input."""
        n = self._node(indices)
        if n.op != "input" or n.dtype != "int64" or len(n.shape) != 2:
            raise ValueError(f"embedding_bag indices must be a 2-D int64 input node, got "
                             f"{n.name!r} ({n.op}, {n.dtype}, {n.shape})")
        if mode not in ("sum", "mean"):
            raise ValueError(f"embedding_bag mode must be 'sum' or 'mean', got {mode!r}")
        if rows < 1 or dim < 1:
            raise ValueError(f"embedding_bag needs rows, dim >= 1, got {rows}, {dim}")
        # Rows of std 1/sqrt(dim * bag) make each pooled vector about unit length.
        per_bag = n.shape[1] if mode == "sum" else 1
        std = 1.0 / math.sqrt(dim * per_bag)
        params = {"table": ParamSpec((rows, dim), "normal", 0.0, std)}
        return self._add("embedding_bag", (indices,), {"mode": mode}, (n.shape[0], dim), name,
                         params)

    def eltwise(self, x: int, kind: str, *, name: str | None = None) -> int:
        """Element-wise activation: relu, relu6, sigmoid, tanh or gelu (erf form)."""
        xs = self._f32(x, "eltwise")
        if kind not in ELTWISE_FLOPS:
            raise ValueError(f"eltwise kind must be one of {sorted(ELTWISE_FLOPS)}, "
                             f"got {kind!r}")
        return self._add("eltwise", (x,), {"kind": kind}, xs, name)

    def add(self, a: int, b: int, *, relu: bool = False, name: str | None = None) -> int:
        """a + b (+ ReLU); b has a's rank and each of its dims is a's or 1."""
        sa, sb = self._f32(a, "add"), self._f32(b, "add")
        if len(sa) != len(sb) or any(q not in (p, 1) for p, q in zip(sa, sb, strict=True)):
            raise ValueError(f"add: second input {sb} does not broadcast to the first {sa}")
        return self._add("add", (a, b), {"relu": relu}, sa, name)

    def mul(self, a: int, b: int, *, name: str | None = None) -> int:
        """a * b element-wise, same shapes."""
        sa, sb = self._f32(a, "mul"), self._f32(b, "mul")
        if sa != sb:
            raise ValueError(f"mul needs equal shapes, got {sa} and {sb}")
        return self._add("mul", (a, b), {}, sa, name)

    def concat(self, xs: Sequence[int], *, axis: int = 1, name: str | None = None) -> int:
        """Concatenate along ``axis``; other dims must agree."""
        if not xs:
            raise ValueError("concat needs at least one input")
        shapes = [self._f32(x, "concat") for x in xs]
        rank = len(shapes[0])
        if not -rank <= axis < rank:
            raise ValueError(f"concat axis {axis} is out of range for rank {rank}")
        ax = axis % rank
        if any(len(s) != rank or s[:ax] + s[ax + 1:] != shapes[0][:ax] + shapes[0][ax + 1:]
               for s in shapes):
            raise ValueError(f"concat along axis {ax} needs equal other dims, got {shapes}")
        out = list(shapes[0])
        out[ax] = sum(s[ax] for s in shapes)
        return self._add("concat", xs, {"axis": ax}, tuple(out), name)

    def pool2d(self, x: int, kind: str, kernel: int | Sequence[int], *,
               stride: int | Sequence[int] | None = None, padding: int | Sequence[int] = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               name: str | None = None) -> int:
        """Max or average pooling of NCHW ``x`` with PyTorch's rules (stride = kernel
        by default; padding at most half the kernel)."""
        xs = self._f32(x, "pool2d")
        if len(xs) != 4:
            raise ValueError(f"pool2d input must be 4-D (N, C, H, W), got {xs}")
        if kind not in ("max", "avg"):
            raise ValueError(f"pool2d kind must be 'max' or 'avg', got {kind!r}")
        k = _int_tuple("kernel", kernel, 2)
        s = k if stride is None else _int_tuple("stride", stride, 2)
        p = _padding4(padding)
        if min(*k, *s) < 1 or min(p) < 0 or max(p[:2]) > k[0] // 2 or max(p[2:]) > k[1] // 2:
            raise ValueError(f"pool2d needs kernel, stride >= 1 and 0 <= padding <= kernel/2, "
                             f"got kernel {k}, stride {s}, padding {p}")
        oh = _pool_out(xs[2], k[0], s[0], p[0], p[1], ceil_mode)
        ow = _pool_out(xs[3], k[1], s[1], p[2], p[3], ceil_mode)
        attrs = {"kind": kind, "kernel": k, "stride": s, "padding": p, "ceil_mode": ceil_mode,
                 "count_include_pad": count_include_pad}
        return self._add("pool2d", (x,), attrs, (xs[0], xs[1], oh, ow), name)

    def global_avg_pool(self, x: int, *, name: str | None = None) -> int:
        """Mean over H and W: (N, C, H, W) -> (N, C)."""
        xs = self._f32(x, "global_avg_pool")
        if len(xs) != 4:
            raise ValueError(f"global_avg_pool input must be 4-D (N, C, H, W), got {xs}")
        return self._add("global_avg_pool", (x,), {}, xs[:2], name)

    def batch_norm(self, x: int, *, eps: float = 1e-5, scale: bool = True,
                   scale_range: tuple[float, float] = (0.75, 1.25),
                   name: str | None = None) -> int:
        """Inference batch norm over axis 1; ``scale=False`` leaves the scale out (= 1).

        The scale starts uniform in ``scale_range``; a residual branch's last
        batch norm takes a small one (the idea of zero_init_residual) so that
        activations stay O(1) over many blocks.
        """
        xs = self._f32(x, "batch_norm")
        if len(xs) < 2:
            raise ValueError(f"batch_norm input needs a channel axis 1, got {xs}")
        if not 0 < scale_range[0] <= scale_range[1]:
            raise ValueError(f"batch_norm scale_range must be 0 < low <= high, "
                             f"got {scale_range}")
        c = (xs[1],)
        params = {"mean": ParamSpec(c, "normal", 0.0, 0.1),
                  "var": ParamSpec(c, "uniform", 0.75, 1.25)}
        if scale:
            params["scale"] = ParamSpec(c, "uniform", *scale_range)
        params["shift"] = ParamSpec(c, "normal", 0.0, 0.1)
        return self._add("batch_norm", (x,), {"eps": float(eps)}, xs, name, params)

    def layer_norm(self, x: int, *, eps: float = 1e-5, name: str | None = None) -> int:
        """Normalise over the last axis, then scale and shift."""
        xs = self._f32(x, "layer_norm")
        d = (xs[-1],)
        params = {"scale": ParamSpec(d, "uniform", 0.5, 1.5),
                  "shift": ParamSpec(d, "normal", 0.0, 0.1)}
        return self._add("layer_norm", (x,), {"eps": float(eps)}, xs, name, params)

    def softmax(self, x: int, *, axis: int = -1, name: str | None = None) -> int:
        xs = self._f32(x, "softmax")
        if not -len(xs) <= axis < len(xs):
            raise ValueError(f"softmax axis {axis} is out of range for shape {xs}")
        return self._add("softmax", (x,), {"axis": axis % len(xs)}, xs, name)

    def reshape(self, x: int, shape: Sequence[int], *, name: str | None = None) -> int:
        """The same elements in a new full shape (one dim may be -1)."""
        xs = self._f32(x, "reshape")
        want = [int(d) for d in shape]
        total = math.prod(xs)
        if want.count(-1) > 1 or any(d < 1 and d != -1 for d in want):
            raise ValueError(f"reshape to {tuple(want)}: at most one -1, others >= 1")
        if -1 in want:
            rest = -math.prod(want)
            if rest == 0 or total % rest:
                raise ValueError(f"cannot reshape {xs} to {tuple(want)}")
            want[want.index(-1)] = total // rest
        if math.prod(want) != total:
            raise ValueError(f"cannot reshape {xs} ({total} elements) to {tuple(want)}")
        return self._add("reshape", (x,), {"shape": tuple(want)}, tuple(want), name)

    def transpose(self, x: int, perm: Sequence[int], *, name: str | None = None) -> int:
        xs = self._f32(x, "transpose")
        p = tuple(int(i) for i in perm)
        if sorted(p) != list(range(len(xs))):
            raise ValueError(f"transpose perm {p} is not a permutation of the axes of {xs}")
        return self._add("transpose", (x,), {"perm": p}, tuple(xs[i] for i in p), name)

    def tril_flatten(self, x: int, *, name: str | None = None) -> int:
        """(B, n, n) -> (B, n(n-1)/2): entries (i, j), j < i, row by row."""
        xs = self._f32(x, "tril_flatten")
        if len(xs) != 3 or xs[1] != xs[2] or xs[1] < 2:
            raise ValueError(f"tril_flatten needs (B, n, n) with n >= 2, got {xs}")
        n = xs[1]
        return self._add("tril_flatten", (x,), {}, (xs[0], n * (n - 1) // 2), name)
