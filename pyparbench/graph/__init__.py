"""Graph IR of model-like networks, its builder and its analysis.

* :mod:`~pyparbench.graph.opdefs` — the op vocabulary, listed once;
* :mod:`~pyparbench.graph.node` — :class:`Node`, :class:`Params`, :class:`ParamSpec`;
* :mod:`~pyparbench.graph.ir` — :class:`Graph`;
* :mod:`~pyparbench.graph.analysis` — FLOPs, bytes, depth, widths, work / span;
* :mod:`~pyparbench.graph.builder` — :class:`GraphBuilder`;
* :mod:`~pyparbench.graph.onnx` — :func:`from_onnx`, a user's ONNX file as a Graph: loading
  and checks, the importer's state and folding, converters by op family;
* :mod:`~pyparbench.graph.passes` — the optimisation passes run at compile time.

A graph is compiled into a native plan by :func:`pyparbench.executor.compile_graph`.
"""

from typing import TYPE_CHECKING, Any

from pyparbench.graph._jsonable import jsonable
from pyparbench.graph.analysis import EXACT_WIDTH_LIMIT, NodeStats
from pyparbench.graph.builder import GraphBuilder
from pyparbench.graph.ir import Graph
from pyparbench.graph.node import ArrayParams, LazyParams, Node, Params, ParamSpec
from pyparbench.graph.opdefs import (
    DTYPE_BYTES,
    ELTWISE_FLOPS,
    FUSABLE_ACTIVATIONS,
    HEAVY_OPS,
    NATIVE_ATTRS,
    NO_KERNEL_OPS,
    OPS,
    PASS_ATTRS,
)

if TYPE_CHECKING:
    from pyparbench.graph.onnx.api import from_onnx
else:
    def __getattr__(name: str) -> Any:
        # onnx takes seconds to import: only a file's import pays for it,
        # not every process that builds or runs a graph.
        if name == "from_onnx":
            from pyparbench.graph.onnx.api import from_onnx  # noqa: PLC0415 (heavy: onnx)

            return from_onnx
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "DTYPE_BYTES",
    "ELTWISE_FLOPS",
    "EXACT_WIDTH_LIMIT",
    "FUSABLE_ACTIVATIONS",
    "HEAVY_OPS",
    "NATIVE_ATTRS",
    "NO_KERNEL_OPS",
    "OPS",
    "PASS_ATTRS",
    "ArrayParams",
    "Graph",
    "GraphBuilder",
    "LazyParams",
    "Node",
    "NodeStats",
    "ParamSpec",
    "Params",
    "from_onnx",
    "jsonable",
]
