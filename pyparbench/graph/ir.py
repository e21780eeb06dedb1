"""Graph IR of model-like networks: nodes, their parameters, and the graph.

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
``slice``                 [start] rows start .. start + batch - 1 of its first input along
                          axis 0 (a view in the native plan); further inputs only order it
                          after those nodes (set by the micro-batch pass)
``tril_flatten``          (B, n, n) -> (B, n(n-1)/2): the strictly lower triangle, row
                          by row (DLRM's dot interaction without self-interaction)
========================  ==========================================================

The builder is :mod:`pyparbench.graph.builder`, the analysis (FLOPs, depth,
widths) :mod:`pyparbench.graph.analysis`, the op list :mod:`pyparbench.graph.opdefs`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from pyparbench.graph._jsonable import jsonable
from pyparbench.graph.analysis import GraphAnalysis
from pyparbench.graph.opdefs import HEAVY_OPS, OPS
from pyparbench.memory import aligned_copy, aligned_empty

__all__ = ["F32Array", "Graph", "Node", "ParamSpec", "Params", "Shape"]

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
    were made, or in what order. Arrays start on 64-byte boundaries. Arrays are cached and read-only (they are
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
            # Made on cache-line boundaries (numpy aligns to 16 bytes): an
            # embedding table's rows of 16 floats then each fill one line,
            # which the gather kernel reads fastest.
            if spec.init == "normal":
                arr = aligned_empty(spec.shape, np.float32)
                rng.standard_normal(dtype=np.float32, out=arr)
                arr *= np.float32(spec.b)
                arr += np.float32(spec.a)
            else:
                arr = aligned_copy(rng.uniform(spec.a, spec.b, size=spec.shape).astype(np.float32))
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
            "attrs": jsonable(self.attrs),
            "params": {k: list(s) for k, s in self.params.shapes.items()},
            "shape": list(self.shape),
            "dtype": self.dtype,
        }





# --------------------------------------------------------------------- graph


class Graph(GraphAnalysis):
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
                # Valid rows of every table they index (any value when none does).
                rows = min((self.nodes[c].params.shapes["table"][0] for c in self.consumers[i]
                            if self.nodes[c].op == "embedding_bag"), default=1)
                out[n.name] = rng.integers(0, rows, size=n.shape, dtype=np.int64)
            else:
                x = rng.uniform(-1.0, 1.0, size=n.shape).astype(np.float32)
                x[x == 0] = 0.5
                out[n.name] = x
        return out

    def to_dict(self) -> dict[str, Any]:
        """The graph's structure (no weights) as JSON-able data."""
        return {
            "name": self.name,
            "meta": jsonable(self.meta),
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "nodes": [n.to_dict() for n in self.nodes],
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

