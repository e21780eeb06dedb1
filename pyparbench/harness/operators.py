"""Operator measurements of the main job: scaling curves, roofline points
and a decoder's generation.

Three kinds of task, each run in fresh processes like a model configuration
(``python -m pyparbench.harness.operators``; a generation's runs in the
generation's own pinned children), its result appended to a JSONL store as
soon as it is known (:func:`run_op_tasks`, resumable by key):

* ``scaling``: one standard shape (:data:`SELECTION` of the published lists
  in :mod:`pyparbench.shapes`: DeepBench GEMMs, oneDNN benchdnn's ResNet-50
  convolutions, DLRM embedding tables) timed as a prepared kernel in its C++ loop at each
  thread count, one thread per physical core, pinned compact.
* ``nodes``: every heavy node (conv2d, linear, matmul, embedding_bag) of a
  model graph, timed from per-node traces of the whole graph run
  synchronously on all cores (the median of several traced runs).
* ``generation``: a built-in decoder (llama-tiny in every level) generating
  greedily at each thread count (:func:`measure_generation`), natively, in
  llama.cpp and in PyTorch where they are installed: prefill and decode
  tokens per second, time to first token, time per output token, bytes read
  per token.

Work and traffic of every measurement come from
:attr:`pyparbench.graph.Graph.stats` (a one-node graph for a standard
shape), so a point's arithmetic intensity is the graph analysis's. The
parent process places each point on the roofline (:meth:`Peak.ceiling`)
before storing it: intensity, GFLOP/s, GB/s, the bound and the percentage
of it reached.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pyparbench import child_process, memory, ops, shapes
from pyparbench.executor import compile_graph
from pyparbench.frameworks.generation import (
    GENERATION_FRAMEWORKS,
    GenerationRecord,
    GenerationRequest,
    bytes_per_token,
)
from pyparbench.frameworks.generation_run import missing_packages, run_generation
from pyparbench.graph import GraphBuilder
from pyparbench.harness.levels import levels_upto
from pyparbench.harness.resumable import run_resumable
from pyparbench.harness.store import ResultStore
from pyparbench.machine.fingerprint import fingerprint_id, machine_fingerprint
from pyparbench.machine.peak import compact_cpus
from pyparbench.models import build
from pyparbench.models.llama import LLAMA_SIZES
from pyparbench.resultfiles.op_result import OpResult, OpShape, OpTask
from pyparbench.settings import Settings
from pyparbench.timing import summarize

if TYPE_CHECKING:
    from pyparbench.graph import Graph
    from pyparbench.machine.peak import Peak

__all__ = ["GENERATION_MODEL", "GENERATION_NEW", "SELECTION", "OpResult", "OpShape", "OpTask",
           "annotate", "check_task_record", "generation_frameworks", "generation_models",
           "generation_task", "measure_generation", "measure_nodes", "measure_scaling",
           "run_op_task", "run_op_tasks", "shape_graph", "standard_shapes"]


# Which entries of the published lists (pyparbench.shapes) the main job
# measures, and from which level on: (kind, list, entry, level). GEMMs are
# DeepBench (m, n, k) rows; convolutions benchdnn's ResNet-50 layers (mb1);
# embeddings a table of each DLRM configuration.
SELECTION: tuple[tuple[str, str, Any, str], ...] = (
    ("gemm", "inference_server", (1024, 700, 512), "quick"),
    ("gemm", "inference_server", (3072, 1, 1024), "quick"),
    ("gemm", "training", (1760, 128, 1760), "default"),
    ("gemm", "inference_server", (5124, 700, 2048), "default"),
    ("gemm", "training", (2048, 16, 2048), "full"),
    ("gemm", "inference_server", (7680, 1500, 2560), "full"),
    ("conv", "resnet_50", "res2a_branch2b", "quick"),
    ("conv", "resnet_50", "conv1", "default"),
    ("conv", "resnet_50", "res4a_branch2b", "default"),
    ("conv", "resnet_50", "res3a_branch2c", "full"),
    ("conv", "resnet_50", "res5a_branch2b", "full"),
    ("embedding", "dlrm_s_benchmark", None, "quick"),
    ("embedding", "dlrm_s_criteo_kaggle", None, "default"),
)
# A Criteo-Kaggle table capped as the models cap it (the largest holds 10M rows).
_KAGGLE_ROWS = 1_000_000
# The DLRM benchmark's mini-batch, also used for the Kaggle table (its own is 128).
_DLRM_BATCH = 2048
# The decoder every level's generation task runs (a few ms per token on 2
# cores), and the tokens each generation adds after the size's own prompt.
GENERATION_MODEL = "llama-tiny"
GENERATION_NEW = 16
# The runtimes beside the native one a generation task measures where
# installed. ONNX Runtime is left to `pyparbench generate`: its decoder is
# exported by PyTorch in the task's process first (PyTorch's and transformers'
# imports and the export: its rows at 1 and 2 threads took 7.5 s on
# llama-tiny, 2 cores, against 1 s natively), more than the other rows together.
_GENERATION_RUNTIMES = ("llamacpp", "torch")


def _resolve(kind: str, listing: str, entry: Any, level: str) -> OpShape:
    """The shape of one SELECTION entry, read from its published list."""
    if kind == "gemm":
        m, n, k = entry
        found = [p for p in shapes.gemm_problems(listing) if (p.m, p.n, p.k) == (m, n, k)]
        if not found:
            raise ValueError(f"DeepBench {listing} has no GEMM {m}x{n}x{k}")
        name = f"{'gemv' if n == 1 else 'gemm'} {m}x{n}x{k}"
        return OpShape(kind, name, f"DeepBench gemm_problems.h, {listing}",
                       {"m": m, "n": n, "k": k}, level)
    if kind == "conv":
        wanted = f"{listing}:{entry}"
        conv = [c for c in shapes.conv_problems(listing) if c.name.split("*")[0] == wanted]
        if not conv:
            raise ValueError(f"benchdnn {listing} has no layer {entry!r}")
        c = conv[0]
        return OpShape(kind, wanted, f"oneDNN benchdnn shapes_{listing}",
                       {"n": c.n, "c": c.c, "h": c.h, "w": c.w,
                        "out_channels": c.out_channels, "kh": c.kh, "kw": c.kw,
                        "stride_h": c.stride[0], "stride_w": c.stride[1],
                        "pad_t": c.padding[0], "pad_b": c.padding[1], "pad_l": c.padding[2],
                        "pad_r": c.padding[3], "groups": c.groups}, level)
    if kind == "embedding":
        args = shapes.dlrm_config(listing)["args"]
        dim = int(args["arch_sparse_feature_size"])
        if listing == "dlrm_s_benchmark":
            rows, bag = int(args["arch_embedding_size"][0]), int(args["num_indices_per_lookup"])
            batch = int(args["mini_batch_size"])
            return OpShape(kind, "dlrm benchmark table",
                           f"facebookresearch/dlrm {listing}.sh: one of its tables",
                           {"rows": rows, "dim": dim, "batch": batch, "bag": bag}, level)
        return OpShape(kind, "criteo-kaggle table",
                       f"facebookresearch/dlrm {listing}.sh: dim {dim}, one lookup per "
                       f"sample; rows capped at {_KAGGLE_ROWS:,}, mini-batch {_DLRM_BATCH}",
                       {"rows": _KAGGLE_ROWS, "dim": dim, "batch": _DLRM_BATCH, "bag": 1},
                       level)
    raise ValueError(f"unknown shape kind {kind!r}")


def standard_shapes(level: str) -> list[OpShape]:
    """The standard shapes a suite level measures (each level adds to the one
    before), read from the published lists in :mod:`pyparbench.shapes`."""
    upto = levels_upto(level)
    return [_resolve(*sel) for sel in SELECTION if sel[3] in upto]


def shape_graph(shape: OpShape) -> Graph:
    """A one-node graph of the shape, for its FLOPs and bytes (``Graph.stats``)."""
    p = shape.params
    b = GraphBuilder(shape.name)
    if shape.kind == "gemm":
        x = b.input("a", (p["m"], p["k"]))
        y = b.linear(x, p["n"], bias=False, name="op")
    elif shape.kind == "conv":
        x = b.input("x", (p["n"], p["c"], p["h"], p["w"]))
        y = b.conv2d(x, p["out_channels"], (p["kh"], p["kw"]),
                     stride=(p["stride_h"], p["stride_w"]),
                     padding=(p["pad_t"], p["pad_b"], p["pad_l"], p["pad_r"]),
                     groups=p["groups"], bias=False, name="op")
    elif shape.kind == "embedding":
        x = b.input("indices", (p["batch"], p["bag"]), "int64")
        y = b.embedding_bag(x, p["rows"], p["dim"], name="op")
    else:
        raise ValueError(f"unknown shape kind {shape.kind!r}")
    return b.build(y)


def _repeats_for(one_ns: float, target_s: float, lo: int, hi: int) -> int:
    """Timed runs that take about ``target_s`` in all, within [lo, hi]."""
    return int(min(hi, max(lo, target_s * 1e9 / max(one_ns, 1.0))))


def _timer(shape: OpShape, threads: int, rng: np.random.Generator
           ) -> Callable[[int, int], npt.NDArray[np.float64]]:
    """A prepared kernel of ``shape`` on ``threads`` pinned threads, with its
    inputs bound: ``timer(repeats, warmup)`` returns per-run ns (C++ loop)."""
    p = shape.params
    cpus = list(compact_cpus(threads))
    if shape.kind == "gemm":
        g = ops.Gemm(p["m"], p["n"], p["k"], threads=threads)
        a = rng.standard_normal(g.a_shape, dtype=np.float32)
        b = rng.standard_normal(g.b_shape, dtype=np.float32)
        out = np.empty(g.output_shape, np.float32)
        g.pin(cpus)
        return lambda n, w: g.timeit(a, b, None, out, repeats=n, warmup=w)
    if shape.kind == "conv":
        c = ops.Conv2d((p["n"], p["c"], p["h"], p["w"]), p["out_channels"],
                       (p["kh"], p["kw"]), stride=(p["stride_h"], p["stride_w"]),
                       padding=(p["pad_t"], p["pad_b"], p["pad_l"], p["pad_r"]),
                       groups=p["groups"], threads=threads)
        c.set_weights(rng.standard_normal(c.weight_shape, dtype=np.float32))
        x = rng.standard_normal(c.input_shape, dtype=np.float32)
        y = np.empty(c.output_shape, np.float32)
        c.pin(cpus)
        return lambda n, w: c.timeit(x, y, repeats=n, warmup=w)
    e = ops.EmbeddingBag(p["rows"], p["dim"], threads=threads)
    table = memory.aligned_empty((p["rows"], p["dim"]))
    table.fill(0.5)  # the values do not change the traffic
    idx = rng.integers(0, p["rows"], size=(p["batch"], p["bag"]), dtype=np.int64)
    bags = np.empty((p["batch"], p["dim"]), np.float32)
    e.pin(cpus)
    return lambda n, w: e.timeit(table, idx, None, None, bags, repeats=n, warmup=w)


def measure_scaling(shape: OpShape, threads: Sequence[int], *, repeats: int = 5,
                    target_s: float = 0.15) -> list[dict[str, Any]]:
    """Time ``shape`` as a prepared oneDNN (or embedding-bag) kernel at each
    thread count, one pinned thread per core; ``repeats`` at least, more for
    short kernels (about ``target_s`` per point). One dict per count:
    threads, cpus, ns, summary, flops, bytes."""
    stats = shape_graph(shape).stats[-1]
    rng = np.random.default_rng(0)
    points = []
    for t in threads:
        timer = _timer(shape, t, rng)
        first = timer(1, 1)
        n = _repeats_for(float(first[0]), target_s, repeats, 500)
        ns = [float(v) for v in timer(n, 2)]
        points.append({"threads": t, "cpus": list(compact_cpus(t)), "ns": ns,
                       "summary": summarize(ns).as_dict(), "flops": stats.flops,
                       "bytes": stats.bytes})
    return points


def measure_nodes(model: str, batch: int, threads: int, *, repeats: int = 5) -> dict[str, Any]:
    """Per-node times of ``model``'s heavy nodes: the graph run synchronously
    with ``threads`` intra-op threads (pinned compact, oneDNN), ``repeats``
    traced runs after a warm-up; each node's median over the runs."""
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


# The largest decoder (bytes read per token) whose generation a level
# measures: a server-sized one (llama-3.1-8b: 32 GB per token, a GGUF copy
# per thread count for llama.cpp) is `pyparbench generate`'s to run.
GENERATION_MAX_BYTES = 1 << 30


def generation_models(models: Sequence[str]) -> tuple[str, ...]:
    """The decoders whose generation a level measures: :data:`GENERATION_MODEL`,
    then the built-in decoders among ``models`` that read at most
    :data:`GENERATION_MAX_BYTES` per token."""
    return tuple(dict.fromkeys([GENERATION_MODEL, *(
        m for m in models if m in LLAMA_SIZES
        and bytes_per_token(LLAMA_SIZES[m].config, 1, 1, 1) <= GENERATION_MAX_BYTES)]))


def generation_task(model: str, threads: Sequence[int],
                    frameworks: Sequence[str] | None = None) -> OpTask:
    """The generation task of ``model``: one sequence, the size's own prompt
    and :data:`GENERATION_NEW` new tokens, one generation per thread count
    (its time per output token is already the median of its token steps),
    in each of ``frameworks`` (default :func:`generation_frameworks`)."""
    chosen = tuple(generation_frameworks(1) if frameworks is None else frameworks)
    bad = [f for f in chosen if f not in GENERATION_FRAMEWORKS]
    if bad or not chosen:
        raise ValueError(f"frameworks {list(chosen)!r}: a generation task takes one or more "
                         f"of {', '.join(GENERATION_FRAMEWORKS)}")
    return OpTask("generation", tuple(threads), model=model, batch=1, repeats=1,
                  prompt=LLAMA_SIZES[model].prompt, new=GENERATION_NEW, frameworks=chosen)


def generation_frameworks(batch: int = 1, *, torch: bool = True) -> tuple[str, ...]:
    """The runtimes a generation task measures: the native executor, then
    llama.cpp (one sequence: batch 1 only) and PyTorch (unless ``torch`` is
    False: its child alone takes seconds to start) where their packages are
    installed."""
    return ("native", *(f for f in _GENERATION_RUNTIMES
                        if not missing_packages(f) and (f != "llamacpp" or batch == 1)
                        and (f != "torch" or torch)))


def _generation_point(record: GenerationRecord, threads: int) -> dict[str, Any]:
    """A generation's figures as a record's point (prefill rate from the
    time to first token: no runtime times the prompt's step apart)."""
    if record.tpot_ms is None:
        raise ValueError(f"{record.model} generated {record.new} token(s): no token step to "
                         "time (a generation task needs new >= 2)")
    return {"framework": record.framework, "threads": threads, "ttft_ms": record.ttft_ms,
            "tpot_ms": record.tpot_ms, "tokens_per_s": record.tokens_per_s,
            "prefill_tokens_per_s": record.batch * record.prompt / (record.ttft_ms * 1e-3),
            "bytes_per_token": record.bytes_per_token, "settings": record.settings}


def measure_generation(task: OpTask, *, frameworks: Sequence[str] | None = None,
                       timeout: float = 600.0) -> list[dict[str, Any]]:
    """``task``'s decoder generating at each of its thread counts, in each of
    ``frameworks`` (default: the task's own, or where it names none
    :func:`generation_frameworks`), each generation
    in a fresh child pinned to its threads' CPUs (:func:`run_generation`,
    ``timeout`` seconds each); of ``task.repeats`` generations per point the
    one of median decode rate is kept. One dict per (framework, threads).

    Raises
    ------
    ValueError
        A task that is not a generation, a model that is not a built-in
        decoder, more threads than this machine has CPUs.
    pyparbench.child_process.ChildFailed
        A generation's child crashed or ran past ``timeout``.
    """
    if task.kind != "generation":
        raise ValueError(f"task kind must be 'generation', got {task.kind!r}")
    points = []
    chosen = (frameworks if frameworks is not None
              else task.frameworks or generation_frameworks(task.batch))
    for framework in chosen:
        for t in task.threads:
            request = GenerationRequest(task.model, task.prompt, task.new, task.batch, t,
                                        framework)
            runs = sorted((run_generation(request, timeout=timeout)
                           for _ in range(task.repeats)), key=lambda r: r.tokens_per_s)
            points.append(_generation_point(runs[len(runs) // 2], t))
    return points


def annotate(record: OpResult, peak: Peak) -> OpResult:
    """The record of a finished task with every point and node placed on
    ``peak``'s roofline (a new record; one not ``ok`` is returned as it is)."""
    if not record.ok:
        return record
    points = record.points
    if points is not None and record.task.shape is not None:
        op = record.task.shape.op
        points = tuple(replace(p, roofline=peak.ceiling(op, p.flops, p.bytes,
                                                        p.summary.median / 1e9, p.threads))
                       for p in points)
    nodes = record.nodes
    if nodes is not None and record.threads is not None:
        threads = record.threads
        nodes = tuple(replace(n, roofline=peak.ceiling(n.op, n.flops, n.bytes,
                                                       n.median_ns / 1e9, threads))
                      for n in nodes)
    return replace(record, points=points, nodes=nodes)


def run_op_task(task: OpTask, peak: Peak, *, timeout: float = 600.0,
                machine: dict[str, Any] | None = None) -> OpResult:
    """Run one task in a fresh Python process (a generation task: each
    generation in a pinned child of its own, ``timeout`` seconds each); its
    record, on the roofline (``status`` "ok") or with what went wrong (``status`` "error" or
    "timeout", as :func:`pyparbench.child_process.call` types it)."""
    base = OpResult(task.key, task, "error", time.time(),
                    machine if machine is not None else machine_fingerprint(),
                    fingerprint_id(peak.fingerprint))
    try:
        if task.kind == "generation":  # each generation pinned in a child of its own
            out: dict[str, Any] = {"generation": measure_generation(task, timeout=timeout)}
        else:
            out = child_process.call("pyparbench.harness.operators", task.as_dict(), cpus=None,
                                     env=child_process.child_env(Settings()), timeout=timeout)
    except child_process.ChildFailed as e:
        return replace(base, status=e.status, error=e.error)
    except ValueError as e:
        return replace(base, error=str(e))
    try:
        measured = OpResult.from_dict({**base.as_dict(), "status": "ok", **out},
                                      "the task's answer", placed=False)
        return annotate(measured, peak)
    except (TypeError, ValueError) as e:
        return replace(base, error=f"the result does not read: {e}")


def check_task_record(where: str, record: dict[str, Any]) -> None:
    """Raise ValueError unless ``record`` is an operator task's record."""
    if not isinstance(record.get("task"), dict):
        raise ValueError(f"{where}: no task (an object): not an operator task's record")


def run_op_tasks(tasks: Iterable[OpTask], store: ResultStore, peak: Peak, *,
                 resume: bool = True, retry_failed: bool = False, timeout: float = 600.0,
                 on_result: Callable[[OpTask, OpResult | None], None] | None = None
                 ) -> Iterator[OpResult]:
    """Run every task not in ``store`` yet (see
    :func:`~pyparbench.harness.resumable.run_resumable`), each in a fresh
    process; yields the records.

    Raises
    ------
    ValueError
        On resume, when the store holds another machine's or schema's
        records, or a record that does not read (:meth:`OpResult.from_dict`).
    """
    return run_resumable(
        tasks, store, lambda t, m: run_op_task(t, peak, timeout=timeout, machine=m),
        lambda where, r: OpResult.from_dict(r, where), resume=resume, retry_failed=retry_failed, on_result=on_result)


def _child_main() -> int:
    """In the fresh process: run the task read from stdin, print one JSON line."""
    task = OpTask.from_dict(json.loads(sys.stdin.read()))
    out: dict[str, Any]
    if task.kind == "scaling" and task.shape is not None:
        out = {"points": measure_scaling(task.shape, task.threads, repeats=task.repeats)}
    elif task.kind == "nodes":
        out = measure_nodes(task.model, task.batch, task.threads[0], repeats=task.repeats)
    else:
        raise ValueError(f"unknown task kind {task.kind!r}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
