"""A graph's nodes as isolated prepared kernels: the kernel sum.

Each node of the graph as built becomes a prepared kernel of the same
shapes, attributes, weights, math library and thread count (the
executor's for that node: intra_op, or one where the per-node rule runs it
alone), fed the node's real inputs and timed alone in its C++ loop (pinned to the first
worker's CPUs when the settings pin); reshapes and inputs cost nothing (no
kernel).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pyparbench import ops
from pyparbench.frameworks._common import Array
from pyparbench.executor import compile_graph
from pyparbench.graph import NO_KERNEL_OPS, Graph, Node
from pyparbench.graph.node import Params
from pyparbench.settings import Settings

__all__ = ["Timer", "node_kernel"]

Timer = Callable[[int, int], Any]  # (repeats, warmup) -> per-run ns

_GEMM: dict[str, Callable[..., Any]] = {"onednn": ops.Gemm, "eigen": ops.EigenGemm,
                                         "blas": ops.BlasGemm}
_CONV: dict[str, Callable[..., Any]] = {"onednn": ops.Conv2d, "eigen": ops.EigenConv2d,
                                         "blas": ops.BlasConv2d}


def _f32(a: Any) -> Array:
    return np.ascontiguousarray(a, dtype=np.float32)


def _rows(x: Array) -> int:
    """The rows of a linear node's input: every axis but the features."""
    return int(np.prod(x.shape[:-1]))


def node_kernel(node: Node, ins: Sequence[Array], threads: int, library: str = "onednn",
                cpus: Sequence[int] | None = None, *, packed: bool = False
                ) -> tuple[Any, Timer] | None:
    """A prepared kernel computing ``node`` on ``ins`` and a timer of it
    (None for nodes with no kernel: inputs and reshapes). ``packed``: a
    linear node with oneDNN as the executor prepares it (``ops.Linear``, its
    weights packed once, or ``ops.StreamedLinear`` for a few rows with no
    activation) rather than a Gemm given the weights each call."""
    op, a, p = node.op, node.attrs, node.params
    out = np.empty(node.shape, np.float32)
    k: Any
    run: Timer
    if op in NO_KERNEL_OPS or op == "reorder":
        return None
    if op == "conv2d":
        w = _f32(p["weight"])
        bias = _f32(p["bias"]) if "bias" in p else None
        k = _CONV[library](ins[0].shape, w.shape[0], tuple(w.shape[2:]), stride=a["stride"],
                           padding=a["padding"], dilation=a["dilation"], groups=a["groups"],
                           bias=bias is not None, relu=a["relu"], threads=threads)
        k.set_weights(w, bias)
        x = _f32(ins[0])
        run = lambda r, w_: k.timeit(x, out, repeats=r, warmup=w_)
    elif (op == "linear" and packed and library == "onednn" and not a["relu"]
          and not a.get("activation") and _rows(ins[0]) <= ops.STREAMED_MAX_ROWS):
        x = _f32(ins[0]).reshape(-1, ins[0].shape[-1])
        w = _f32(p["weight"])
        bias = _f32(p["bias"]) if "bias" in p else None
        k = ops.StreamedLinear(x.shape[0], w.shape[0], x.shape[1], bias=bias is not None,
                               threads=threads)
        k.set_weights(w, bias)
        o2 = out.reshape(x.shape[0], w.shape[0])
        run = lambda r, w_: k.timeit(x, o2, repeats=r, warmup=w_)
    elif op == "linear" and packed and library == "onednn":
        x = _f32(ins[0]).reshape(-1, ins[0].shape[-1])
        w = _f32(p["weight"])
        bias = _f32(p["bias"]) if "bias" in p else None
        k = ops.Linear(x.shape[0], w.shape[0], x.shape[1], bias=bias is not None,
                       activation="relu" if a["relu"] else None, threads=threads)
        k.set_weights(w, bias)
        o2 = out.reshape(x.shape[0], w.shape[0])
        run = lambda r, w_: k.timeit(x, o2, repeats=r, warmup=w_)
    elif op == "linear":
        x = _f32(ins[0]).reshape(-1, ins[0].shape[-1])
        w = _f32(p["weight"])
        bias = _f32(p["bias"]) if "bias" in p else None
        k = _GEMM[library](x.shape[0], w.shape[0], x.shape[1], trans_b=True,
                           bias=bias is not None, relu=a["relu"], threads=threads)
        o2 = out.reshape(x.shape[0], w.shape[0])
        run = lambda r, w_: k.timeit(x, w, bias, o2, repeats=r, warmup=w_)
    elif op == "matmul":
        x, y = _f32(ins[0]), _f32(ins[1])
        n = y.shape[-2] if a["trans_b"] else y.shape[-1]
        k = _GEMM[library](x.shape[-2], n, x.shape[-1], batch=x.shape[0] if x.ndim == 3 else 0,
                           trans_b=a["trans_b"], threads=threads)
        run = lambda r, w_: k.timeit(x, y, None, out, repeats=r, warmup=w_)
    elif op == "embedding_bag":
        table = np.ascontiguousarray(p["table"])
        idx = np.ascontiguousarray(ins[0], dtype=np.int64)
        k = ops.EmbeddingBag(table.shape[0], table.shape[1], mode=a["mode"], threads=threads)
        run = lambda r, w_: k.timeit(table, idx, out=out, repeats=r, warmup=w_)
    elif op == "eltwise":
        k, x = ops.Eltwise(a["kind"], node.shape, threads=threads), _f32(ins[0])
        run = lambda r, w_: k.timeit(x, out, repeats=r, warmup=w_)
    elif op in ("add", "mul"):
        x, y = _f32(ins[0]), _f32(ins[1])
        k = ops.Binary(op, x.shape, y.shape, relu=bool(a.get("relu", False)), threads=threads)
        run = lambda r, w_: k.timeit(x, y, out, repeats=r, warmup=w_)
    elif op == "concat":
        xs = [_f32(v) for v in ins]
        k = ops.Concat([v.shape for v in xs], axis=a["axis"], threads=threads)
        run = lambda r, w_: k.timeit(xs, out, repeats=r, warmup=w_)
    elif op == "pool2d":
        x = _f32(ins[0])
        k = ops.Pool2d(a["kind"], x.shape, a["kernel"], stride=a["stride"], padding=a["padding"],
                       ceil_mode=a["ceil_mode"], count_include_pad=a["count_include_pad"],
                       threads=threads)
        run = lambda r, w_: k.timeit(x, out, repeats=r, warmup=w_)
    elif op == "global_avg_pool":
        k, x = ops.GlobalAvgPool(ins[0].shape, threads=threads), _f32(ins[0])
        run = lambda r, w_: k.timeit(x, out, repeats=r, warmup=w_)
    elif op == "batch_norm":
        shape = node.shape
        if len(shape) not in (2, 4):  # the kernel takes (N, C) or (N, C, H, W)
            shape = (shape[0], shape[1], int(np.prod(shape[2:])), 1)
        x, o4 = _f32(ins[0]).reshape(shape), out.reshape(shape)
        c = shape[1]
        mean, var, shift = (_f32(p[key]) for key in ("mean", "var", "shift"))
        scale = _f32(p["scale"]) if "scale" in p else np.ones(c, np.float32)
        k = ops.BatchNorm(shape, eps=a["eps"], threads=threads)
        run = lambda r, w_: k.timeit(x, mean, var, scale, shift, o4,
                                     repeats=r, warmup=w_)
    elif op == "layer_norm":
        x, scale, shift = _f32(ins[0]), _f32(p["scale"]), _f32(p["shift"])
        k = ops.LayerNorm(x.shape, eps=a["eps"], threads=threads)
        run = lambda r, w_: k.timeit(x, scale, shift, out, repeats=r, warmup=w_)
    elif op == "position_ids":
        ids, positions = np.ascontiguousarray(ins[0], dtype=np.int64), out.astype(np.int64)
        k = ops.PositionIds(ids.shape, pad_id=a["pad_id"], offset=a["offset"], threads=threads)
        run = lambda r, w_: k.timeit(ids, positions, repeats=r, warmup=w_)
    elif op == "rms_norm":
        x, scale = _f32(ins[0]), _f32(p["scale"])
        k = ops.RmsNorm(x.shape, eps=a["eps"], threads=threads)
        run = lambda r, w_: k.timeit(x, scale, out, repeats=r, warmup=w_)
    elif op == "rotary":
        if "inv_freq" in p:
            raise ValueError(f"node {node.name!r}: a rotary computing its tables from "
                             "positions has no prepared kernel (it runs in a plan)")
        x, cos, sin = _f32(ins[0]), _f32(p["cos"]), _f32(p["sin"])
        if len(ins) > 1:  # a cache's length: the rows of its positions
            at, seq = int(np.asarray(ins[1]).reshape(-1)[0]), x.shape[-2]
            cos, sin = _f32(cos[at:at + seq]), _f32(sin[at:at + seq])
        k = ops.Rotary(x.shape, threads=threads)
        run = lambda r, w_: k.timeit(x, cos, sin, out, repeats=r, warmup=w_)
    elif op == "attention":
        q, kk, v = _f32(ins[0]), _f32(ins[1]), _f32(ins[2])
        mask = _f32(ins[3]) if len(ins) > 3 else None
        k = ops.Attention(q.shape, kk.shape, v.shape,
                          mask_shape=None if mask is None else mask.shape, causal=a["causal"],
                          scale=a["scale"], causal_fill=a["causal_fill"], threads=threads)
        run = lambda r, w_: k.timeit(q, kk, v, mask, out, repeats=r, warmup=w_)
    elif op == "decode_attention":
        if len(ins) > 5 and np.asarray(ins[5]).dtype == np.int64:
            raise ValueError(f"node {node.name!r}: a decode_attention on a cache kept in place "
                             "writes its cache, so it is not timed alone")
        q, kn, vn, pk, pv = (_f32(t) for t in ins[:5])
        mask = _f32(ins[5]) if len(ins) > 5 else None
        k = ops.DecodeAttention(q.shape, kn.shape, vn.shape, pk.shape,
                                mask_shape=None if mask is None else mask.shape,
                                scale=a["scale"], causal_fill=a["causal_fill"], threads=threads)
        run = lambda r, w_: k.timeit(q, kn, vn, pk, pv, mask, out, repeats=r, warmup=w_)
    elif op == "glu":
        gate, up = _f32(ins[0]), _f32(ins[1])
        k = ops.Glu(a["kind"], gate.shape, threads=threads)
        run = lambda r, w_: k.timeit(gate, up, out, repeats=r, warmup=w_)
    elif op == "softmax":
        k, x = ops.Softmax(node.shape, axis=a["axis"], threads=threads), _f32(ins[0])
        run = lambda r, w_: k.timeit(x, out, repeats=r, warmup=w_)
    elif op == "transpose":
        k, x = ops.Transpose(ins[0].shape, a["perm"], threads=threads), _f32(ins[0])
        run = lambda r, w_: k.timeit(x, out, repeats=r, warmup=w_)
    elif op == "tril_flatten":
        k, x = ops.TrilFlatten(ins[0].shape, threads=threads), _f32(ins[0])
        run = lambda r, w_: k.timeit(x, out, repeats=r, warmup=w_)
    elif op in _PLAN_ONLY:
        return _one_node_plan(node, ins, threads)
    else:
        raise ValueError(f"node {node.name!r}: op {op!r} has no prepared kernel")
    if cpus:
        k.pin(list(cpus))
    return k, run


# The ops with no kernel of pyparbench.ops of their own (the int8 nodes
# quantise and dequantise around oneDNN's primitive inside the plan): timed
# as the node of a one-node plan, the graph as built (no pass), on the
# calling thread and its team.
_PLAN_ONLY = frozenset({"quantized_linear", "quantized_conv2d", "fake_quantize",
                        "dynamic_quantized_linear", "dynamic_quantized_conv2d"})


def _one_node_plan(node: Node, ins: Sequence[Array], threads: int) -> tuple[Any, Timer]:
    """``node`` alone in a plan fed ``ins``, and a timer of its kernel there."""
    inputs: list[Node] = []
    for k, x in enumerate(ins):
        dtype = "int64" if np.asarray(x).dtype == np.int64 else "float32"
        inputs.append(Node(k, "input", (), {"dtype": dtype}, Params({}, 0, k), tuple(np.shape(x)),
                           dtype, f"in{k}"))
    alone = Node(len(inputs), node.op, tuple(range(len(inputs))), dict(node.attrs),
                 node.params, tuple(node.shape), node.dtype, node.name)
    cg = compile_graph(Graph(f"node:{node.name}", [*inputs, alone], [alone.id]))
    cg.set_inputs({n.name: x for n, x in zip(inputs, ins, strict=True)})
    settings = Settings(intra_op=threads, graph_opt="none")
    cg.run(settings, repeats=1, warmup=0)
    return cg, lambda r, w_: cg.time_node(node.name, settings, repeats=r, warmup=w_)
