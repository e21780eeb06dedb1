"""Framework overhead and operator scaling, measured side by side.

For one graph, input, weights and thread setting, each in its own process
(DESIGN.md, "Framework overhead, defined"):

* native latency: pyparbench's executor running the graph;
* kernel sum: every node as an isolated prepared kernel of the same shapes
  and thread count, timed in its C++ loop, summed;
* framework latency: the same graph in TensorFlow, PyTorch or ONNX Runtime,
  written the way their users write models (median of a Python loop of
  calls, as a serving loop calls them);
* framework overhead = framework latency - native latency, absolute and as
  a ratio; per op type, the framework profiler's kernel times against the
  executor's per-node times of the same ops (a kernel that fused several
  graph ops is charged to the heavy op it computes, so e.g. a folded batch
  norm shows as 0 in the framework and as extra conv2d time); the time
  outside the framework's kernels (latency - its kernel times) and its
  share of the latency;
* per-node dispatch cost (:func:`measure_dispatch`): chains of 401 and of 1
  tiny element-wise ops (ReLU and tanh in turn on (1, 16)), graph passes
  off, each runtime in its own processes at one thread and at every thread;
  (t(401) - t(1)) / 400 per node. Natively also each node's kernel alone in
  a C++ loop, and the difference: what the executor itself costs per node.

Operator scaling (:func:`operator_scaling`): each distinct heavy op of the
model (conv2d, linear, matmul, embedding_bag shapes) alone, at 1..N threads,
as a prepared kernel natively and as a one-op graph in each framework.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyparbench.frameworks.answer import FrameworkRun
from pyparbench.frameworks.launch import Job, run_child
from pyparbench.frameworks.mapping import (
    DEFAULT_MODES,
    FRAMEWORKS,
    check_framework,
    check_mode,
)
from pyparbench.frameworks.overhead_split import beyond_kernels, split_native
from pyparbench.frameworks.spec import ModelRef, build_graph, graph_to_spec
from pyparbench.graph import Graph, GraphBuilder, Node
from pyparbench.machine.fingerprint import machine_fingerprint
from pyparbench.reference import output_error
from pyparbench.settings import Settings

__all__ = ["DISPATCH_NODES", "DISPATCH_OPS", "dispatch_cost", "dispatch_graph",
           "entries", "heavy_op_graphs", "measure_dispatch", "measure_overhead", "operator_scaling"]

DISPATCH_NODES = 400
DISPATCH_OPS = ("relu", "tanh")
DISPATCH_SHAPE = (1, 16)
Progress = Callable[[str], None]


def dispatch_graph(nodes: int = DISPATCH_NODES, shape: Sequence[int] = DISPATCH_SHAPE,
                   ops: Sequence[str] = DISPATCH_OPS) -> Graph:
    """A chain of ``nodes`` tiny element-wise ops (``ops`` in turn, ReLU and
    tanh by default: no runtime folds one into the next): nearly all dispatch."""
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    if not ops:
        raise ValueError("ops must name at least one eltwise kind")
    b = GraphBuilder("eltwise-chain", seed=0)
    x = b.input("x", tuple(shape))
    for i in range(nodes):
        x = b.eltwise(x, ops[i % len(ops)])
    return b.build(x, {"batch": int(shape[0]), "nodes": nodes})


def entries(frameworks: str | Sequence[str] = "all",
            modes: Mapping[str, Sequence[str]] | None = None) -> list[tuple[str, str]]:
    """(framework, mode) pairs to run: "all" or a list of framework names,
    each with its modes (default :data:`~pyparbench.frameworks.mapping.DEFAULT_MODES`).

    Raises
    ------
    ValueError
        An unknown framework or mode, or modes for a framework not chosen.
    """
    names = list(FRAMEWORKS) if frameworks == "all" else (
        [frameworks] if isinstance(frameworks, str) else list(frameworks))
    if not names:
        raise ValueError("no framework chosen")
    for n in names:
        check_framework(n)
    modes = dict(modes or {})
    extra = set(modes) - set(names)
    if extra:
        raise ValueError(f"modes given for frameworks not chosen: {sorted(extra)}")
    out = []
    for n in dict.fromkeys(names):
        for m in modes.get(n, DEFAULT_MODES[n]):
            out.append((n, check_mode(n, m)))
    return out


def _median(job: Mapping[str, Any]) -> float | None:
    lat = job.get("latency")
    return None if lat is None else float(lat["median"])


def _per_op(kernels: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for k in kernels:
        slot = out.setdefault(k["op"], {"ns": 0.0, "calls": 0.0})
        slot["ns"] += float(k["ns"])
        slot["calls"] += float(k["calls"])
    return out


def _native_section(res: FrameworkRun) -> dict[str, Any]:
    if not res.ok:  # "error" or "timeout", as the child ended
        return {"status": res.status, "error": res.error}
    job = res.job
    if not job.ok:
        return {"status": job.status, "error": job.error}
    fig = job.figures
    per_op = {op: {"ns": v["ns"], "nodes": v["calls"]}
              for op, v in _per_op(fig.get("kernels", [])).items()}
    kernel_sum = float(sum(fig["kernel_ns"])) if "kernel_ns" in fig else None
    executed = float(sum(fig.get("inline_ns", [])))
    med = float(job.latency["median"])
    return {"status": "ok", "latency": job.latency, "kernel_sum_ns": kernel_sum,
            "executed_kernel_sum_ns": executed or None,
            "executed_nodes": sum(1 for k in fig.get("inline_ns", []) if k > 0),
            "cache_ns": fig.get("cache_ns"),
            "outside_kernels_ns": med - executed if executed else None,
            "profiled_iteration_ns": fig.get("profiled_iteration_ns"),
            "executor_over_kernels": med / kernel_sum if kernel_sum else None,
            "per_op": per_op, "audit": fig.get("native_audit"),
            "proc_audit": fig.get("proc_audit"), "setup_s": fig.get("setup_s"),
            "graph_opt": job.info.get("graph_opt"),
            "worker_cpus": job.info.get("resolved", {}).get("worker_cpus")}


def _framework_section(fw: str, mode: str, res: FrameworkRun,
                       native: Mapping[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {"framework": fw, "mode": mode,
                            "not_applicable": res.not_applicable,
                            "knobs": res.mapping.get("knobs", {}), "env": res.env}
    if res.answer is None:
        return {**base, "status": res.status, "error": res.error}
    job = res.job
    base.update({"reported": res.reported, "import_s": res.answer.import_s,
                 "core_loaded": res.answer.core_loaded})
    if not job.ok:
        return {**base, "status": job.status, "error": job.error}
    med = float(job.latency["median"])
    kernels = job.figures.get("kernels", [])
    fw_ops = _per_op(kernels)
    kernel_ns = sum(v["ns"] for op, v in fw_ops.items() if op != "other")
    other_ns = fw_ops.get("other", {}).get("ns", 0.0)
    out = {**base, "status": "ok", "latency": job.latency, "setup_s": job.figures.get("setup_s"),
           "info": job.info, "proc_audit": job.figures.get("proc_audit"),
           "kernels": kernels}
    profiled = job.figures.get("profiled_iteration_ns")
    if kernels and profiled:
        # Kernels against the profiled iterations they ran in: both carry the
        # profiler's cost, so the share is comparable; scaled to the latency.
        share = 1.0 - kernel_ns / profiled
        out.update({"kernel_ns": kernel_ns, "framework_ops_ns": other_ns,
                    "profiled_iteration_ns": profiled, "outside_share": share,
                    "outside_kernels_ns": share * med})
    nat_med = _median(native) if native["status"] == "ok" else None
    if nat_med:
        out["overhead_ns"] = med - nat_med
        out["overhead_ratio"] = med / nat_med
    rows = []
    nat_ops = native["per_op"] if native["status"] == "ok" else {}
    for op in sorted(set(nat_ops) | set(fw_ops)):
        n = nat_ops.get(op, {})
        f = fw_ops.get(op, {})
        row: dict[str, Any] = {"op": op, "native_ns": n.get("ns"), "native_nodes": n.get("nodes"),
                               "framework_ns": f.get("ns", 0.0) if kernels else None,
                               "framework_kernels": f.get("calls", 0.0) if kernels else None}
        if row["native_ns"] is not None and row["framework_ns"] is not None:
            row["overhead_ns"] = row["framework_ns"] - row["native_ns"]
            row["ratio"] = (row["framework_ns"] / row["native_ns"] if row["native_ns"]
                            else None)
        rows.append(row)
    rows.sort(key=lambda r: -(r["native_ns"] or 0.0))
    out["per_op"] = rows
    return out


def dispatch_cost(res: FrameworkRun, nodes: int) -> dict[str, Any]:
    """Per-node cost from a child's run (:func:`~.launch.run_child`) of
    the chain of ``nodes`` + 1 ops, then the chain of 1."""
    if res.first_error():
        return {"error": res.first_error()}
    long, short = res.jobs
    lo, sh = long.latency, short.latency
    out: dict[str, Any] = {
        "us_per_node": (lo["median"] - sh["median"]) / nodes / 1e3,
        # The spread: the long chain's quartiles less the short one's.
        "range_us": [(lo["q1"] - sh["q3"]) / nodes / 1e3, (lo["q3"] - sh["q1"]) / nodes / 1e3],
        "long": lo, "short": sh}
    inline = [k for k in long.figures.get("inline_ns", []) if k > 0]
    if inline:
        # The chain's own kernels alone (ReLU and tanh in turn): their mean is
        # the kernel's share of a node, the rest the executor's.
        out["kernel_alone_us"] = sum(inline) / len(inline) / 1e3
        out["executor_us"] = out["us_per_node"] - out["kernel_alone_us"]
    return out


def measure_dispatch(threads: Sequence[int] | None = None, *,
                     frameworks: str | Sequence[str] = "all",
                     modes: Mapping[str, Sequence[str]] | None = None,
                     nodes: int = DISPATCH_NODES, repeats: int = 200, warmup: int = 20,
                     inline_repeats: int = 20, settings: Settings | None = None,
                     timeout: float = 900.0, progress: Progress | None = None
                     ) -> dict[str, Any]:
    """Per-node dispatch cost, natively and in each framework.

    Chains of ``nodes`` + 1 and of 1 tiny element-wise ops (ReLU and tanh in
    turn on (1, 16)), each runtime in a fresh process per thread count,
    graph passes off; the cost per node is the difference of the two medians
    over ``nodes``. Natively each node's kernel as the plan prepared it is
    also timed alone in a C++ loop, so the executor's own part shows.

    Parameters
    ----------
    threads
        Thread counts (intra-op, one worker); default 1 and all the CPUs
        this process may use.
    frameworks, modes
        As :func:`measure_overhead`.
    settings
        Affinity and SMT policy (thread counts and passes are replaced).

    Returns
    -------
    dict
        ``nodes``, ``shape``, ``ops``, ``graph_opt`` ("none"), ``threads``
        and ``by_threads`` {"T": {"native": {``us_per_node``, ``range_us``,
        ``kernel_alone_us``, ``executor_us``, ``long``, ``short``},
        "frameworks": {"fw/mode": {``us_per_node``, ``range_us``, ...}}}}; a
        runtime that fails has ``error`` in its place.
    """
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    counts = list(dict.fromkeys(threads if threads is not None
                                else (1, len(os.sched_getaffinity(0)))))
    if not counts or any(isinstance(t, bool) or not isinstance(t, int) or t < 1 for t in counts):
        raise ValueError(f"threads must be integers >= 1, got {threads!r}")
    chosen = entries(frameworks, modes)
    base = settings if settings is not None else Settings()
    say = progress or (lambda _: None)
    long, short = graph_to_spec(dispatch_graph(nodes + 1)), graph_to_spec(dispatch_graph(1))
    by: dict[str, Any] = {}
    for t in counts:
        s = base.with_(scheduler="sync", inter_op=1, intra_op=t, operator="library",
                       instances=1, placement="shared", graph_opt="none")
        say(f"dispatch at {t} thread(s): native")
        native = run_child("native", [Job(long, repeats=repeats, warmup=warmup,
                                          inline_repeats=inline_repeats),
                                      Job(short, repeats=repeats, warmup=warmup)], s,
                           timeout=timeout)
        row: dict[str, Any] = {"native": dispatch_cost(native, nodes), "frameworks": {}}
        for fw, mode in chosen:
            say(f"dispatch at {t} thread(s): {fw} ({mode})")
            res = run_child(fw, [Job(long, repeats=repeats, warmup=warmup),
                                 Job(short, repeats=repeats, warmup=warmup)], s, mode,
                            timeout=timeout)
            row["frameworks"][f"{fw}/{mode}"] = dispatch_cost(res, nodes)
        by[str(t)] = row
    return {"nodes": nodes, "shape": list(DISPATCH_SHAPE), "ops": list(DISPATCH_OPS),
            "graph_opt": "none", "threads": counts, "by_threads": by}


def measure_overhead(model: str, batch: int, settings: Settings | None = None, *,
                     frameworks: str | Sequence[str] = "all",
                     modes: Mapping[str, Sequence[str]] | None = None,
                     repeats: int = 20, warmup: int = 5, profile: int = 10,
                     kernel_repeats: int = 10, cold_repeats: int = 3, dispatch: bool = True,
                     dispatch_nodes: int = DISPATCH_NODES,
                     dispatch_threads: Sequence[int] | None = None, scaling: bool = False,
                     max_threads: int | None = None,
                     model_kwargs: Mapping[str, Any] | None = None, seed: int = 0,
                     timeout: float = 900.0, progress: Progress | None = None
                     ) -> dict[str, Any]:
    """Framework overhead of one model, against pyparbench's executor.

    Parameters
    ----------
    model, batch
        A registered model (``pyparbench models``) and its batch size.
    settings
        Thread settings, the same for every run (mapped onto each
        framework's knobs; see :mod:`pyparbench.frameworks.mapping`);
        default one thread. ``instances`` must be 1.
    frameworks, modes
        "all" or framework names; modes per framework (default: TensorFlow
        ``function``, PyTorch ``eager`` and ``script``, ONNX Runtime ``all``).
    repeats, warmup
        Timed and untimed runs of each latency.
    profile
        Iterations under each framework's profiler (and traced native runs)
        for the per-op split; 0 leaves the split out.
    kernel_repeats
        Timed runs of each isolated kernel for the kernel sum, and single
        calls of each, warm and with the chain's data between calls
        (:mod:`pyparbench.frameworks.native.cold`).
    cold_repeats
        Single calls of each isolated kernel with every cache flushed
        between them (0: none; each flush reads twice the caches).
    dispatch, dispatch_nodes, dispatch_threads
        Also measure the per-node dispatch cost everywhere
        (:func:`measure_dispatch`: chains of ``dispatch_nodes`` + 1 and 1
        tiny ops) at ``dispatch_threads`` (default 1, the settings' intra_op
        and all CPUs); the native time outside kernels is split with it
        (:mod:`pyparbench.frameworks.overhead_split`).
    scaling, max_threads
        Also run :func:`operator_scaling` at 1..``max_threads`` threads.
    model_kwargs, seed
        Builder arguments (e.g. ``image_size``) and the weights' seed.
    timeout
        Seconds each child may take.
    progress
        Called with a line of text as each child starts.

    Returns
    -------
    dict
        JSON-serialisable: ``model``, ``batch``, ``settings``, ``machine``
        (the fingerprint), ``load_average`` (1, 5, 15 minutes, before and
        after: other work skews every figure), ``graph`` (size), ``native`` (``latency``,
        ``kernel_sum_ns``: the graph as built, before the passes, each node an
        isolated kernel, None at bf16, where the cache timings are left out
        too; ``executed_kernel_sum_ns``: the executed, optimised
        graph, each plan kernel alone; ``outside_kernels_ns``: latency less
        the latter; ``split``: that time split into executor cost,
        memory / cache effects and the rest, with ``kernels_in_chain_ns``,
        the kernel baseline of every runner
        (:mod:`~pyparbench.frameworks.overhead_split`); ``beyond_kernels_ns``:
        latency less that baseline; ``per_op``, audits), ``frameworks`` (one entry per
        framework and mode: ``status``, ``latency``, ``overhead_ns``,
        ``overhead_ratio``, ``kernel_ns``, ``outside_kernels_ns``,
        ``outside_share``, ``beyond_kernels_ns``, ``per_op`` rows, ``reported`` thread settings,
        ``not_applicable``, ``proc_audit``; or ``error``), ``dispatch`` and,
        with ``scaling``, ``scaling``. A framework that fails has
        ``status`` "error" (or "timeout": it ran past its time limit) and a
        message naming its configuration; the others still run.

    Raises
    ------
    ValueError
        An unknown model, framework or mode; a bad batch; ``instances`` > 1.
    """
    settings = settings if settings is not None else Settings()
    if not isinstance(settings, Settings):
        raise TypeError(f"settings must be a pyparbench Settings, got {settings!r}")
    if settings.instances != 1:
        raise ValueError(f"instances={settings.instances}: the frameworks run one copy of the "
                         "model; compare data parallelism with pyparbench run")
    chosen = entries(frameworks, modes)
    ref = ModelRef(model, batch, seed, dict(model_kwargs or {}))
    spec = ref.to_spec()
    graph = build_graph(spec)  # checks the model and batch here, weights made lazily
    say = progress or (lambda _: None)
    # An ONNX file: ONNX Runtime runs the file itself, so its outputs are
    # checked against the executor's on the same inputs.
    agree = bool(graph.meta.get("onnx_file"))

    # The graph as built is timed kernel by kernel at fp32 only: its
    # isolated kernels know no bf16 plan's conversions.
    isolated = kernel_repeats if settings.precision == "fp32" else 0

    def jobs(native: bool) -> list[Job]:
        # Natively the kernel sum twice: the graph as built (isolated
        # kernels) and the executed graph (the plan's kernels alone, one
        # call a repeat: a model's nodes are not tiny).
        return [Job(spec, repeats=repeats, warmup=warmup, profile=profile,
                    kernel_repeats=isolated if native else 0,
                    inline_repeats=kernel_repeats if native else 0, inline_inner=1,
                    outputs=agree,
                    cache_repeats=isolated if native else 0,
                    cold_repeats=cold_repeats if native and isolated else 0)]

    load_before = os.getloadavg()  # other work on the machine skews every figure
    say(f"native: {model} batch {batch}, {settings.label()}")
    nres = run_child("native", jobs(True), settings, timeout=timeout)
    native = _native_section(nres)
    sections = []
    for fw, mode in chosen:
        say(f"{fw} ({mode})")
        res = run_child(fw, jobs(False), settings, mode, timeout=timeout)
        # The mode the run took (OpenVINO's f32 is bf16 at precision bf16).
        sections.append(_framework_section(fw, res.config.get("mode") or mode, res, native))
        if agree and sections[-1]["status"] == "ok" and native["status"] == "ok":
            sections[-1]["output_error"] = output_error(
                nres.job.outputs(), res.job.outputs(), labels=("native", "framework"))
    result: dict[str, Any] = {
        "model": model, "batch": batch, "model_kwargs": dict(model_kwargs or {}), "seed": seed,
        "graph": {"nodes": len(graph.nodes), "heavy_ops": graph.heavy_ops,
                  "gflops": graph.flops / 1e9, "op_counts": graph.op_counts()},
        "settings": settings.as_dict(), "settings_label": settings.label(),
        "machine": machine_fingerprint(), "native": native, "frameworks": sections,
        "load_average": {"before": list(load_before), "after": list(os.getloadavg())},
    }
    executor_us = None
    if dispatch:
        counts = (dispatch_threads if dispatch_threads is not None
                  else (1, settings.intra_op, len(os.sched_getaffinity(0))))
        result["dispatch"] = measure_dispatch(
            counts, frameworks=frameworks, modes=modes, nodes=dispatch_nodes,
            settings=settings, timeout=timeout, progress=progress)
        at = result["dispatch"]["by_threads"].get(str(settings.intra_op), {}).get("native")
        executor_us = at.get("executor_us") if at else None
    if native["status"] == "ok":
        native["split"] = split_native(native, native.pop("cache_ns"), executor_us)
        native["beyond_kernels_ns"] = beyond_kernels(_median(native) or 0.0, native["split"])
        for f in sections:
            if f["status"] == "ok":
                f["beyond_kernels_ns"] = beyond_kernels(float(f["latency"]["median"]),
                                                        native["split"])
    if scaling:
        result["scaling"] = operator_scaling(
            model, batch, frameworks=frameworks, modes=modes, max_threads=max_threads,
            settings=settings, repeats=repeats, warmup=warmup, model_kwargs=model_kwargs,
            seed=seed, timeout=timeout, progress=progress)
    return result


# --------------------------------------------------------------- scaling


def _op_key(graph: Graph, node: Node) -> str:
    # A fused ReLU does not make another shape.
    ins = [graph.nodes[j].shape for j in node.inputs]
    return json.dumps([node.op, ins, {k: v for k, v in sorted(node.attrs.items())
                                      if k != "relu"}, node.params.shapes], default=list)


def _describe_op(graph: Graph, node: Node) -> str:
    ins = "x".join(",".join(map(str, graph.nodes[j].shape)) for j in node.inputs)
    a = node.attrs
    if node.op == "conv2d":
        o, _, kh, kw = node.params.shapes["weight"]
        g = f" groups {a['groups']}" if a["groups"] > 1 else ""
        return f"conv2d ({ins}) -> {o} {kh}x{kw}/{a['stride'][0]}{g}"
    if node.op == "linear":
        return f"linear ({ins}) -> {node.shape[-1]}"
    if node.op == "embedding_bag":
        rows, dim = node.params.shapes["table"]
        return f"embedding_bag ({ins}) from {rows}x{dim}"
    return f"{node.op} ({ins}) -> ({','.join(map(str, node.shape))})"


def heavy_op_graphs(graph: Graph) -> list[dict[str, Any]]:
    """Each distinct heavy op of ``graph`` (same op, input shapes, attributes
    but a fused ReLU, and parameter shapes) as a one-op graph, made like its
    first node: ``node`` (that node's name), ``count``, ``describe``, ``graph``."""
    seen: dict[str, dict[str, Any]] = {}
    for node in graph.nodes:
        if not node.heavy:
            continue
        key = _op_key(graph, node)
        if key in seen:
            seen[key]["count"] += 1
            continue
        b = GraphBuilder(f"{graph.name}:{node.name}", seed=node.id)
        ins = [b.input(f"in{k}", graph.nodes[j].shape, graph.nodes[j].dtype)
               for k, j in enumerate(node.inputs)]
        a, p = node.attrs, node.params.shapes
        if node.op == "conv2d":
            o, _, kh, kw = p["weight"]
            y = b.conv2d(ins[0], o, (kh, kw), stride=a["stride"], padding=a["padding"],
                         dilation=a["dilation"], groups=a["groups"], bias="bias" in p,
                         relu=a["relu"], name="op")
        elif node.op == "linear":
            y = b.linear(ins[0], p["weight"][0], bias="bias" in p, relu=a["relu"], name="op")
        elif node.op == "matmul":
            y = b.matmul(ins[0], ins[1], trans_b=a["trans_b"], name="op")
        elif node.op == "embedding_bag":
            rows, dim = p["table"]
            y = b.embedding_bag(ins[0], rows, dim, mode=a["mode"], name="op")
        else:
            raise ValueError(f"node {node.name!r} ({node.op}) has no one-op graph the "
                             "frameworks run: an int8 node of a quantized file runs in the "
                             "native executor, its file in ONNX Runtime and OpenVINO whole")
        seen[key] = {"node": node.name, "count": 1, "describe": _describe_op(graph, node),
                     "graph": b.build(y)}
    return list(seen.values())


def operator_scaling(model: str, batch: int, *, frameworks: str | Sequence[str] = "all",
                     modes: Mapping[str, Sequence[str]] | None = None,
                     max_threads: int | None = None, settings: Settings | None = None,
                     repeats: int = 20, warmup: int = 5,
                     model_kwargs: Mapping[str, Any] | None = None, seed: int = 0,
                     timeout: float = 900.0, progress: Progress | None = None
                     ) -> dict[str, Any]:
    """Latency of each distinct heavy op of a model at 1..N threads.

    Natively each op is a prepared kernel timed in its C++ loop; in each
    framework it is a one-op graph timed as a model is. Every thread count
    runs in its own processes (a framework's pools are fixed once made).
    ``settings`` gives the affinity and SMT policy (its thread counts are
    replaced: one worker of t threads); ``max_threads`` defaults to the
    CPUs this process may use.

    Returns
    -------
    dict
        ``threads`` (the counts), ``ops`` (per op: ``describe``, ``node``,
        ``count`` in the model, ``ns`` per runner ("native",
        "tensorflow/function", ...) per thread count, and ``speedup``
        (time at 1 thread / time at the most), ``errors``.
    """
    base = settings if settings is not None else Settings()
    n = max_threads if max_threads is not None else len(os.sched_getaffinity(0))
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"max_threads must be an integer >= 1, got {n!r}")
    chosen = entries(frameworks, modes)
    graph = build_graph(ModelRef(model, batch, seed, dict(model_kwargs or {})).to_spec())
    ops = heavy_op_graphs(graph)
    say = progress or (lambda _: None)
    threads = list(range(1, n + 1))
    runners = ["native"] + [f"{fw}/{m}" for fw, m in chosen]
    table: list[dict[str, dict[str, float | None]]] = [
        {r: {} for r in runners} for _ in ops]
    errors: list[str] = []
    for t in threads:
        s = base.with_(scheduler="sync", inter_op=1, intra_op=t, instances=1,
                       placement="shared")
        say(f"scaling at {t} thread(s): native")
        native = run_child("native", [Job(o["graph"], repeats=0, warmup=0,
                                          kernel_repeats=repeats) for o in ops], s,
                           timeout=timeout)
        results = [("native", native)]
        for fw, mode in chosen:
            say(f"scaling at {t} thread(s): {fw} ({mode})")
            results.append((f"{fw}/{mode}", run_child(
                fw, [Job(o["graph"], repeats=repeats, warmup=warmup) for o in ops], s, mode,
                timeout=timeout)))
        for name, res in results:
            if not res.ok:
                errors.append(res.error)
                continue
            for i, job in enumerate(res.jobs):
                if not job.ok:
                    errors.append(job.error)
                    table[i][name][str(t)] = None
                elif name == "native":
                    table[i][name][str(t)] = max(job.figures.get("kernel_ns", [0.0]))
                else:
                    table[i][name][str(t)] = float(job.latency["median"])
    out_ops = []
    for o, row in zip(ops, table, strict=True):
        speedup = {}
        for r, by_t in row.items():
            first, last = by_t.get("1"), by_t.get(str(n))
            speedup[r] = first / last if first and last else None
        out_ops.append({"describe": o["describe"], "node": o["node"], "count": o["count"],
                        "ns": row, "speedup": speedup})
    return {"model": model, "batch": batch, "threads": threads,
            "settings": base.as_dict(), "ops": out_ops, "errors": errors}
