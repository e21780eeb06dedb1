"""Operator measurements of the main job: scaling curves and roofline points.

Two kinds of task, each run in a fresh process like a model configuration
(``python -m pyparbench.op_bench``), its result appended to a JSONL store
as soon as it is known (:func:`run_op_tasks`, resumable by key):

* ``scaling``: one standard shape (:data:`STANDARD_SHAPES`: DeepBench GEMMs,
  oneDNN benchdnn's ResNet-50 convolutions, DLRM embedding tables, as listed
  in ``bench/shapes/``) timed as a prepared kernel in its C++ loop at each
  thread count, one thread per physical core, pinned compact.
* ``nodes``: every heavy node (conv2d, linear, matmul, embedding_bag) of a
  model graph, timed from per-node traces of the whole graph run
  synchronously on all cores (the median of several traced runs).

Work and traffic of every measurement come from
:attr:`pyparbench.graph.Graph.stats` (a one-node graph for a standard
shape), so a point's arithmetic intensity is the graph analysis's. The
parent process places each point on the roofline (:meth:`Peak.ceiling`)
before storing it: intensity, GFLOP/s, GB/s, the bound and the percentage
of it reached.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pyparbench.graph import Graph
    from pyparbench.peak import Peak
    from pyparbench.runner import ResultStore

__all__ = ["STANDARD_SHAPES", "OpShape", "OpTask", "measure_nodes", "measure_scaling",
           "run_op_task", "run_op_tasks", "shape_graph", "standard_shapes"]


@dataclass(frozen=True)
class OpShape:
    """One standard operator shape and where it comes from.

    ``kind`` "gemm" (``m, n, k``: C (m x n) = A (m x k) B (k x n)), "conv"
    (``n, c, h, w, out_channels, kh, kw, stride, pad``, symmetric padding)
    or "embedding" (``rows, dim, batch, bag``: batch bags of bag rows each).
    ``level``: the smallest suite level that measures it ("quick",
    "default" or "full").
    """

    kind: str
    name: str
    source: str
    params: Mapping[str, int] = field(hash=False)
    level: str = "default"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "source": self.source,
                "params": dict(self.params), "level": self.level}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OpShape:
        return cls(d["kind"], d["name"], d["source"], dict(d["params"]), d.get("level", "default"))


_GEMM = "bench/shapes/gemm_deepbench.csv (DeepBench gemm_problems.h, {})"
_CONV = "bench/shapes/benchdnn_conv_resnet_50.txt (oneDNN benchdnn shapes_resnet_50, {})"
_DLRM = "bench/shapes/dlrm_configs.json ({})"

# Transposes of the DeepBench rows are not kept: every GEMM here is A B.
STANDARD_SHAPES: tuple[OpShape, ...] = (
    OpShape("gemm", "gemm 1024x700x512", _GEMM.format("inference_server"),
            {"m": 1024, "n": 700, "k": 512}, "quick"),
    OpShape("gemm", "gemv 3072x1x1024", _GEMM.format("inference_server"),
            {"m": 3072, "n": 1, "k": 1024}, "quick"),
    OpShape("gemm", "gemm 1760x128x1760", _GEMM.format("training"),
            {"m": 1760, "n": 128, "k": 1760}),
    OpShape("gemm", "gemm 5124x700x2048", _GEMM.format("inference_server"),
            {"m": 5124, "n": 700, "k": 2048}),
    OpShape("gemm", "gemm 7680x1500x2560", _GEMM.format("inference_server"),
            {"m": 7680, "n": 1500, "k": 2560}, "full"),
    OpShape("gemm", "gemm 2048x16x2048", _GEMM.format("training"),
            {"m": 2048, "n": 16, "k": 2048}, "full"),
    OpShape("conv", "resnet_50:res2a_branch2b", _CONV.format("res2a_branch2b"),
            {"n": 1, "c": 64, "h": 56, "w": 56, "out_channels": 64, "kh": 3, "kw": 3,
             "stride": 1, "pad": 1}, "quick"),
    OpShape("conv", "resnet_50:conv1", _CONV.format("conv1"),
            {"n": 1, "c": 3, "h": 224, "w": 224, "out_channels": 64, "kh": 7, "kw": 7,
             "stride": 2, "pad": 3}),
    OpShape("conv", "resnet_50:res4a_branch2b", _CONV.format("res4a_branch2b"),
            {"n": 1, "c": 256, "h": 14, "w": 14, "out_channels": 256, "kh": 3, "kw": 3,
             "stride": 1, "pad": 1}),
    OpShape("conv", "resnet_50:res3a_branch2c", _CONV.format("res3a_branch2c"),
            {"n": 1, "c": 128, "h": 28, "w": 28, "out_channels": 512, "kh": 1, "kw": 1,
             "stride": 1, "pad": 0}, "full"),
    OpShape("conv", "resnet_50:res5a_branch2b", _CONV.format("res5a_branch2b"),
            {"n": 1, "c": 512, "h": 7, "w": 7, "out_channels": 512, "kh": 3, "kw": 3,
             "stride": 1, "pad": 1}, "full"),
    OpShape("embedding", "dlrm benchmark table", _DLRM.format("dlrm_s_benchmark: one of 8 "
            "tables, 1M rows, dim 64, 100 lookups per sample, mini-batch 2048"),
            {"rows": 1_000_000, "dim": 64, "batch": 2048, "bag": 100}, "quick"),
    OpShape("embedding", "criteo-kaggle table", _DLRM.format("dlrm_s_criteo_kaggle: dim 16, "
            "one lookup per sample; the benchmark's mini-batch 2048, rows capped at 1M"),
            {"rows": 1_000_000, "dim": 16, "batch": 2048, "bag": 1}),
)

LEVELS = ("quick", "default", "full")


def standard_shapes(level: str) -> list[OpShape]:
    """The standard shapes a suite level measures (each level adds to the one before)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    upto = LEVELS[:LEVELS.index(level) + 1]
    return [s for s in STANDARD_SHAPES if s.level in upto]


def shape_graph(shape: OpShape) -> Graph:
    """A one-node graph of the shape, for its FLOPs and bytes (``Graph.stats``)."""
    from pyparbench.graph import GraphBuilder

    p = shape.params
    b = GraphBuilder(shape.name)
    if shape.kind == "gemm":
        x = b.input("a", (p["m"], p["k"]))
        y = b.linear(x, p["n"], bias=False, name="op")
    elif shape.kind == "conv":
        x = b.input("x", (p["n"], p["c"], p["h"], p["w"]))
        y = b.conv2d(x, p["out_channels"], (p["kh"], p["kw"]), stride=p["stride"],
                     padding=p["pad"], bias=False, name="op")
    elif shape.kind == "embedding":
        x = b.input("indices", (p["batch"], p["bag"]), "int64")
        y = b.embedding_bag(x, p["rows"], p["dim"], name="op")
    else:
        raise ValueError(f"unknown shape kind {shape.kind!r}")
    return b.build(y)


@dataclass(frozen=True)
class OpTask:
    """One operator measurement to make (see the module docstring).

    ``scaling``: ``shape`` at each of ``threads``; ``nodes``: the heavy
    nodes of ``model`` at ``batch``, on ``threads[0]`` threads.
    """

    kind: str
    threads: tuple[int, ...]
    shape: OpShape | None = None
    model: str = ""
    batch: int = 0
    repeats: int = 5

    @property
    def key(self) -> str:
        """Stable identity, used to skip finished tasks on resume."""
        return json.dumps(self.as_dict(), sort_keys=True)

    @property
    def label(self) -> str:
        if self.kind == "scaling" and self.shape is not None:
            return f"{self.shape.name} at 1..{max(self.threads)} threads"
        return f"{self.model} b{self.batch} per-node trace"

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "threads": list(self.threads),
                             "repeats": self.repeats}
        if self.shape is not None:
            d["shape"] = self.shape.as_dict()
        if self.model:
            d["model"], d["batch"] = self.model, self.batch
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OpTask:
        shape = OpShape.from_dict(d["shape"]) if "shape" in d else None
        return cls(d["kind"], tuple(int(t) for t in d["threads"]), shape,
                   d.get("model", ""), int(d.get("batch", 0)), int(d.get("repeats", 5)))


def _repeats_for(one_ns: float, target_s: float, lo: int, hi: int) -> int:
    """Timed runs that take about ``target_s`` in all, within [lo, hi]."""
    return int(min(hi, max(lo, target_s * 1e9 / max(one_ns, 1.0))))


def measure_scaling(shape: OpShape, threads: Sequence[int], *, repeats: int = 5,
                    target_s: float = 0.15) -> list[dict[str, Any]]:
    """Time ``shape`` as a prepared oneDNN (or embedding-bag) kernel at each
    thread count; ``repeats`` at least, more for short kernels (about
    ``target_s`` per point). One dict per count: threads, cpus, ns, summary,
    flops, bytes."""
    from pyparbench import memory, ops
    from pyparbench.peak import compact_cpus
    from pyparbench.timing import summarize

    stats = shape_graph(shape).stats[-1]
    p = shape.params
    rng = np.random.default_rng(0)
    points = []
    for t in threads:
        cpus = list(compact_cpus(t))
        if shape.kind == "gemm":
            g = ops.Gemm(p["m"], p["n"], p["k"], threads=t)
            a = rng.standard_normal(g.a_shape, dtype=np.float32)
            bm = rng.standard_normal(g.b_shape, dtype=np.float32)
            out = np.empty(g.out_shape, np.float32)
            g.pin(cpus)

            def timeit(n: int, w: int, g: Any = g, a: Any = a, bm: Any = bm,
                       out: Any = out) -> Any:
                return g.timeit(a, bm, None, out, repeats=n, warmup=w)
        elif shape.kind == "conv":
            c = ops.Conv2d((p["n"], p["c"], p["h"], p["w"]), p["out_channels"],
                           (p["kh"], p["kw"]), stride=(p["stride"], p["stride"]),
                           padding=(p["pad"],) * 4, threads=t)
            c.set_weights(rng.standard_normal(c.weight_shape, dtype=np.float32))
            x = rng.standard_normal(c.input_shape, dtype=np.float32)
            out = np.empty(c.output_shape, np.float32)
            c.pin(cpus)

            def timeit(n: int, w: int, c: Any = c, x: Any = x, out: Any = out) -> Any:
                return c.timeit(x, out, repeats=n, warmup=w)
        else:
            e = ops.EmbeddingBag(p["rows"], p["dim"], threads=t)
            table = memory.aligned_empty((p["rows"], p["dim"]))
            table.fill(0.5)  # the values do not change the traffic
            idx = rng.integers(0, p["rows"], size=(p["batch"], p["bag"]), dtype=np.int64)
            out = np.empty((p["batch"], p["dim"]), np.float32)
            e.pin(cpus)

            def timeit(n: int, w: int, e: Any = e, table: Any = table, idx: Any = idx,
                       out: Any = out) -> Any:
                return e.timeit(table, idx, None, None, out, repeats=n, warmup=w)
        first = timeit(1, 1)
        n = _repeats_for(float(first[0]), target_s, repeats, 500)
        ns = [float(v) for v in timeit(n, 2)]
        points.append({"threads": t, "cpus": cpus, "ns": ns, "summary": summarize(ns).as_dict(),
                       "flops": stats.flops, "bytes": stats.bytes})
    return points


def measure_nodes(model: str, batch: int, threads: int, *, repeats: int = 5) -> dict[str, Any]:
    """Per-node times of ``model``'s heavy nodes: the graph run synchronously
    with ``threads`` intra-op threads (pinned compact, oneDNN), ``repeats``
    traced runs after a warm-up; each node's median over the runs."""
    from pyparbench.executor import compile_graph
    from pyparbench.models import build
    from pyparbench.settings import Settings
    from pyparbench.timing import summarize

    graph = build(model, batch)
    plan = compile_graph(graph)
    settings = Settings(intra_op=threads, affinity="compact")
    plan.run(settings, repeats=1, warmup=1)
    per_node: dict[int, list[float]] = {}
    totals = []
    for _ in range(repeats):
        rec = plan.run(settings, repeats=1, warmup=0, trace=True)
        totals.append(rec.ns[0])
        for ev in rec.trace:
            per_node.setdefault(ev.node, []).append(ev.end_ns - ev.start_ns)
    nodes = []
    for s in graph.stats:
        if not s.heavy or s.id not in per_node:
            continue
        ns = per_node[s.id]
        nodes.append({"id": s.id, "name": s.name, "op": s.op, "flops": s.flops,
                      "bytes": s.bytes, "shape": list(graph[s.id].shape), "ns": ns,
                      "median_ns": float(np.median(ns))})
    return {"settings": settings.as_dict(), "threads": threads, "nodes": nodes,
            "graph_ns": summarize(totals).as_dict()}


def annotate(record: dict[str, Any], peak: Peak) -> dict[str, Any]:
    """Put every point of a finished task record on the roofline (in place)."""
    for p in record.get("points", []):
        p["roofline"] = peak.ceiling(_op_of(record["task"]), p["flops"], p["bytes"],
                                     p["summary"]["median"] / 1e9, p["threads"]).as_dict()
    for n in record.get("nodes", []):
        n["roofline"] = peak.ceiling(n["op"], n["flops"], n["bytes"], n["median_ns"] / 1e9,
                                     record["threads"]).as_dict()
    return record


def _op_of(task: Mapping[str, Any]) -> str:
    kind = task["shape"]["kind"]
    return {"gemm": "linear", "conv": "conv2d", "embedding": "embedding_bag"}[kind]


def _python() -> list[str]:
    # -P (3.11+): the child's sys.path does not start with the current
    # folder, so it imports the installed package, not a source checkout.
    return [sys.executable, "-P"] if sys.version_info >= (3, 11) else [sys.executable]


def run_op_task(task: OpTask, peak: Peak, *, timeout: float = 600.0) -> dict[str, Any]:
    """Run one task in a fresh Python process; its record, on the roofline
    (``status`` "ok") or with what went wrong (``status`` "error")."""
    from pyparbench.peak import fingerprint_id

    started = time.time()
    base = {"key": task.key, "task": task.as_dict(), "started": started,
            "peak_id": fingerprint_id(peak.fingerprint)}
    try:
        proc = subprocess.run([*_python(), "-m", "pyparbench.op_bench"],
                              input=json.dumps(task.as_dict()), capture_output=True, text=True,
                              timeout=timeout, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return {**base, "status": "timeout", "error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        return {**base, "status": "error", "error": f"exit status {proc.returncode}: {tail}"}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return annotate({**base, "status": "ok", **result}, peak)


def run_op_tasks(tasks: Iterable[OpTask], store: ResultStore, peak: Peak, *,
                 resume: bool = True, retry_failed: bool = False, timeout: float = 600.0,
                 on_result: Callable[[OpTask, dict[str, Any] | None], None] | None = None
                 ) -> Iterator[dict[str, Any]]:
    """Run every task not in ``store`` yet, appending each record as soon as
    it is known; yields the records (skipped ones from the store).
    ``on_result(task, record)`` after each (record None when skipped)."""
    done = {r["key"]: r for r in store.records()} if resume else {}
    for task in tasks:
        previous = done.get(task.key)
        if previous is not None and (previous.get("status") == "ok" or not retry_failed):
            if on_result:
                on_result(task, None)
            yield previous
            continue
        record = run_op_task(task, peak, timeout=timeout)
        store.append(record)
        if on_result:
            on_result(task, record)
        yield record


def _child_main() -> int:
    """In the fresh process: run the task read from stdin, print one JSON line."""
    from pyparbench.runner import machine_fingerprint

    task = OpTask.from_dict(json.loads(sys.stdin.read()))
    out: dict[str, Any]
    if task.kind == "scaling" and task.shape is not None:
        out = {"points": measure_scaling(task.shape, task.threads, repeats=task.repeats)}
    elif task.kind == "nodes":
        out = measure_nodes(task.model, task.batch, task.threads[0], repeats=task.repeats)
    else:
        raise ValueError(f"unknown task kind {task.kind!r}")
    out["machine"] = machine_fingerprint()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
