"""ONNX Runtime's profiler output charged to the graph's op types.

A translated graph's nodes carry their graph node's id in their names
(:func:`~pyparbench.frameworks._common.scope_name`). A user's file run as it
is (:mod:`pyparbench.models.files`) has its own names: each of its nodes is
charged to the graph node the importer made of it (named after the ONNX
node's output), else by its ONNX op type (:func:`file_ops`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyparbench.frameworks._common import Profile, aggregate, node_of_scope
from pyparbench.graph import Graph

__all__ = ["ONNX_OPS", "charge", "charge_file", "file_ops", "read_profile"]

_KERNEL = "_kernel_time"
# ONNX Runtime's kernel op name -> graph op type, where the node's own is not
# the one the kernel computes (fusions).
_FUSED = {"FusedConv": "conv2d", "Conv": "conv2d", "NhwcFusedConv": "conv2d",
          "FusedGemm": "linear", "Gemm": "linear", "FusedMatMul": "matmul", "MatMul": "matmul",
          "QuickGelu": "eltwise", "Gelu": "eltwise", "BiasGelu": "eltwise",
          "LayerNormalization": "layer_norm", "SkipLayerNormalization": "layer_norm",
          "SimplifiedLayerNormalization": "rms_norm",
          "SkipSimplifiedLayerNormalization": "rms_norm", "RotaryEmbedding": "rotary",
          "GroupQueryAttention": "attention", "MultiHeadAttention": "attention",
          "Attention": "attention",
          # Its int8 kernels (QDQ groups it fuses, a QOperator file's ops,
          # dynamic quantization's products).
          "QLinearConv": "quantized_conv2d", "QLinearMatMul": "quantized_linear",
          "QGemm": "quantized_linear", "ConvInteger": "dynamic_quantized_conv2d",
          "MatMulInteger": "dynamic_quantized_linear",
          "DynamicQuantizeMatMul": "dynamic_quantized_linear",
          "MatMulIntegerToFloat": "dynamic_quantized_linear"}
# Graph ops whose ONNX form holds MatMuls: a MatMul kernel stays charged to them.
_PRODUCTS = ("linear", "matmul", "attention")


# ONNX op type -> the graph op type the importer maps it to, where no graph
# node is named after the ONNX node's output (it was folded into another, or
# ONNX Runtime made the node).
ONNX_OPS = {"Conv": "conv2d", "Gemm": "linear", "MatMul": "linear", "Add": "add",
            "Sub": "add", "Mul": "batch_norm", "Div": "batch_norm",
            "BatchNormalization": "batch_norm", "Relu": "eltwise", "Clip": "eltwise",
            "Sigmoid": "eltwise", "Tanh": "eltwise", "Gelu": "eltwise", "Erf": "eltwise",
            "HardSigmoid": "eltwise", "HardSwish": "eltwise", "MaxPool": "pool2d",
            "AveragePool": "pool2d", "GlobalAveragePool": "global_avg_pool",
            "GlobalMaxPool": "pool2d", "ReduceMean": "global_avg_pool",
            "LayerNormalization": "layer_norm", "Softmax": "softmax", "Concat": "concat",
            "RMSNormalization": "rms_norm", "SimplifiedLayerNormalization": "rms_norm",
            "RotaryEmbedding": "rotary", "Attention": "attention",
            "Transpose": "transpose", "Gather": "embedding_bag", "Reshape": "reshape",
            "Flatten": "reshape", "Squeeze": "reshape", "Unsqueeze": "reshape",
            "QuantizeLinear": "fake_quantize", "DequantizeLinear": "fake_quantize",
            "DynamicQuantizeLinear": "dynamic_quantized_linear",
            # ONNX Runtime's own layout changes (its NCHWc blocked convolutions).
            "ReorderInput": "reorder", "ReorderOutput": "reorder"}


def file_ops(nodes: Sequence[tuple[str, str, Sequence[str]]], graph: Graph) -> dict[str, str]:
    """ONNX node name -> graph op type, for ``nodes`` (name, op type,
    outputs) of the file ``graph`` was imported from: the op of the graph
    node named after one of its outputs, else :data:`ONNX_OPS`' guess."""
    by_name = {n.name: n.op for n in graph.nodes}
    out: dict[str, str] = {}
    for name, op_type, outputs in nodes:
        if not name:  # ONNX Runtime names it itself: charged by op type
            continue
        op = next((by_name[o] for o in outputs if o in by_name), None)
        out[name] = op if op is not None else ONNX_OPS.get(op_type, "other")
    return out


def charge_file(ops: Mapping[str, str], name: str, kind: str) -> str:
    """The graph op type an ONNX Runtime kernel of a file's node is charged
    to (``ops``: :func:`file_ops`); a fused kernel by what it computes."""
    if kind == "Identity":
        return "other"
    node = name[:-len(_KERNEL)] if name.endswith(_KERNEL) else name
    op = ops.get(node, ONNX_OPS.get(kind, "other"))
    fused = _FUSED.get(kind)
    if fused in ("linear", "matmul") and op in _PRODUCTS:
        return op
    return fused if fused is not None else op


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
    if fused in ("linear", "matmul") and op in _PRODUCTS:
        return op  # a 3-D linear is a MatMul too, attention two
    return fused if fused is not None else op


def read_profile(path: str, graph: Graph, file_nodes: Mapping[str, str] | None = None
                 ) -> Profile:
    """Node kernel times per iteration from a profile file that ONNX Runtime
    wrote (``InferenceSession.end_profiling``); its first run, which plans
    memory, is left out. ``file_nodes``: for a user's file run as it is,
    its node names' graph op types (:func:`file_ops`)."""
    with open(path) as fh:
        events: list[dict[str, Any]] = json.load(fh)
    windows = sorted((float(e["ts"]) * 1e3, float(e["ts"] + e["dur"]) * 1e3)
                     for e in events if e.get("name") == "model_run")[1:]
    charged = []
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith(_KERNEL):
            continue
        kind = e.get("args", {}).get("op_name", "")
        op = (charge(graph, e["name"], kind) if file_nodes is None
              else charge_file(file_nodes, e["name"], kind))
        charged.append((float(e["ts"]) * 1e3, op, kind, float(e.get("dur", 0.0)) * 1e3))
    return aggregate(charged, windows)
