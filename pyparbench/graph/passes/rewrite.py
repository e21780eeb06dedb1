"""The machinery every pass rewrites with: parameters computed from other
nodes' parameters, the emitter that renumbers a rewritten graph, and whether
a node's value may disappear into the node that reads it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from pyparbench.graph.ir import Graph
from pyparbench.graph.node import F32Array, Node, Params, ParamSpec, Shape
from pyparbench.memory import aligned_copy

__all__ = ["DerivedParams", "Emitter", "fusable", "has_activation"]


class DerivedParams(Params):
    """Parameters computed from other nodes' parameters (a folded conv's
    weights), made together on first access, read-only like any Params."""

    def __init__(self, shapes: Mapping[str, Shape],
                 make: Callable[[], Mapping[str, np.ndarray]]) -> None:
        # The init fields are unused: the arrays come from `make`.
        super().__init__({k: ParamSpec(tuple(s), "normal", 0.0, 0.0) for k, s in shapes.items()},
                         0, 0)
        self._make = make

    def __getitem__(self, key: str) -> F32Array:
        if key not in self._specs:
            raise KeyError(key)
        if key not in self._made:
            for k, arr in self._make().items():
                a = aligned_copy(np.asarray(arr, dtype=np.float32))
                a.flags.writeable = False
                self._made[k] = a
        return self._made[key]


class Emitter:
    """Builds the rewritten graph: nodes in a valid order, ids renumbered."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def emit(self, op: str, inputs: tuple[int, ...], attrs: dict[str, Any], params: Params,
             shape: Shape, dtype: str, name: str) -> int:
        """Append a node; its id (its position) is returned."""
        self.nodes.append(Node(len(self.nodes), op, inputs, attrs, params, shape, dtype, name))
        return len(self.nodes) - 1

    def copy(self, node: Node, inputs: Iterable[int], **attrs: Any) -> int:
        return self.emit(node.op, tuple(inputs), {**node.attrs, **attrs}, node.params,
                         node.shape, node.dtype, node.name)

    def graph(self, like: Graph, outputs: Sequence[int]) -> Graph:
        return Graph(like.name, self.nodes, outputs, like.meta)


def fusable(g: Graph, producer: Node, consumer: Node) -> bool:
    """The consumer is the producer's only reader and the producer's value is
    no graph output: the producer's value can disappear into a fused node."""
    return g.consumers[producer.id] == (consumer.id,) and producer.id not in g.outputs


def has_activation(n: Node) -> bool:
    """The node applies an activation already (a ReLU flag or a fused one)."""
    return bool(n.attrs.get("relu")) or bool(n.attrs.get("activation"))

