"""The native side of a comparison: pyparbench's executor on the same graph,
and the graph's nodes as isolated prepared kernels.

* latency: the compiled plan run under the settings, timed in its C++ loop;
* per-node times: the executor's trace (median of several traced runs), per
  node of the graph the plan runs (rewritten by the passes that
  ``Settings.graph_opt`` asks for);
* kernel sum: each node of the graph as built as a prepared kernel of the
  same shapes, attributes, weights, math library and intra-op thread count,
  fed the node's real inputs and timed alone in its C++ loop (pinned to the
  first worker's CPUs when the settings pin); reshapes and inputs cost
  nothing (no kernel). Against a plan with fused nodes it shows what the
  passes gained.

Imported in the native child process (pyparbench's core loaded, no framework).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pyparbench import ops
from pyparbench.executor import compile_graph, resolve
from pyparbench.frameworks._common import Array, KernelTime, Profile
from pyparbench.graph import Graph, Node
from pyparbench.settings import Settings

__all__ = ["NativeModel", "node_kernel", "prepare"]

Timer = Callable[[int, int], Any]  # (repeats, warmup) -> per-run ns

_GEMM: dict[str, Callable[..., Any]] = {"onednn": ops.Gemm, "eigen": ops.EigenGemm,
                                         "blas": ops.BlasGemm}
_CONV: dict[str, Callable[..., Any]] = {"onednn": ops.Conv2d, "eigen": ops.EigenConv2d,
                                         "blas": ops.BlasConv2d}


def _f32(a: Any) -> Array:
    return np.ascontiguousarray(a, dtype=np.float32)


def node_kernel(node: Node, ins: Sequence[Array], threads: int, library: str = "onednn",
                cpus: Sequence[int] | None = None) -> tuple[Any, Timer] | None:
    """A prepared kernel computing ``node`` on ``ins`` and a timer of it
    (None for nodes with no kernel: inputs and reshapes)."""
    op, a, p = node.op, node.attrs, node.params
    out = np.empty(node.shape, np.float32)
    k: Any
    run: Timer
    if op in ("input", "reshape", "reorder", "slice"):
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
    elif op == "softmax":
        k, x = ops.Softmax(node.shape, axis=a["axis"], threads=threads), _f32(ins[0])
        run = lambda r, w_: k.timeit(x, out, repeats=r, warmup=w_)
    elif op == "transpose":
        k, x = ops.Transpose(ins[0].shape, a["perm"], threads=threads), _f32(ins[0])
        run = lambda r, w_: k.timeit(x, out, repeats=r, warmup=w_)
    elif op == "tril_flatten":
        k, x = ops.TrilFlatten(ins[0].shape, threads=threads), _f32(ins[0])
        run = lambda r, w_: k.timeit(x, out, repeats=r, warmup=w_)
    else:
        raise ValueError(f"node {node.name!r}: op {op!r} has no prepared kernel")
    if cpus:
        k.pin(list(cpus))
    return k, run


class NativeModel:
    """A graph compiled by pyparbench's executor, run under one Settings."""

    def __init__(self, graph: Graph, inputs: Mapping[str, Array], settings: Settings) -> None:
        if settings.instances != 1:
            raise ValueError(f"instances={settings.instances}: a comparison runs one copy "
                             "of the model")
        self.graph = graph
        self.settings = settings
        self.inputs = dict(inputs)
        self.cg = compile_graph(graph)
        self.cg.set_inputs(self.inputs)
        # The graph the plan runs: rewritten by the passes settings.graph_opt asks for.
        self.optimized = self.cg.optimized(settings)
        native = resolve(settings, self.optimized)
        self.cpus: list[int] | None = list(native.worker_cpus[0]) if native.worker_cpus else None
        opt = self.cg.optimization(settings)
        self.info: dict[str, Any] = {
            "resolved": {"worker_cpus": [list(c) for c in native.worker_cpus]},
            "graph_opt": {"requested": settings.graph_opt, "applied": list(opt.applied),
                          "nodes": len(graph.nodes), "optimized_nodes": len(opt.graph.nodes)}}

    def time(self, repeats: int, warmup: int) -> list[float]:
        return self.cg.run(self.settings, repeats=repeats, warmup=warmup).ns

    def outputs(self) -> dict[str, Array]:
        self.cg.run(self.settings, repeats=1, warmup=0)
        return self.cg.outputs()

    def audit(self) -> dict[str, Any]:
        """The executor's own audit of one run: threads, CPUs, mismatches."""
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rec = self.cg.run(self.settings, repeats=1, warmup=0, audit=True)
        assert rec.audit is not None
        return {"threads": len(rec.audit.tids), "cpus_seen": sorted(rec.audit.cpus_seen),
                "mismatches": rec.mismatches}

    def node_times(self, runs: int) -> tuple[list[float], float]:
        """Each node's median time in ``runs`` traced runs of the plan (node
        ids of the optimised graph), and the median traced run (ns)."""
        per: list[list[float]] = [[] for _ in self.optimized.nodes]
        whole = []
        for _ in range(runs):
            # Warm runs first: the trace is of the last repeat, with the
            # team's threads awake as in a timed loop.
            rec = self.cg.run(self.settings, repeats=1, warmup=5, trace=True)
            whole.append(rec.ns[-1])
            for e in rec.trace:
                per[e.node].append(max(e.end_ns - e.start_ns, 0.0))
        return [float(np.median(v)) if v else 0.0 for v in per], float(np.median(whole))

    def profile(self, iterations: int) -> Profile:
        """Per op type: the executor's per-node times, summed, over the nodes
        of the optimised graph (a folded batch norm or a fused activation is
        in its conv's time, as in the frameworks' fused kernels)."""
        times, whole = self.node_times(iterations)
        agg: dict[str, list[float]] = {}
        for n, t in zip(self.optimized.nodes, times, strict=True):
            if n.op in ("input", "reshape", "slice"):
                continue
            slot = agg.setdefault(n.op, [0.0, 0.0])
            slot[0] += t
            slot[1] += 1
        return Profile([KernelTime(op, op, ns, calls) for op, (ns, calls) in sorted(agg.items())],
                       whole)

    def kernel_times(self, repeats: int, warmup: int = 10) -> list[float]:
        """Each node of the graph as built (before the passes: the prepared
        kernels have no fused post-ops) as an isolated prepared kernel, fed
        its real inputs: median ns (0 for a node with no kernel)."""
        plain = self.settings.with_(graph_opt="none")
        graph = self.cg.optimized(plain)
        self.cg.run(plain, repeats=1, warmup=0)
        out = []
        for n in graph.nodes:
            ins = [self.inputs[graph.nodes[j].name] if graph.nodes[j].op == "input"
                   else self.cg.output(j) for j in n.inputs]
            made = node_kernel(n, ins, self.settings.intra_op, self.settings.library, self.cpus)
            if made is None:
                out.append(0.0)
                continue
            _, run = made
            out.append(float(np.median(run(repeats, warmup))))
        return out


def prepare(graph: Graph, inputs: Mapping[str, Array], settings: Settings) -> NativeModel:
    return NativeModel(graph, inputs, settings)
