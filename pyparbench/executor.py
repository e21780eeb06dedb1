"""Compile a Graph into a native plan and run it under Settings.

``compile_graph(graph)`` makes a
:class:`CompiledGraph`: the graph is rewritten by the optimisation passes
that ``Settings.graph_opt`` asks for (and the library / operator mode
allows: :mod:`pyparbench.graph.passes`), and each such optimised graph gets
a native plan, which holds one buffer per node and, for each execution
setting used, the prepared kernels; ``run()`` times it in C++
with no Python between nodes, and can return a per-node trace (Chrome trace
JSON via :meth:`RunRecord.chrome_trace`) and a threading audit.

Each node gets its own thread count when a plan is prepared (the per-node
thread rule, ``csrc/pyparbench/graph/thread_rule.hpp``): a node whose
estimated work on one core is below the calibrated break-even of a team of
``intra_op`` threads runs alone on its worker's thread, by a direct kernel
where its op has one (element-wise ops, add / mul, softmax, layer norm,
pooling); :meth:`CompiledGraph.node_threads` gives every node's count and
why, traces and audits carry them.

Instances (data parallelism) need the model at a slice of the batch, so they
are run by :func:`run_model`, which builds one graph per instance.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pyparbench._core import graph as _g
from pyparbench._core import threading as _t
from pyparbench.graph import NATIVE_ATTRS, NO_KERNEL_OPS, Graph, Node
from pyparbench.graph.builder import rebuild
from pyparbench.graph.passes import (BLOCKED_LAYOUTS, PASSES, OptimizeResult, cache_budget_bytes,
                                     optimize, pipeline)
from pyparbench.graph.passes.quantize import (Range, calibration_inputs, converts, int8_ready,
                                              to_int8)
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.memory import check_fits
from pyparbench.models import build
from pyparbench.settings import Settings, numa_domains, team_cpus
from pyparbench.threading.audit import (NodeThreads, ThreadAudit, ThreadingMismatch,
                                        ThreadingMismatchError)
from pyparbench.threading.placement import place
from pyparbench.threading.topology import Topology
from pyparbench.threading.topology import topology as this_machine
from pyparbench.timing import Summary, summarize

__all__ = ["CALIBRATION_SEED", "CompiledGraph", "InstancesRunner", "NodePrecision", "RunRecord",
           "TraceEvent", "branch_groups", "compile_graph", "instances_runner", "int8_graph",
           "int8_model", "model_runner", "resolve", "run_instances", "run_model",
           "team_budget_bytes"]


@dataclass(frozen=True)
class TraceEvent:
    node: int
    name: str
    op: str
    worker: int
    cpu: int
    start_ns: float
    end_ns: float
    # What computed a convolution: oneDNN's implementation ("jit:avx2",
    # "brgconv:avx512_core", ...) or "im2col+" and the product's;
    # "direct:<isa>" for a node a direct kernel ran; "streamed:<isa>" for
    # a linear node of a few rows (ops.StreamedLinear); empty for other ops.
    kernel: str = ""
    # The node's team: 1 when the per-node thread rule ran it alone.
    threads: int = 1
    # "bf16" for a conv2d / linear / matmul that multiplied in bf16 (a run at
    # Settings(precision="bf16")), and whether oneDNN's kernel for it
    # emulates bf16 (no bf16 dot products on this CPU or under an ISA cap).
    precision: str = "fp32"
    emulated: bool = False


@dataclass(frozen=True)
class NodePrecision:
    """How one node of the optimised graph computes under a setting: its
    precision ("bf16" for a matrix node of a bf16 run, else "fp32"), what
    computes it (oneDNN's implementation name for a convolution or a bf16
    node, "direct:<isa>" for a direct kernel, else empty) and whether its
    bf16 kernel is emulated (decided from the implementation oneDNN
    picked: dnnl_compat.hpp)."""

    node: int
    name: str
    op: str
    precision: str
    implementation: str
    emulated: bool


@dataclass
class RunRecord:
    """What one run of a compiled graph measured."""

    graph: str
    batch: int
    settings: Settings
    resolved: dict[str, Any]
    ns: list[float]
    summary: Summary
    trace: list[TraceEvent] = field(default_factory=list)
    audit: ThreadAudit | None = None
    mismatches: list[str] = field(default_factory=list)
    per_instance: list[list[float]] = field(default_factory=list)
    # Per node of the optimised graph, its threads under the per-node rule
    # (filled in for traced or audited runs).
    node_threads: list[NodeThreads] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-serialisable record (settings, resolved settings, timings)."""
        return {
            "graph": self.graph, "batch": self.batch, "settings": self.settings.as_dict(),
            "resolved": self.resolved, "ns": self.ns, "summary": self.summary.as_dict(),
            "mismatches": self.mismatches,
            "audit": None if self.audit is None else self.audit.to_list(),
            "per_instance": self.per_instance,
        }

    def chrome_trace(self) -> dict[str, Any]:
        """The trace as Chrome trace JSON (chrome://tracing, Perfetto): one
        row per inter-op worker, one slice per node."""
        events = [{"name": e.name, "cat": e.op, "ph": "X", "pid": 0, "tid": e.worker,
                   "ts": e.start_ns / 1e3, "dur": max(e.end_ns - e.start_ns, 0.0) / 1e3,
                   "args": {"node": e.node, "cpu": e.cpu, "threads": e.threads,
                            **({"kernel": e.kernel} if e.kernel else {}),
                            **({"precision": e.precision, "emulated": e.emulated}
                               if e.precision != "fp32" else {})}}
                  for e in self.trace]
        meta = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": w,
                 "args": {"name": f"worker {w}"}} for w in sorted({e.worker for e in self.trace})]
        return {"traceEvents": meta + events, "displayTimeUnit": "ms",
                "otherData": {"graph": self.graph, "settings": self.settings.label()}}

    def write_chrome_trace(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.chrome_trace()))


def branch_groups(graph: Graph, groups: int) -> list[int]:
    """The core group each node prefers under ``placement="per-socket"``.

    Where the graph forks (a node with several consumers), consumer k of the
    fork starts a branch in group k % groups; any other node stays in its
    first input's group (so a join, such as Inception's concat, follows its
    first branch).
    """
    group = [0] * len(graph.nodes)
    consumers = graph.consumers
    for node in graph.nodes:
        if node.inputs:
            src = node.inputs[0]
            outs = consumers[src]
            group[node.id] = outs.index(node.id) % groups if len(outs) > 1 else group[src]
    return group


def resolve(settings: Settings, graph: Graph, topology: Topology | None = None,
            cpus: Sequence[int] | None = None, alone_below_ns: float | None = None
            ) -> _g.ExecSettings:
    """Native execution settings: placement resolved to CPU lists, the
    per-socket placement to node groups. ``cpus``: the CPUs this run may use
    (an instance's share), else all the process may use. ``alone_below_ns``:
    the per-node thread rule's threshold (None: calibrated on this machine;
    0: the rule off, every node on intra_op threads)."""
    topo = topology if topology is not None else this_machine()
    s = _g.ExecSettings()
    if alone_below_ns is not None:
        if not math.isfinite(alone_below_ns) or alone_below_ns < 0:
            raise ValueError(f"alone_below_ns must be a finite number of ns >= 0 (or None: "
                             f"calibrated), got {alone_below_ns!r}")
        s.alone_below_ns = float(alone_below_ns)
    s.scheduler = settings.scheduler
    s.operator = settings.operator
    s.inter_op = settings.inter_op
    s.intra_op = settings.intra_op
    s.library = settings.library
    s.pool = settings.pool
    if cpus is not None:
        # An instance's share, in compact order: worker w takes the next
        # intra_op CPUs (the affinity policy chose the share).
        n = settings.inter_op * settings.intra_op
        if len(cpus) < n:
            raise ValueError(f"{n} threads need {n} CPUs, this instance has {list(cpus)}")
        s.worker_cpus = [list(cpus[w * settings.intra_op:(w + 1) * settings.intra_op])
                         for w in range(settings.inter_op)]
    else:
        placement = place(topo, settings.affinity, settings.inter_op, settings.intra_op,
                          smt=settings.smt)
        if placement.pinned:
            s.worker_cpus = [list(p or ()) for p in placement.pools]
    if settings.placement == "per-socket":
        # On a package with several NUMA nodes (SNC, NPS), the groups are the
        # NUMA domains: compact placement keeps a group's workers in one.
        domains = numa_domains(topo)
        s.groups = min(settings.inter_op, domains if domains > 1 else 2)
        s.node_group = branch_groups(graph, s.groups)
    return s


def _resolved_dict(s: _g.ExecSettings) -> dict[str, Any]:
    return {"scheduler": s.scheduler, "operator": s.operator, "inter_op": s.inter_op,
            "intra_op": s.intra_op, "library": s.library, "pool": s.pool,
            "worker_cpus": [list(c) for c in s.worker_cpus], "groups": s.groups}


def _spec(node: Node) -> _g.NodeSpec:
    """The node as the native plan's NodeSpec: the attributes the plan takes
    (graph.opdefs.NATIVE_ATTRS) under the same names, tuples as lists."""
    spec = _g.NodeSpec()
    spec.op = "input" if node.op == "constant" else node.op  # set once, see _Variant
    spec.name = node.name
    spec.inputs = list(node.inputs)
    spec.shape = list(node.shape)
    spec.int64 = node.dtype == "int64"
    # The bf16 plan (graph.passes.precision): conversions and bf16 matrix nodes.
    spec.bf16 = node.dtype == "bfloat16"
    # Int8 values kept as bytes between int8 nodes (graph.passes.int8_values).
    spec.int8 = node.dtype in ("uint8", "int8")
    spec.precision = node.attrs.get("precision", "fp32")
    for attr in NATIVE_ATTRS.get(node.op, ()):
        value = node.attrs[attr]
        setattr(spec, attr, list(value) if isinstance(value, tuple) else value)
    if "x_dtype" in node.attrs:  # an int8 node: its input's and output's types
        spec.kind = node.attrs["x_dtype"]
        spec.mode = node.attrs.get("out_dtype", "float32")
    if node.attrs.get("table_format") == "byte_rowwise":  # an embedding bag's 8-bit table
        spec.kind = "byte_rowwise"
    # What the optimisation passes set (graph.opdefs.PASS_ATTRS).
    spec.activation = node.attrs.get("activation") or ""
    spec.layout = node.attrs.get("layout", "nchw")
    # A reorder without its source named converts between NCHW and NHWC.
    source = ("nchw" if spec.layout != "nchw" else "nhwc") if node.op == "reorder" else spec.layout
    spec.input_layout = node.attrs.get("input_layout", source)
    spec.inplace = int(node.attrs.get("inplace", -1))
    spec.im2col = bool(node.attrs.get("im2col", False))
    return spec


def _dequantized(arr: npt.NDArray[Any], n: Node) -> npt.NDArray[np.float32]:
    """The float32 values of an int8 node's grid bytes (graph.passes.int8_values)."""
    prefix = "x" if n.op == "fake_quantize" else "out"
    q = arr.view(np.int8) if n.dtype == "int8" else arr
    zp = np.float32(n.params[f"{prefix}_zero_point"][0])
    return np.asarray((q.astype(np.float32) - zp) * np.float32(n.params[f"{prefix}_scale"][0]),
                      np.float32)


def _as_nchw(arr: npt.NDArray[Any], shape: Sequence[int], layout: str) -> npt.NDArray[Any]:
    """A 4-D value stored as ``layout`` (pyparbench.graph.passes) in NCHW."""
    b, c, h, w = shape
    if layout == "nhwc":
        return np.ascontiguousarray(arr.reshape(b, h, w, c).transpose(0, 3, 1, 2))
    if layout in BLOCKED_LAYOUTS:
        k = BLOCKED_LAYOUTS[layout]
        return np.ascontiguousarray(arr.reshape(b, c // k, h, w, k).transpose(0, 1, 4, 2, 3)
                                    .reshape(b, c, h, w))
    return arr


class _Variant:
    """One optimised graph and its native plan (``weights_in_place``: as
    :func:`compile_graph`)."""

    def __init__(self, opt: OptimizeResult, weights_in_place: bool = False) -> None:
        self.opt = opt
        self.graph = opt.graph
        specs = []
        self.params: list[npt.NDArray[np.float32]] = []  # the plan borrows these
        for node in self.graph.nodes:
            spec = _spec(node)
            if node.op != "constant":
                for name in node.params:
                    arr = np.ascontiguousarray(node.params[name], dtype=np.float32)
                    self.params.append(arr)
                    spec.set_param(name, arr)
            specs.append(spec)
        self.plan = _g.Plan(specs, list(self.graph.outputs),
                            reuse_buffers="memory" in opt.applied,
                            weights_in_place=weights_in_place)
        # A constant is an input of the plan filled here, once: no node
        # writes into an input's buffer, so it keeps its value for every run.
        for node in self.graph.nodes:
            if node.op == "constant":
                self.plan.set_input(node.id, np.ascontiguousarray(node.params["value"],
                                                                  dtype=np.float32))

    def outputs(self, nodes: Sequence[int]) -> list[npt.NDArray[Any]]:
        """Nodes' values in NCHW whatever layout they are stored in, all
        copied from one run (the plan never copies them during a run)."""
        out = []
        for node, arr in zip(nodes, self.plan.outputs(list(nodes)), strict=True):
            n = self.graph[node]
            if n.dtype in ("uint8", "int8"):
                arr = _dequantized(arr, n)
            if len(n.shape) == 4 and n.op != "global_avg_pool":
                arr = _as_nchw(arr, n.shape, n.attrs.get("layout", "nchw"))
            out.append(arr)
        return out


def team_budget_bytes(settings: Settings, topo: Topology | None = None) -> int:
    """The micro-batch pass's cache budget for a run under ``settings`` on
    ``topo`` (default: this machine): a share of the caches its first team
    runs in (:func:`~pyparbench.settings.team_cpus`)."""
    if topo is None:
        return _this_machine_team_budget(settings.instances, settings.inter_op,
                                         settings.intra_op, settings.affinity, settings.smt,
                                         tuple(_t.process_allowed_cpus()))
    return cache_budget_bytes(topo, team_cpus(settings, topo))


@functools.lru_cache(maxsize=256)
def _this_machine_team_budget(instances: int, inter_op: int, intra_op: int, affinity: Any,
                              smt: bool, allowed: tuple[int, ...]) -> int:
    # Keyed by what places the team and by the CPUs the process may use, so
    # each plan's compile loads the topology once, not each run.
    settings = Settings(scheduler="async" if inter_op > 1 else "sync", inter_op=inter_op,
                        intra_op=intra_op, affinity=affinity, smt=smt, instances=instances)
    return cache_budget_bytes(cpus=team_cpus(settings, this_machine()))


class CompiledGraph:
    """A graph compiled to native plans (see the module docstring): one per
    optimised graph that the settings run so far asked for."""

    def __init__(self, graph: Graph, *, weights_in_place: bool = False) -> None:
        self.graph = graph
        self.weights_in_place = weights_in_place
        # The native plan trusts every shape it is given: a graph put
        # together by hand is checked (node by node, as the builder would)
        # before the passes and the plan see it.
        self._checked = rebuild(graph)
        # Checked before any weight is made (rebuilding makes none).
        check_fits(f"model {graph.meta.get('model', graph.name)!r}",
                   4 * self._checked.num_params)
        # Held by set_inputs, run and outputs: threads sharing this graph
        # never see half of another call's inputs, nor outputs of two runs.
        self._lock = threading.Lock()
        self._variants: dict[tuple[str, ...], _Variant] = {}
        # The int8 graph, made on the first run at precision int8.
        self._int8: Graph | None = None
        self._inputs: dict[str, npt.NDArray[Any]] = {}
        # Inputs bound to a caller's buffer (bind_state), never copied.
        self._bound: dict[str, npt.NDArray[np.float32]] = {}
        with self._lock:
            self._last = self._variant(Settings())
        self.set_inputs(graph.random_inputs(seed=0))

    def optimization(self, settings: Settings | None = None) -> OptimizeResult:
        """The optimised graph run under ``settings`` (default: Settings()),
        the passes applied and those skipped, with the reason."""
        with self._lock:
            return self._variant(settings or Settings()).opt

    def optimized(self, settings: Settings | None = None) -> Graph:
        """The graph the plan runs under ``settings`` (its node ids are those
        of traces, blocks() and output())."""
        return self.optimization(settings).graph

    @property
    def _plan(self) -> _g.Plan:
        """The native plan of the last run's optimised graph."""
        return self._last.plan

    def _variant(self, settings: Settings) -> _Variant:
        wanted = pipeline(settings.graph_opt)
        budget = team_budget_bytes(settings) if "microbatch" in wanted else 0
        key = (*wanted, settings.library, settings.operator, str(budget), settings.precision)
        v = self._variants.get(key)
        if v is None:
            source = self._checked
            if settings.precision == "int8":
                if self._int8 is None:
                    self._int8 = int8_graph(self._checked)
                source = self._int8
            opt = optimize(source, wanted, library=settings.library,
                           operator=settings.operator, budget_bytes=budget,
                           precision=settings.precision)
            # Settings that end with the same passes and precision share one plan.
            same = next((u for u in self._variants.values()
                         if u.opt.applied == opt.applied and u.opt.skipped == opt.skipped
                         and u.opt.precision == opt.precision), None)
            v = same if same is not None else _Variant(opt, self.weights_in_place)
            if same is None and self._inputs:
                self._copy_inputs(v, self._inputs)
            if same is None:
                for name, arr in self._bound.items():
                    v.plan.bind_input(v.graph[name].id, arr)
            self._variants[key] = v
        return v

    def bind_state(self, name: str, array: npt.NDArray[np.float32]) -> None:
        """Point float32 graph input ``name`` at ``array`` in every plan of
        this graph, now and later, without a copy: the plan reads it there and
        a node may write it in place (a decode step's cache kept across runs,
        :func:`pyparbench.models.llama.llama_step`). ``array`` must be
        writable, C-contiguous float32 of the input's shape; this graph keeps
        a reference to it. A bound input is no longer given to
        :meth:`set_inputs`.

        Raises
        ------
        ValueError
            ``name`` is not a float32 graph input, or is viewed by a reshape /
            slice (it must be read where it is); KeyError for no node of that
            name.
        TypeError
            ``array`` is not float32 or not C-contiguous (a read-only one:
            ValueError).
        """
        node = self.graph[name]
        if node.op != "input" or node.dtype != "float32":
            raise ValueError(f"only a float32 graph input can be bound to a buffer, got "
                             f"{name!r} ({node.op}, {node.dtype})")
        with self._lock:
            for v in {id(v): v for v in self._variants.values()}.values():
                v.plan.bind_input(v.graph[name].id, array)
            self._bound[name] = array
            self._inputs.pop(name, None)

    def set_inputs(self, inputs: Mapping[str, npt.ArrayLike]) -> None:
        """Copy graph inputs (by name) into the plans; every input must be
        given, except those bound to a buffer (:meth:`bind_state`)."""
        names = {self.graph[i].name: i for i in self.graph.inputs}
        unknown = set(inputs) - set(names)
        if unknown:
            raise ValueError(f"unknown graph inputs {sorted(unknown)}; inputs are "
                             f"{sorted(names)}")
        bound = set(inputs) & set(self._bound)
        if bound:
            raise ValueError(f"graph inputs {sorted(bound)} are bound to buffers "
                             "(bind_state): write those buffers instead")
        missing = set(names) - set(inputs) - set(self._bound)
        if missing:
            raise ValueError(f"missing graph inputs {sorted(missing)}")
        arrays = {}
        for name, arr in inputs.items():
            node = self.graph[names[name]]
            given = np.asarray(arr)
            if node.dtype == "int64" and given.dtype.kind not in "iub":
                # Casting would truncate token ids or indices without a word.
                raise ValueError(f"graph input {name!r} takes integers (int64), got "
                                 f"{given.dtype} values")
            dtype = np.int64 if node.dtype == "int64" else np.float32
            arrays[name] = np.ascontiguousarray(given, dtype=dtype)
        with self._lock:
            for v in {id(v): v for v in self._variants.values()}.values():
                self._copy_inputs(v, arrays)
            self._inputs = arrays

    @staticmethod
    def _copy_inputs(v: _Variant, arrays: Mapping[str, npt.NDArray[Any]]) -> None:
        # The passes keep every input node and its name.
        for name, arr in arrays.items():
            v.plan.set_input(v.graph[name].id, arr)

    def outputs(self) -> dict[str, npt.NDArray[Any]]:
        """The graph outputs of the last run, by name (float32; int64 for an
        int64 input that is also an output), all from that one run even
        while other threads run this graph."""
        with self._lock:
            last = self._last
            g = last.graph
            return dict(zip((g[o].name for o in g.outputs), last.outputs(g.outputs), strict=True))

    def output(self, node: int | str) -> npt.NDArray[Any]:
        """A node's output of the last run (a copy, NCHW; int64 for an int64
        node). ``node`` is a node of the graph as built (``self.graph``), by
        name or id; the passes keep a node's name where its value survives
        (a conv fused with the ReLU after it is the ReLU's node), so it is
        read from the optimised graph's node of that name (:meth:`optimized`).

        Raises
        ------
        IndexError
            An id outside the graph (naming the id and the range).
        KeyError
            No node of that name.
        ValueError
            The passes fused the node into another, or, after the ``memory``
            pass (in ``full``), a later node reused its buffer (graph inputs
            and outputs are always kept; ``graph_opt="none"`` keeps every
            node, a graph_opt without ``memory`` every value of the
            optimised graph).
        """
        if isinstance(node, (bool, np.bool_)) or not isinstance(node, (int, np.integer, str)):
            raise TypeError(f"node must be a node's name or id, got {node!r}")
        if isinstance(node, str):
            name = self.graph[node].name
        else:
            if not 0 <= node < len(self.graph):
                raise IndexError(f"node {node} is out of range: the graph has nodes 0.."
                                 f"{len(self.graph) - 1}")
            name = self.graph.nodes[int(node)].name
        with self._lock:
            last = self._last
            if name not in {n.name for n in last.graph}:
                raise ValueError(f"node {name!r} is not in the graph that ran: the graph passes "
                                 f"({'+'.join(last.opt.applied) or 'none'}) fused it into a "
                                 "later node; run with graph_opt='none' to read every node")
            try:
                return last.outputs([last.graph[name].id])[0]
            except ValueError as e:
                if "memory" not in last.opt.applied:
                    raise
                raise ValueError(f"{e}; run with a graph_opt without the memory pass, e.g. "
                                 f"{'+'.join(p for p in PASSES if p != 'memory')!r}") from None

    def blocks(self, settings: Settings, *, alone_below_ns: float | None = None) -> list[int]:
        """Blocks each node of the optimised graph is cut into under
        ``settings`` (framework mode; 1 for a node that runs alone,
        ``alone_below_ns`` as in :meth:`run`)."""
        with self._lock:
            v = self._variant(settings)
            return list(v.plan.blocks(resolve(settings, v.graph,
                                              alone_below_ns=alone_below_ns)))

    def node_threads(self, settings: Settings | None = None, *,
                     alone_below_ns: float | None = None) -> list[NodeThreads]:
        """Each node of the optimised graph under ``settings`` (default:
        Settings()): its threads under the per-node rule, and why
        (``alone_below_ns`` as in :meth:`run`)."""
        settings = settings or Settings()
        with self._lock:
            v = self._variant(settings)
            return _node_threads(v, resolve(settings, v.graph, alone_below_ns=alone_below_ns))

    def node_precisions(self, settings: Settings | None = None) -> list[NodePrecision]:
        """Each node of the optimised graph under ``settings`` (default:
        Settings()): its precision, implementation and whether it runs
        emulated (:class:`NodePrecision`; the kernels are prepared if they
        were not)."""
        settings = settings or Settings()
        with self._lock:
            v = self._variant(settings)
            native = resolve(settings, v.graph)
            return _node_precisions(v.graph, v.plan.implementations(native),
                                    v.plan.emulated(native))

    def time_nodes(self, settings: Settings | None = None, *, repeats: int = 10,
                   warmup: int = 2, inner: int = 1000) -> list[float]:
        """Each node of the optimised graph under ``settings``: its kernel as
        the plan prepared it (threads, direct or library), alone in a C++
        loop on the calling thread, ``inner`` calls per repeat: the median ns
        per call (0.0 for a node that computes nothing). A chain's time per
        node less this is what the executor itself costs per node."""
        settings = settings or Settings()
        with self._lock:
            v = self._variant(settings)
            native = resolve(settings, v.graph)
            out = []
            for node in v.graph.nodes:
                if node.op in NO_KERNEL_OPS:
                    out.append(0.0)
                    continue
                ns = v.plan.time_node(native, node.id, repeats=repeats, warmup=warmup,
                                      inner=inner)
                out.append(float(statistics.median(ns)))
            return out

    def time_node(self, name: str, settings: Settings | None = None, *, repeats: int = 10,
                  warmup: int = 2, inner: int = 1) -> list[float]:
        """Node ``name`` of the optimised graph under ``settings``, as
        :meth:`time_nodes` times it: each repeat's ns per call (``inner``
        calls a repeat). KeyError for no node of that name."""
        settings = settings or Settings()
        with self._lock:
            v = self._variant(settings)
            node = v.graph[name]
            if node.op in NO_KERNEL_OPS:
                return [0.0] * repeats
            return [float(t) for t in v.plan.time_node(resolve(settings, v.graph), node.id,
                                                       repeats=repeats, warmup=warmup,
                                                       inner=inner)]

    def stepper(self, settings: Settings | None = None) -> Callable[[], float]:
        """One run of the plan per call (no warm-up), under ``settings``
        resolved once here: for a loop that runs the graph many times between
        changes of its inputs (a generation's steps), where resolving the
        setting each time (the machine's topology read) would cost more than
        a small graph's run. Each call returns the run's ns; :meth:`outputs`
        then reads it. ValueError for ``instances`` > 1, as :meth:`run`."""
        settings = _one_instance(settings)
        with self._lock:
            v = self._variant(settings)
            native = resolve(settings, v.graph)

        def once() -> float:
            with self._lock:
                self._last = v
                res = v.plan.run(native, repeats=1, warmup=0, trace=False, audit=None)
            return float(res["ns"][0])

        return once

    def run(self, settings: Settings | None = None, *, repeats: int = 10, warmup: int = 2,
            trace: bool = False, audit: bool = False, strict: bool = False,
            topology: Topology | None = None, alone_below_ns: float | None = None
            ) -> RunRecord:
        """Run ``warmup`` + ``repeats`` times under ``settings`` (default: sync,
        one thread) and return the per-repeat times.

        ``trace``: record each node's start/end, worker, CPU and threads in
        the last repeat. ``audit``: record which threads worked where and
        compare with the request (a ``ThreadingMismatch`` warning, or an
        error when ``strict``); it lists the nodes that ran alone and why.
        ``alone_below_ns``: the per-node thread rule's threshold, ns of a
        node's estimated work on one core below which it runs alone (None:
        the break-even calibrated on this machine; 0: the rule off).
        ``instances`` > 1 needs :func:`run_model`.
        """
        settings = _one_instance(settings)
        with self._lock:
            v = self._variant(settings)
            self._last = v
            g = v.graph
            native = resolve(settings, g, topology, alone_below_ns=alone_below_ns)
            recorder = _t.Audit() if audit else None
            res = v.plan.run(native, repeats=repeats, warmup=warmup, trace=trace,
                             audit=recorder)
        ns = [float(x) for x in res["ns"]]
        kernels = v.plan.implementations(native) if trace else []
        emulated = v.plan.emulated(native) if trace or settings.precision != "fp32" else []
        events = [TraceEvent(n, g[n].name, g[n].op, w, c, s, e, kernels[n], t,
                             g[n].attrs.get("precision", "fp32"), emulated[n])
                  for (n, w, c, s, e, t) in res["trace"]]
        resolved = _resolved_dict(native)
        if settings.precision != "fp32":
            resolved["precision"] = (_int8_dict(g) if settings.precision == "int8"
                                     else _precision_dict(g, emulated))
        resolved["graph_opt"] = _graph_opt_dict(settings, self.graph, v.opt)
        resolved["graph_opt"]["buffer_bytes"] = v.plan.allocated_bytes
        if "im2col" in v.opt.applied:
            resolved["graph_opt"]["details"]["im2col"] = _lowered(g, v.plan.implementations(native))
        record = RunRecord(self.graph.name, self.graph.meta.get("batch", _batch(self.graph)),
                           settings, resolved, ns, summarize(ns), events)
        if trace or recorder is not None:
            with self._lock:
                record.node_threads = _node_threads(v, native)
        if recorder is not None:
            record.audit = ThreadAudit.from_native(recorder.threads(), tuple(record.node_threads))
            record.mismatches = audit_mismatches(native, record.audit)
            _report(record.mismatches, strict)
        return record


def _one_instance(settings: Settings | None) -> Settings:
    """``settings`` (default: sync, one thread) for one compiled graph: a
    ValueError for ``instances`` > 1, which runs copies of the model."""
    settings = settings or Settings()
    if settings.instances != 1:
        raise ValueError("instances > 1 runs copies of the model on slices of the batch: "
                         "use pyparbench.executor.run_model(name, batch, settings)")
    return settings


def _node_threads(v: _Variant, native: _g.ExecSettings) -> list[NodeThreads]:
    g = v.graph
    return [NodeThreads.from_native(i, g[i].name, g[i].op, d)
            for i, d in enumerate(v.plan.node_threads(native))]


def _node_precisions(g: Graph, implementations: Sequence[str],
                     emulated: Sequence[bool]) -> list[NodePrecision]:
    return [NodePrecision(n.id, n.name, n.op, n.attrs.get("precision", "fp32"),
                          implementations[n.id], bool(emulated[n.id])) for n in g.nodes]


def _precision_dict(g: Graph, emulated: Sequence[bool]) -> dict[str, Any]:
    """What a bf16 run's plan did: its bf16 matrix nodes, the conversions
    to bf16 in front of them, and the nodes whose bf16 kernel is emulated."""
    bf16 = [n for n in g.nodes if n.attrs.get("precision") == "bf16"]
    return {"precision": "bf16", "bf16_nodes": len(bf16),
            "conversions": sum(1 for n in g.nodes if n.dtype == "bfloat16"
                               and n.op == "reorder"),
            "emulated_nodes": [n.name for n in bf16 if emulated[n.id]]}


def _int8_dict(g: Graph) -> dict[str, Any]:
    """What an int8 run's graph holds: its int8 nodes, its embedding bags
    over 8-bit rowwise tables, the matrix nodes it keeps in fp32 (matmuls,
    bags over float tables), and how its grids were made."""
    int8 = [n for n in g.nodes if n.op in ("quantized_conv2d", "quantized_linear")]
    kept = [n for n in g.nodes if n.op in ("conv2d", "linear", "matmul", "embedding_bag")]
    tables = sum(1 for n in g.nodes if n.attrs.get("table_format") == "byte_rowwise")
    return {"precision": "int8", "int8_nodes": len(int8), "byte_rowwise_tables": tables,
            "fp32_matrix_nodes": len(kept) - tables,
            "calibration": f"one run on generated inputs (seed {CALIBRATION_SEED}): speed "
                           "figures, not accuracy ones"}


def _graph_opt_dict(settings: Settings, original: Graph, opt: OptimizeResult) -> dict[str, Any]:
    """What the passes did: asked for, applied, skipped (why), and the node
    counts and FLOPs before and after."""
    return {"requested": settings.graph_opt, "applied": list(opt.applied),
            "skipped": dict(opt.skipped), "details": dict(opt.details), "nodes": len(opt.graph),
            "original_nodes": len(original), "flops": opt.graph.flops,
            "original_flops": original.flops}


def _lowered(g: Graph, implementations: Sequence[str]) -> dict[str, Any]:
    """What the im2col pass's marks became: the convolutions the plan runs as
    gathered patches and one matmul, of those marked."""
    marked = [n for n in g.nodes if n.attrs.get("im2col")]
    lowered = [n.name for n in marked if implementations[n.id].startswith("im2col+")]
    return {"marked": len(marked), "lowered": lowered}


def _batch(graph: Graph) -> int:
    return int(graph[graph.inputs[0]].shape[0]) if graph.inputs else 1


def audit_mismatches(native: _g.ExecSettings, audit: ThreadAudit) -> list[str]:
    """How the threads that ran a plan differ from its resolved settings:
    each worker's threads (its OpenMP team or pool) must number intra_op, or
    the most any node ran on under the per-node rule (``audit.nodes``: one
    when every node ran alone, which ``audit.alone`` explains), and stay on
    the worker's CPUs, and pinned workers must not share CPUs."""
    out: list[str] = []
    team = max((n.threads for n in audit.nodes), default=native.intra_op)
    for w in range(native.inter_op):
        recs = audit.team(w)
        if not recs:
            out.append(f"worker {w}: no thread reported work")
            continue
        tids = {r.tid for r in recs if r.worker >= 0}
        if len(tids) > team:
            out.append(f"worker {w}: {len(tids)} team threads worked, {team} "
                       f"{_team_why(team, native.intra_op)}")
        if native.operator == "library":
            sizes = sorted({r.omp_team_size for r in recs if r.worker >= 0})
            if sizes and sizes != [team]:
                out.append(f"worker {w}: OpenMP team of {'/'.join(map(str, sizes))} threads, "
                           f"{team} {_team_why(team, native.intra_op)}")
        if not native.worker_cpus:
            continue
        want = set(native.worker_cpus[w])
        for r in recs:
            stray = (set(r.cpus_seen) | set(r.affinity)) - want
            if stray:
                out.append(f"worker {w}: thread {r.tid} may run or ran on CPUs "
                           f"{sorted(stray)}, outside its {sorted(want)}")
    return out


def _team_why(team: int, intra_op: int) -> str:
    return "requested" if team == intra_op else (
        f"expected ({intra_op} requested, at most {team} per node by the per-node rule)")


def _report(mismatches: list[str], strict: bool) -> None:
    if not mismatches:
        return
    if strict:
        raise ThreadingMismatchError(mismatches)
    warnings.warn("threading differs from the request:\n  " + "\n  ".join(mismatches),
                  ThreadingMismatch, stacklevel=3)


# The seed of the generated inputs an int8 graph is calibrated on.
CALIBRATION_SEED = 0


def _weight_bits() -> int:
    """Significant bits of int8 weights on this CPU: 8 where it has an int8
    dot product (VNNI, AMX-INT8, SDOT / I8MM); 7 elsewhere, where the int8
    kernels sum pairs of u8 x s8 products in int16, which 8-bit weights
    could saturate (quantization.channel_scales)."""
    return 8 if "int8" in cpu_features()["precisions"] else 7


def _calibrated_ranges(folded: Graph) -> dict[str, Range]:
    """Each quantizable node's input range over one run of the float graph
    ``folded`` on its generated inputs (seed :data:`CALIBRATION_SEED`)."""
    wanted = calibration_inputs(folded)
    if not wanted:
        return {}
    cg = CompiledGraph(folded)
    cg.set_inputs(folded.random_inputs(seed=CALIBRATION_SEED))
    # Every node's value kept (no pass), on every CPU this process may use.
    settings = Settings(graph_opt="none", intra_op=max(1, len(_t.process_allowed_cpus())))
    cg.run(settings, repeats=1, warmup=0)
    ranges: dict[str, Range] = {}
    with cg._lock:
        for name, value in wanted.items():
            arr = cg._last.outputs([value])[0]  # one value at a time: a CNN's are large
            ranges[name] = (float(arr.min()), float(arr.max()))
    return ranges


def int8_graph(graph: Graph) -> Graph:
    """``graph`` as it runs at ``Settings(precision="int8")``: its batch
    norms folded into the convolutions before them and its ReLUs into the
    nodes before them (:func:`~pyparbench.graph.passes.quantize.int8_ready`),
    then every float conv2d
    and linear node quantised (:func:`pyparbench.graph.passes.quantize.to_int8`)
    on input grids calibrated by one run of the float graph on its generated
    inputs (``graph.random_inputs(CALIBRATION_SEED)``): speed figures, not
    accuracy ones; its embedding bags read 8-bit rowwise tables. A graph
    with no such node (an int8 graph already) comes back as it is."""
    folded = int8_ready(graph)
    if not converts(folded):
        return graph
    return to_int8(folded, _calibrated_ranges(folded), weight_bits=_weight_bits())


# Calibrated ranges of built-in models, per (model, batch, builder keywords):
# a sweep over settings (or instances' copies) calibrates each once.
_MODEL_RANGES: dict[str, dict[str, Range]] = {}
_MODEL_RANGES_LOCK = threading.Lock()


def int8_model(name: str, batch: int | None = None, **model_kw: Any) -> Graph:
    """Model ``name`` at ``batch`` as its int8 graph (:func:`int8_graph`),
    calibrated once per process for each (model, batch, keywords); each
    call builds the model again, so each graph holds its own weights."""
    folded = int8_ready(build(name, batch, **model_kw))
    if not converts(folded):
        return folded
    key = json.dumps([name, batch, model_kw], sort_keys=True, default=str)
    with _MODEL_RANGES_LOCK:
        ranges = _MODEL_RANGES.get(key)
        if ranges is None:
            ranges = _MODEL_RANGES[key] = _calibrated_ranges(folded)
    return to_int8(folded, ranges, weight_bits=_weight_bits())


def compile_graph(graph: Graph, *, weights_in_place: bool = False) -> CompiledGraph:
    """Compile ``graph`` into a native plan (kernels are prepared per setting, on first use).

    ``weights_in_place``: the fp32 linear nodes on oneDNN read the graph's
    weight arrays where they are rather than packing copies, wherever that
    gives the same results bit for bit: always in the few-row streamed
    product (``ops.StreamedLinear.borrow_weights``), and in oneDNN's matmul
    where it keeps weights plain anyway (gemm:jit, on CPUs without AVX-512;
    ``ops.Linear(weights_in_place=True)``). For plans that share one copy of
    the weights (a generation's prompt and token steps); each step is slower
    than on its own packed layout (by about a fifth on a 2-core AVX2 VM).
    """
    return CompiledGraph(graph, weights_in_place=weights_in_place)


# The most timed runs a minimum measuring time asks for.
MAX_TIMED_REPEATS = 100_000


def _until(min_time_s: float, run: Callable[[int, int], tuple[list[float], list[list[float]]]],
           repeats: int, warmup: int) -> tuple[list[float], list[list[float]]]:
    """``run(repeats, warmup)`` -> (each run's ns, each instance's), called
    again with more repeats until the runs add up to ``min_time_s``."""
    ns, each = run(repeats, warmup)
    while sum(ns) < min_time_s * 1e9 and len(ns) < MAX_TIMED_REPEATS:
        more = math.ceil((min_time_s * 1e9 - sum(ns)) / max(statistics.median(ns), 1.0))
        more = max(1, min(more, MAX_TIMED_REPEATS - len(ns)))
        ns2, each2 = run(more, 0)
        ns += ns2
        each = [a + b for a, b in zip(each, each2, strict=True)]
    return ns, each


def model_runner(name: str, batch: int, settings: Settings, *,
                 topology: Topology | None = None, **model_kw: Any
                 ) -> Callable[[int, int, float], RunRecord]:
    """Model ``name`` built and compiled once under ``settings``, instances
    included (see :func:`run_model`); each call ``(repeats, warmup,
    min_time_s)`` runs it (more timed runs than ``repeats`` until they last
    ``min_time_s`` together) and returns what that call measured.

    Raises
    ------
    ValueError
        A batch that does not split into the instances; from a call, a
        negative ``min_time_s``.
    """
    k = settings.instances
    make = int8_model if settings.precision == "int8" else build
    if k == 1:
        cg = compile_graph(make(name, batch, **model_kw))

        def once(repeats: int, warmup: int) -> RunRecord:
            return cg.run(settings, repeats=repeats, warmup=warmup, topology=topology)
    else:
        if batch % k:
            raise ValueError(f"batch {batch} does not split into {k} instances")
        graphs = [make(name, batch // k, **model_kw) for _ in range(k)]
        side_by_side = instances_runner(graphs, settings, topology)

        def once(repeats: int, warmup: int) -> RunRecord:
            ns, each = side_by_side(repeats, warmup)
            return RunRecord(name, batch, settings, {"instances": side_by_side.resolved},
                             ns, summarize(ns), per_instance=each)

    def run(repeats: int, warmup: int, min_time_s: float) -> RunRecord:
        if min_time_s < 0:
            raise ValueError(f"min_time_s must be >= 0, got {min_time_s}")
        last: list[RunRecord] = []

        def one(r: int, w: int) -> tuple[list[float], list[list[float]]]:
            last[:] = [once(r, w)]
            return list(last[0].ns), last[0].per_instance
        ns, each = _until(min_time_s, one, repeats, warmup)
        rec = last[0]
        rec.ns, rec.summary, rec.per_instance = ns, summarize(ns), each
        return rec
    return run


def run_model(name: str, batch: int, settings: Settings, *, repeats: int = 10, warmup: int = 2,
              topology: Topology | None = None, min_time_s: float = 0.0,
              **model_kw: Any) -> RunRecord:
    """Build model ``name`` and run it under ``settings``, instances included:
    with ``instances`` = k the batch is cut into k slices, each a copy of the
    model on its own CPUs (the affinity policy's placement of k x inter_op
    workers), all run side by side; a repeat lasts until the slowest is done.
    ``min_time_s``: more timed runs than ``repeats`` until they last that
    long together."""
    if min_time_s < 0:
        raise ValueError(f"min_time_s must be >= 0, got {min_time_s}")
    return model_runner(name, batch, settings, topology=topology, **model_kw)(
        repeats, warmup, min_time_s)


class InstancesRunner:
    """Graphs compiled once to run side by side, one instance each (see
    :func:`run_instances`); calling it with (repeats, warmup) runs them and
    returns each repeat's time and each instance's times."""

    def __init__(self, graphs: Sequence[Graph], settings: Settings,
                 topology: Topology | None = None) -> None:
        self._variants, self._natives = _instance_plans(graphs, settings, topology)
        self.resolved = [_resolved_dict(n) for n in self._natives]

    def __call__(self, repeats: int, warmup: int) -> tuple[list[float], list[list[float]]]:
        ns_all, per = _g.run_instances([v.plan for v in self._variants], self._natives,
                                       repeats=repeats, warmup=warmup)
        return [float(v) for v in ns_all], [[float(v) for v in e] for e in per]


def instances_runner(graphs: Sequence[Graph], settings: Settings,
                     topology: Topology | None = None) -> InstancesRunner:
    """:class:`InstancesRunner`: compile once, run side by side many times."""
    return InstancesRunner(graphs, settings, topology)


def run_instances(graphs: Sequence[Graph], settings: Settings, *, repeats: int = 10,
                  warmup: int = 2, topology: Topology | None = None,
                  ) -> tuple[list[float], list[list[float]], list[dict[str, Any]]]:
    """Run the graphs side by side, one instance each, on the CPUs the
    affinity policy gives ``len(graphs) x inter_op`` workers (instances on
    their own CPUs; ``settings.instances`` is not read). Give each instance
    its own Graph (its own weights, as separate processes would hold).
    Returns each repeat's time (until the slowest is done), each instance's
    times and each instance's resolved setting."""
    run = instances_runner(graphs, settings, topology)
    ns, each = run(repeats, warmup)
    return ns, each, run.resolved


def _instance_plans(graphs: Sequence[Graph], settings: Settings, topology: Topology | None
                    ) -> tuple[list[_Variant], list[_g.ExecSettings]]:
    """Each instance's compiled variant (its plan, and the parameter arrays
    the plan borrows: hold it while the plan runs) and resolved setting on
    its own CPUs."""
    k = len(graphs)
    if k < 1:
        raise ValueError("run_instances needs at least one graph")
    topo = topology if topology is not None else this_machine()
    one = settings.with_(instances=1)
    placement = place(topo, settings.affinity if settings.affinity != "none" else "compact",
                      k * settings.inter_op, settings.intra_op, smt=settings.smt,
                      group=settings.inter_op)
    per = settings.inter_op
    variants, natives = [], []
    for i, graph in enumerate(graphs):
        cpus = [c for p in placement.pools[i * per:(i + 1) * per] for c in (p or ())]
        cg = compile_graph(graph)
        variants.append(cg._variant(one))
        natives.append(resolve(one, cg.optimized(one), topo, cpus=cpus))
    return variants, natives
