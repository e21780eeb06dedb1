"""OpenVINO's performance counters charged to the graph's op types.

``InferRequest.get_profiling_info`` lists, after an inference, each node
the CPU plugin executed with its time (a node fused into another is
NOT_RUN, its work in the node it joined). A translated graph's nodes carry
their graph node's id in their names
(:func:`~pyparbench.frameworks._common.scope_name`), which OpenVINO's ONNX
front end keeps; a user's file run as it is keeps its ONNX names, each
charged to the graph node the importer made of it (named after the ONNX
node's output), else by its ONNX op type, as ONNX Runtime's profile is
(:func:`pyparbench.frameworks.onnxruntime.profile.file_ops`). Nodes
OpenVINO adds itself (layout reorders, input and output conversions) are
charged to ``reorder`` or ``other``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyparbench.frameworks._common import Profile, aggregate, node_of_scope
from pyparbench.frameworks.onnxruntime.profile import file_ops
from pyparbench.graph import Graph

__all__ = ["EXECUTED", "Counter", "FileNodes", "charge", "file_nodes", "read_counters"]

EXECUTED = "Status.EXECUTED"
# OpenVINO node type -> graph op type, where the node's own is not the one its
# kernel computes (fusions keep the first node's name).
_FUSED = {"Convolution": "conv2d", "GroupConvolution": "conv2d", "FullyConnected": "linear",
          "MatMul": "matmul", "MVN": "layer_norm", "RMS": "rms_norm",
          "ScaledDotProductAttention": "attention", "RoPE": "rotary", "Reorder": "reorder",
          "Parameter": "other", "Result": "other", "Convert": "other"}
# ONNX node name or output name -> graph op type, for a user's file.
FileNodes = Mapping[str, str]


def file_nodes(path: str, graph: Graph) -> dict[str, str]:
    """Graph op type of each ONNX node of the file ``graph`` was imported
    from, by its name and by each of its outputs' names (OpenVINO names a
    node after either)."""
    import onnx

    proto = onnx.load(path, load_external_data=False)
    nodes = [(n.name, n.op_type, list(n.output)) for n in proto.graph.node]
    by_name = file_ops(nodes, graph)
    out: dict[str, str] = {}
    for name, _, outputs in nodes:
        for o in outputs:
            if name in by_name:
                out[o] = by_name[name]
    return {**out, **by_name}


def _file_op(nodes: FileNodes, name: str) -> str | None:
    """The op of a file's node OpenVINO named ``name`` (its own suffixes,
    ``:out``, ``/sink_port_0`` or ``/WithoutBiases``, taken off)."""
    for candidate in (name, name.split("/")[0], name.rsplit(":", 1)[0]):
        if candidate in nodes:
            return nodes[candidate]
    return None


def charge(graph: Graph, name: str, kind: str, nodes: FileNodes | None = None) -> str:
    """The graph op type an executed OpenVINO node is charged to: its
    kernel type where that says what it computes (a convolution or a
    matrix product whatever it absorbed), else the graph node its name
    comes from."""
    fused = _FUSED.get(kind)
    if nodes is None:
        nid = node_of_scope(name)
        op = graph.nodes[nid].op if nid is not None and nid < len(graph.nodes) else None
    else:
        op = _file_op(nodes, name)
    if fused in ("linear", "matmul") and op in ("linear", "matmul", "attention"):
        return str(op)  # a 3-D linear is a MatMul too, attention two
    if fused is not None:
        return fused
    return op if op is not None else "other"


Counter = tuple[str, str, str, float, str]


def read_counters(before: Sequence[Counter], after: Sequence[Counter], iterations: int,
                  walls: Sequence[float], graph: Graph, nodes: FileNodes | None = None
                  ) -> Profile:
    """Node times per iteration from one request's counters (per node: name,
    node type, exec type, ns, status) read ``before`` and ``after`` its
    ``iterations`` profiled inferences, and their wall times (``walls``, ns).

    OpenVINO's counters hold each node's mean time over every inference the
    request has run, in whole microseconds: the difference of the totals
    (mean times runs) gives the profiled inferences' own mean, the first
    run (which plans memory) left out, to within a microsecond per node (a
    node faster than that may come out at 0, never below).
    """
    if iterations < 1 or len(walls) != iterations:
        raise ValueError(f"{iterations} profiled iterations with {len(walls)} wall times")
    runs = len(walls) + 1
    first = {name: ns for name, _, _, ns, _ in before}
    events: list[tuple[float, str, str, float]] = []
    for name, kind, exec_type, ns, status in after:
        if status != EXECUTED:
            continue
        mean = max(0.0, (ns * runs - first.get(name, 0.0)) / iterations)
        events.append((0.0, charge(graph, name, kind, nodes), f"{kind}:{exec_type}", mean))
    walls_sorted = sorted(walls)
    return aggregate(events, [(0.0, walls_sorted[len(walls_sorted) // 2])])
