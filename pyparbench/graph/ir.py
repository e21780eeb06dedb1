"""Graph IR of model-like networks: the graph, and the op vocabulary of its nodes.

A :class:`Graph` is a list of :class:`Node` in topological order (a node's
inputs always have smaller ids). Nodes are built with :class:`GraphBuilder`,
which infers and checks every output shape and gives each parameter a seeded
random initialiser. Nodes and their lazily made parameters are defined in
:mod:`pyparbench.graph.node` (re-exported here).

Op vocabulary (attributes in brackets; all tensors float32 except the int64
index inputs of ``embedding_bag``, ``position_ids`` and their reshapes):

========================  ==========================================================
``input``                 [dtype] a named graph input
``constant``              param ``value``: a fixed tensor that is no parameter of an op (a
                          model file's class token concatenated to the patches)
``conv2d``                [stride (h, w), padding (t, b, l, r), dilation (h, w), groups,
                          relu] NCHW; params ``weight`` OIHW (I = C / groups), ``bias``?
``linear``                [relu] x · weightᵀ + bias on the last axis of a 2-D or 3-D
                          input; params ``weight`` (out, in), ``bias``?
``matmul``                [trans_b] a · b (or a · bᵀ) of two nodes, 2-D or batched 3-D
``embedding_bag``         [mode sum|mean] params ``table`` (rows, dim); one input, int64
                          indices (batch, bag_size) -> (batch, dim): an input or its reshape
``eltwise``               [kind relu|relu6|sigmoid|tanh|gelu|gelu_tanh|swish|hardswish]; gelu
                          is the exact (erf) one, gelu_tanh its tanh approximation, swish
                          x sigmoid x, hardswish x relu6(x + 3) / 6
``add``                   [relu] a + b; b has a's rank and broadcasts where its size is 1
``mul``                   a * b; b has a's rank and broadcasts where its size is 1
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
``position_ids``          [pad_id, offset] int64 ids (batch, seq) -> int64 positions of
                          the same shape: offset + the count of ids other than pad_id up
                          to and including j where ids[b, j] != pad_id, else offset
                          (RoBERTa's padding-aware positions)
``rms_norm``              [eps] x / sqrt(mean(x^2) + eps) * scale over the last axis;
                          param scale
``rotary``                x (..., S, D) * cos + rotate_half(x) * sin; params cos, sin
                          (S, D); rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2]);
                          with a second input, an int64 (1,) cache length L read at run
                          time, the tables are a context's (C, D) and rows L .. L + S - 1
                          are used; with an int64 (B, S) positions input instead (x
                          (B, ..., S, D)), params inv_freq (D/2,) and scaling (1,): row
                          (b, s) takes cos / sin of float32(positions[b, s]) * inv_freq
                          (float32, in both halves) times scaling; or, with positions
                          and params cos, sin (C, D), their rows at the positions
``attention``             [causal, scale] softmax(scale q kᵀ + mask) v of q (B, H, Sq, D),
                          k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv), an optional 4-D additive
                          mask that broadcasts into (B, H, Sq, Sk); H a multiple of Hkv
                          (grouped-query: head h reads key / value head h // (H / Hkv));
                          causal hides keys j > i + Sk - Sq; a row that sees no key is 0
``decode_attention``      [scale, causal_fill] a decode step's attention: q (B, H, S, D)
                          against the past keys / values (B, Hkv, P, D / Dv) followed by
                          the S new ones (B, Hkv, S, D / Dv), inputs in that order (q, new
                          k, new v, past k, past v, mask?); query i sees keys j <= P + i; the
                          optional additive mask broadcasts into (B, H, S, P + S); the
                          present keys / values (the past and the new rows, one copy) are
                          concat nodes of their own, which the attention does not wait for;
                          with an int64 (1,) sixth input L (a cache's length, read at run
                          time, no mask) past k / v are a cache (B, Hkv, C, D / Dv) kept
                          across runs: the new rows are written into it at L in place and
                          query i sees keys j <= L + i
``glu``                   [kind swish|gelu|gelu_tanh] act(gate) * up of two inputs of one
                          shape (SwiGLU, GeGLU)
``quantized_conv2d``      [conv2d's, x_dtype uint8|int8, out_dtype float32|uint8|int8] int8
                          conv2d, float32 in and out: q = clip(round_half_even(x / x_scale)
                          + x_zero_point) (params x_scale, x_zero_point of shape (1,));
                          params ``weight`` OIHW whole numbers in [-128, 127],
                          ``weight_scale`` (O,), ``bias``?; y = Σ (q - x_zero_point) ·
                          weight, exact, times x_scale · weight_scale[o], + bias, ReLU;
                          an integer out_dtype requantises y onto out_scale /
                          out_zero_point and dequantises it ((q' - zero point) · scale)
``quantized_linear``      [relu, x_dtype, out_dtype] the same over the last axis of an
                          input of any rank >= 2; weight (out, in)
``fake_quantize``         [x_dtype] x rounded onto its grid (params x_scale, x_zero_point):
                          ONNX's QuantizeLinear, then DequantizeLinear; with two
                          inputs (a residual add fused by graph.passes.int8_values),
                          their float32 sum rounded; with param ``table`` (256,) (a
                          SiLU gate, graph.passes.int8_gates) its input's grid bytes
                          look up the value rounded, table[byte]
``dynamic_quantized_      [conv2d's geometry] x quantised to uint8 on each run's grid, as
conv2d``                  ONNX's DynamicQuantizeLinear: lo = min(0, min x), hi = max(0,
                          max x), s = (hi - lo) / 255 (float32), z = round(clip(-lo / s,
                          0, 255)), q = clip(round(x / s) + z, 0, 255) (half to even);
                          params ``weight`` OIHW whole numbers of int8 or uint8,
                          ``weight_zero_point`` (O,), ``weight_scale`` (O,), ``bias``?;
                          y = float32(Σ (q - z) · (weight - weight_zero_point)) ·
                          float32(s · weight_scale[o]) + bias (ConvInteger, Cast, Mul,
                          Add); padding reads z
``dynamic_quantized_      the same over the last axis of an input of any rank >= 2
linear``                  (MatMulInteger); weight (out, in)
========================  ==========================================================

The builder is :mod:`pyparbench.graph.builder`, the analysis (FLOPs, depth,
widths) :mod:`pyparbench.graph.analysis`, the op list :mod:`pyparbench.graph.opdefs`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from pyparbench.graph._jsonable import jsonable
from pyparbench.graph.analysis import GraphAnalysis
from pyparbench.graph.node import F32Array, Node, Params, ParamSpec, Shape
from pyparbench.graph.opdefs import OPS

__all__ = ["F32Array", "Graph", "Node", "ParamSpec", "Params", "Shape"]


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
                readers = [c for r in self.consumers[i] for c in (
                    self.consumers[r] if self.nodes[r].op == "reshape" else (r,))]
                rows = min((self.nodes[c].params.shapes["table"][0] for c in readers
                            if self.nodes[c].op == "embedding_bag"), default=1)
                out[n.name] = rng.integers(0, rows, size=n.shape, dtype=np.int64)
            else:
                x = rng.uniform(-1.0, 1.0, size=n.shape).astype(np.float32)
                x[x == 0] = 0.5
                out[n.name] = x
        return out

    def as_dict(self) -> dict[str, Any]:
        """The graph's structure (no weights) as JSON-able data."""
        return {
            "name": self.name,
            "meta": jsonable(self.meta),
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "nodes": [n.as_dict() for n in self.nodes],
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.as_dict(), indent=indent)

