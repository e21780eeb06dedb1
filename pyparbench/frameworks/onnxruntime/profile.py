"""ONNX Runtime's profiler output charged to the graph's op types."""

from __future__ import annotations

import json
from typing import Any

from pyparbench.frameworks._common import Profile, aggregate, node_of_scope
from pyparbench.graph import Graph

__all__ = ["charge", "read_profile"]

# ONNX Runtime's kernel op name -> graph op type, where the node's own is not
# the one the kernel computes (fusions).
_FUSED = {"FusedConv": "conv2d", "Conv": "conv2d", "NhwcFusedConv": "conv2d",
          "FusedGemm": "linear", "Gemm": "linear", "FusedMatMul": "matmul", "MatMul": "matmul",
          "QuickGelu": "eltwise", "Gelu": "eltwise", "BiasGelu": "eltwise",
          "LayerNormalization": "layer_norm", "SkipLayerNormalization": "layer_norm",
          "SkipSimplifiedLayerNormalization": "layer_norm"}


def charge(graph: Graph, name: str, kind: str) -> str:
    """The graph op type an ONNX Runtime kernel is charged to. A fused node
    keeps one of its nodes' names (often the activation's), so a kernel type
    that says what it computes decides first: a convolution or matrix
    product is charged to that heavy op, whatever it absorbed."""
    if kind == "Identity":
        return "other"
    nid = node_of_scope(name)
    op = graph.nodes[nid].op if nid is not None and nid < len(graph.nodes) else "other"
    fused = _FUSED.get(kind)
    if fused in ("linear", "matmul") and op in ("linear", "matmul"):
        return op  # a 3-D linear is a MatMul too
    return fused if fused is not None else op


def read_profile(path: str, graph: Graph) -> Profile:
    """Node kernel times per iteration from a profile file that ONNX Runtime
    wrote (``InferenceSession.end_profiling``); its first run, which plans
    memory, is left out."""
    with open(path) as fh:
        events: list[dict[str, Any]] = json.load(fh)
    windows = sorted((float(e["ts"]) * 1e3, float(e["ts"] + e["dur"]) * 1e3)
                     for e in events if e.get("name") == "model_run")[1:]
    charged = []
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        kind = e.get("args", {}).get("op_name", "")
        charged.append((float(e["ts"]) * 1e3, charge(graph, e["name"], kind), kind,
                        float(e.get("dur", 0.0)) * 1e3))
    return aggregate(charged, windows)
