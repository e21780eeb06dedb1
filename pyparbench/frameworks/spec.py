"""Graph specs: how a graph travels to a framework's child process.

A child builds its graph itself from a JSON-able spec, so no weights cross
the process boundary:

* a model reference, ``{"kind": "model", "model": "resnet50", "batch": 1,
  "seed": 0, "kwargs": {"image_size": 64}}`` (:class:`ModelRef`), built with
  :func:`pyparbench.models.build`; a user's ONNX file is a model named
  ``my.onnx@<sha256[:12]>``, which the child loads by the path its
  environment maps that name to (:mod:`pyparbench.models.files`);
* any :class:`~pyparbench.graph.Graph`, serialised node by node with its
  parameters' shapes, initialisers and seed (:func:`graph_to_spec`); the
  child remakes every parameter array bit for bit, since each one comes from
  its own generator seeded with (graph seed, node id, position).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyparbench.graph import Graph, Node, Params, ParamSpec
from pyparbench.graph._jsonable import jsonable
from pyparbench.models import build
from pyparbench.models.files import is_file_key
from pyparbench.models.modules import attached_module

__all__ = ["NO_MODULE", "GraphLike", "ModelRef", "build_graph", "describe", "graph_to_spec",
           "not_applicable", "spec_batch", "to_spec"]

# Why TensorFlow and PyTorch do not run an ONNX file: their graph is
# translated from the module the file was exported from, which the file is not.
NO_MODULE = "not applicable: a file (no original module)"
# The frameworks that run a translation of the graph (ONNX Runtime runs a file as it is).
_TRANSLATED = ("tensorflow", "torch")


@dataclass(frozen=True)
class ModelRef:
    """A registered model at a batch size, with its builder's keyword arguments."""

    model: str
    batch: int
    seed: int = 0
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def to_spec(self) -> dict[str, Any]:
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise ValueError(f"batch must be an integer >= 1, got {self.batch!r}")
        return {"kind": "model", "model": self.model, "batch": self.batch, "seed": self.seed,
                "kwargs": dict(self.kwargs)}


GraphLike = ModelRef | Graph | Mapping[str, Any]


def _seed_of(params: Params) -> int:
    # Params keeps the graph seed to itself; the spec must carry it so that
    # the child remakes the same arrays.
    return int(params._seed)


def graph_to_spec(graph: Graph) -> dict[str, Any]:
    """A JSON-able spec of any graph whose parameters are seeded (as every
    builder makes them): structure, attributes, parameter initialisers and
    seeds (no arrays). ValueError for derived parameters (an optimised graph)."""
    nodes = []
    for n in graph.nodes:
        if type(n.params) is not Params:
            # Arrays computed from other nodes' (a folded batch norm): no seed remakes them.
            raise ValueError(f"node {n.name!r} of graph {graph.name!r} has derived parameters "
                             "(an optimised graph): pass the graph as built")
        nodes.append({
            "op": n.op, "name": n.name, "inputs": list(n.inputs), "attrs": jsonable(n.attrs),
            "shape": list(n.shape), "dtype": n.dtype, "seed": _seed_of(n.params),
            "params": {k: [list(s.shape), s.init, s.a, s.b] for k, s in n.params.specs.items()},
        })
    return {"kind": "graph", "name": graph.name, "nodes": nodes, "outputs": list(graph.outputs),
            "meta": jsonable(graph.meta)}




def _tuples(v: Any) -> Any:
    """Lists back to tuples (the builders' attribute types)."""
    if isinstance(v, list):
        return tuple(_tuples(e) for e in v)
    if isinstance(v, dict):
        return {k: _tuples(e) for k, e in v.items()}
    return v


def to_spec(graph: GraphLike) -> dict[str, Any]:
    """The spec of a :class:`ModelRef`, a :class:`Graph` or an existing spec.

    Raises
    ------
    TypeError
        Anything else.
    ValueError
        A mapping that is not a spec (no ``kind`` "model" or "graph").
    """
    if isinstance(graph, ModelRef):
        return graph.to_spec()
    if isinstance(graph, Graph):
        return graph_to_spec(graph)
    if isinstance(graph, Mapping):
        if graph.get("kind") not in ("model", "graph"):
            raise ValueError(f"a graph spec needs kind 'model' or 'graph', got {dict(graph)!r:.200}")
        return dict(graph)
    raise TypeError(f"expected a ModelRef, a Graph or a graph spec, got {graph!r:.200}")


def build_graph(spec: Mapping[str, Any]) -> Graph:
    """The graph a spec describes (builds a model, or remakes a serialised graph)."""
    if spec["kind"] == "model":
        return build(spec["model"], int(spec["batch"]), seed=int(spec.get("seed", 0)),
                     **dict(spec.get("kwargs", {})))
    nodes = []
    for i, d in enumerate(spec["nodes"]):
        params = Params({k: ParamSpec(tuple(int(s) for s in shape), init, float(a), float(b))
                         for k, (shape, init, a, b) in d["params"].items()},
                        int(d["seed"]), i)
        nodes.append(Node(i, d["op"], tuple(int(j) for j in d["inputs"]), _tuples(d["attrs"]),
                          params, tuple(int(s) for s in d["shape"]), d["dtype"], d["name"]))
    return Graph(spec["name"], nodes, spec["outputs"], spec.get("meta"))


def describe(spec: Mapping[str, Any]) -> str:
    """A short description: 'resnet50 batch 1 (image_size=64)' or 'graph tiny-chain (401 nodes)'."""
    if spec.get("kind") == "model":
        kw = dict(spec.get("kwargs", {}))
        if spec.get("seed", 0):
            kw["seed"] = spec["seed"]
        extra = f" ({', '.join(f'{k}={v}' for k, v in kw.items())})" if kw else ""
        return f"{spec['model']} batch {spec['batch']}{extra}"
    nodes = spec.get("nodes", [])
    return f"graph {spec.get('name', '?')} ({len(nodes)} nodes)"


def not_applicable(framework: str, spec: Mapping[str, Any]) -> str | None:
    """Why ``framework`` cannot run ``spec`` (:data:`NO_MODULE` for a model
    that is an ONNX file in TensorFlow, or in PyTorch without the module it
    was exported from, :func:`pyparbench.models.modules.attach_module`), or
    None."""
    model = str(spec.get("model", ""))
    if framework in _TRANSLATED and spec.get("kind") == "model" and is_file_key(model):
        if framework == "torch" and attached_module(model) is not None:
            return None
        return NO_MODULE
    return None


def spec_batch(spec: Mapping[str, Any]) -> int:
    """The batch size of a spec (a serialised graph: its first input's leading dim)."""
    if spec["kind"] == "model":
        return int(spec["batch"])
    for d in spec["nodes"]:
        if d["op"] == "input":
            return int(d["shape"][0])
    return 1

