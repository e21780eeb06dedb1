"""Cost models: what one node costs under a thread setting, and what the executor adds.

A cost model answers two questions for the schedule simulation
(:mod:`pyparbench.recommender.simulate`):

* :meth:`CostModel.op_ns`: how long node ``n`` takes when run by itself with
  ``threads`` intra-op threads in an operator mode (``library``: one kernel
  threaded by the math library; ``framework``: the op cut in blocks, each
  single-threaded on the worker's pool of ``threads``);
* :attr:`CostModel.executor` (:class:`ExecutorCosts`): what the executor adds
  per node, what ops running at once cost each other, and what
  oversubscription and SMT do;
* :attr:`CostModel.wait` (:class:`WaitCosts`, when measured): what a
  parallel region costs under each OpenMP wait policy, after a serial
  stretch of a given length (the ``omp_wait`` knob).

Three models:

:class:`CalibratedCostModel`
    Op times measured on this machine (:mod:`pyparbench.recommender.calibrate`)
    at a few thread counts, interpolated in between.
:class:`AnalyticCostModel`
    A roofline with Amdahl-style scaling, for machines that cannot be
    measured (a synthetic topology) or when calibration is turned off; its
    machine figures are :class:`MachineSpec`.
:class:`TableCostModel`
    Op times given by the caller (per node name or id), for tests and
    what-if studies.

Op identity: :func:`op_key` names an op by everything that decides its cost
(op, attributes, input and parameter shapes, output shape), so equal layers
of one model, or of two models, share one measurement.
"""

from __future__ import annotations

import hashlib
import json
import math
import weakref
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

from pyparbench.graph import NO_KERNEL_OPS, Graph, Node, jsonable
from pyparbench.settings import OmpWait

__all__ = [
    "ALIAS_OPS",
    "AnalyticCostModel",
    "CalibratedCostModel",
    "CostModel",
    "ExecutorCosts",
    "MachineSpec",
    "TableCostModel",
    "WaitCosts",
    "config_key",
    "graph_signature",
    "instance_key",
    "interpolate_threads",
    "op_key",
    "wait_key",
    "wait_policy",
]

# Ops the executor does not run (graph/opdefs.py).
ALIAS_OPS = NO_KERNEL_OPS


def op_key(graph: Graph, node: Node) -> str:
    """A string naming everything that decides a node's cost (not its name).

    Two nodes with one key run the same kernel on the same shapes: the op,
    its attributes, its inputs' shapes and dtypes, its parameters' shapes
    (an embedding table's rows included) and its output shape.
    """
    ins = [[list(graph[i].shape), graph[i].dtype] for i in node.inputs]
    params = {k: list(v) for k, v in sorted(node.params.shapes.items())}
    # Sorted keys: attributes written in another order are the same kernel.
    return json.dumps([node.op, jsonable(node.attrs), ins, params, list(node.shape)],
                      separators=(",", ":"), sort_keys=True)


def graph_signature(graph: Graph) -> str:
    """A short hash of every node's :func:`op_key` and inputs: two graphs
    with one signature run the same kernels in the same order."""
    h = hashlib.sha1()
    for n in graph:
        h.update(op_key(graph, n).encode())
        h.update(repr(tuple(n.inputs)).encode())
    return h.hexdigest()[:16]


def instance_key(graph: Graph | str, instances: int) -> str:
    """The key of a measured instance co-run factor
    (:meth:`CostModel.instance_factor`); ``graph`` or its signature."""
    sig = graph if isinstance(graph, str) else graph_signature(graph)
    return f"{sig}/x{instances}"


def config_key(operator: str, library: str, pool: str, threads: int) -> str:
    """The calibration table a node time belongs to.

    Library mode does not use the pool, so its tables name none; framework
    mode at one thread runs the same single-threaded kernel as library mode
    and shares its table.
    """
    if operator == "library" or threads == 1:
        return f"library/{library}/-/{threads}"
    return f"framework/{library}/{pool}/{threads}"


def interpolate_threads(points: Mapping[int, float], threads: int) -> float:
    """A time at ``threads`` from times measured at other thread counts.

    Between two measured counts the time is interpolated linearly in
    log(threads) / log(time) (a power law between neighbours); beyond the
    largest count it stays at the largest count's time (no gain is assumed
    that was not measured); below the smallest it is the smallest's.
    """
    if not points:
        raise ValueError("no measured thread counts to interpolate from")
    ts = sorted(points)
    if threads in points:
        return points[threads]
    if threads <= ts[0]:
        return points[ts[0]]
    if threads >= ts[-1]:
        return points[ts[-1]]
    i = bisect_left(ts, threads)
    t0, t1 = ts[i - 1], ts[i]
    y0, y1 = max(points[t0], 1e-3), max(points[t1], 1e-3)
    w = (math.log(threads) - math.log(t0)) / (math.log(t1) - math.log(t0))
    return math.exp(math.log(y0) + w * (math.log(y1) - math.log(y0)))


# ------------------------------------------------------------- executor costs


@dataclass(frozen=True)

class ExecutorCosts:
    """What the executor and the machine add to the op times (nanoseconds).

    Attributes
    ----------
    sync_node_ns
        Per node under the sync scheduler (its loop; usually tens of ns).
    async_node_ns
        ``(workers, ns)`` pairs: per node under the async scheduler with that
        many workers, on the node's worker and on the critical path (queue,
        wake-up, hand-off of the node to another worker); interpolated in
        workers between the pairs.
    async_serial_ns
        ``(workers, ns)`` pairs: the part of each node's dispatch that no
        two workers can do at once (the ready queue's lock, its cache line):
        a node waits for the dispatcher when another node holds it. Zero for
        one worker.
    corun_compute, corun_memory
        Fractional slowdown of a compute-bound / memory-bound op when every
        other core is busy running other ops at the same time (shared
        caches, memory bandwidth, turbo); scaled by the busy fraction.
    intensity_ridge
        FLOPs per byte below which an op counts as memory-bound for the
        co-run slowdown.
    oversub_node_ns
        Extra per node and per unit of oversubscription (threads / CPUs - 1):
        spinning teams whose threads were descheduled hold every barrier up.
    smt_yield
        Throughput of a core running two SMT siblings, relative to one
        thread (used only when SMT siblings are in use).
    """

    sync_node_ns: float = 0.0
    async_node_ns: tuple[tuple[int, float], ...] = ((1, 0.0),)
    async_serial_ns: tuple[tuple[int, float], ...] = ((1, 0.0),)
    corun_compute: float = 0.0
    corun_memory: float = 0.0
    intensity_ridge: float = 4.0
    oversub_node_ns: float = 0.0
    smt_yield: float = 1.2

    def __post_init__(self) -> None:
        for name in ("async_node_ns", "async_serial_ns"):
            pairs = tuple(sorted((int(w), float(v)) for w, v in getattr(self, name)))
            if not pairs or any(w < 1 or v < 0 for w, v in pairs):
                raise ValueError(f"{name} must be (workers >= 1, ns >= 0) pairs, got {pairs}")
            object.__setattr__(self, name, pairs)
        for name in ("sync_node_ns", "corun_compute", "corun_memory", "oversub_node_ns"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.smt_yield < 1.0:
            raise ValueError(f"smt_yield must be >= 1, got {self.smt_yield}")

    def async_node(self, workers: int) -> float:
        """Per-node dispatch cost with ``workers`` async workers."""
        return _interp_workers(self.async_node_ns, workers)

    def async_serial(self, workers: int) -> float:
        """Serialised part of each dispatch with ``workers`` async workers."""
        return 0.0 if workers <= 1 else _interp_workers(self.async_serial_ns, workers)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["async_node_ns"] = [list(p) for p in self.async_node_ns]
        d["async_serial_ns"] = [list(p) for p in self.async_serial_ns]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExecutorCosts:
        kw = dict(d)
        for name in ("async_node_ns", "async_serial_ns"):
            if name in kw:
                kw[name] = tuple((int(w), float(v)) for w, v in kw[name])
        return cls(**kw)


def _interp_workers(pairs: Sequence[tuple[int, float]], workers: int) -> float:
    """Linear in workers between the pairs; constant beyond the last."""
    if workers <= pairs[0][0]:
        return pairs[0][1]
    for (w0, v0), (w1, v1) in pairwise(pairs):
        if workers <= w1:
            return v0 + (v1 - v0) * (workers - w0) / (w1 - w0)
    return pairs[-1][1]


# ------------------------------------------------------------ the wait policy


def wait_key(policy: OmpWait) -> str:
    """How a wait policy is named in :class:`WaitCosts` (and its cache file):
    ``"default"`` (libgomp's own), ``"active"``, ``"passive"`` or a spin count."""
    return "default" if policy is None else str(policy)


def wait_policy(key: str) -> OmpWait:
    """The ``omp_wait`` setting of a :func:`wait_key`.

    Raises
    ------
    ValueError
        A key that names no policy.
    """
    if key == "default":
        return None
    if key in ("active", "passive"):
        return key
    if key.isdigit():
        return int(key)
    raise ValueError(f"a wait policy key is 'default', 'active', 'passive' or a spin "
                     f"count, got {key!r}")


@dataclass(frozen=True)
class WaitCosts:
    """What one OpenMP parallel region costs under each wait policy (ns).

    A region is started by a team's master after a serial stretch ("gap")
    during which the team's other threads wait as the policy says: they
    spin (a few hundred ns to wake) for up to the policy's spin count, then
    sleep (a futex wake: microseconds, much more when the sleeping thread's
    CPU has meanwhile been given to another process). Measured by
    :func:`pyparbench.recommender.waitpolicy.measure_wait`, each policy in
    its own process.

    Attributes
    ----------
    gaps
        The serial stretches measured (ns, ascending, the first 0: regions
        back to back).
    regions
        :func:`wait_key` -> team size -> the region's median ns at each gap.
    load
        The share of the CPUs other processes used while it was measured.
    """

    gaps: tuple[float, ...]
    regions: Mapping[str, Mapping[int, tuple[float, ...]]]
    load: float = 0.0

    def __post_init__(self) -> None:
        gaps = tuple(float(g) for g in self.gaps)
        if not gaps or gaps[0] != 0.0 or any(b <= a for a, b in pairwise(gaps)):
            raise ValueError(f"gaps must start at 0 and ascend, got {gaps}")
        if "default" not in self.regions:
            raise ValueError(f"regions need the default policy's figures, got policies "
                             f"{sorted(self.regions)}")
        regions: dict[str, dict[int, tuple[float, ...]]] = {}
        for key, teams in self.regions.items():
            wait_policy(key)
            regions[key] = {}
            for t, ns in teams.items():
                values = tuple(float(v) for v in ns)
                if int(t) < 1 or len(values) != len(gaps) or min(values) < 0:
                    raise ValueError(f"regions[{key!r}][{t}] must be {len(gaps)} figures "
                                     f">= 0 for a team of >= 1, got {values}")
                regions[key][int(t)] = values
        if {k: set(v) for k, v in regions.items()} != {
                k: set(regions["default"]) for k in regions}:
            raise ValueError("every policy needs the team sizes of the default policy")
        object.__setattr__(self, "gaps", gaps)
        object.__setattr__(self, "regions", regions)

    @property
    def policies(self) -> tuple[OmpWait, ...]:
        """The measured policies other than the default."""
        return tuple(wait_policy(k) for k in self.regions if k != "default")

    @property
    def teams(self) -> tuple[int, ...]:
        """The measured team sizes."""
        return tuple(sorted(self.regions["default"]))

    def region_ns(self, policy: OmpWait, threads: int, gap_ns: float) -> float:
        """A region of a team of ``threads`` after a serial stretch of
        ``gap_ns``: linear between the measured gaps, the last one's beyond
        them; the nearest measured team size at or below ``threads``.

        Raises
        ------
        KeyError
            A policy that was not measured.
        """
        key = wait_key(policy)
        if key not in self.regions:
            raise KeyError(f"wait policy {key!r} was not measured; measured: "
                           f"{', '.join(self.regions)}")
        teams = self.teams
        team = max((t for t in teams if t <= threads), default=teams[0])
        ns = self.regions[key][team]
        gap = max(0.0, gap_ns)
        if gap >= self.gaps[-1]:
            return ns[-1]
        i = bisect_left(self.gaps, gap)
        if self.gaps[i] == gap:
            return ns[i]
        g0, g1 = self.gaps[i - 1], self.gaps[i]
        return ns[i - 1] + (ns[i] - ns[i - 1]) * (gap - g0) / (g1 - g0)

    def extra_ns(self, policy: OmpWait, threads: int, gap_ns: float) -> float:
        """What a region under ``policy`` after ``gap_ns`` adds to one under
        the default policy back to back (< 0: saves); 0 for a team of one,
        which has no waiting threads. Op times were measured under the
        default policy, one node after another (sync: no gap), so this is
        what the simulation adds to a node's time."""
        if threads <= 1:
            return 0.0
        return (self.region_ns(policy, threads, gap_ns)
                - self.region_ns(None, threads, 0.0))

    def as_dict(self) -> dict[str, Any]:
        return {"gaps": list(self.gaps), "load": self.load,
                "regions": {k: {str(t): list(v) for t, v in teams.items()}
                            for k, teams in self.regions.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WaitCosts:
        return cls(gaps=tuple(d["gaps"]), load=float(d.get("load", 0.0)),
                   regions={k: {int(t): tuple(v) for t, v in teams.items()}
                            for k, teams in d["regions"].items()})


# ----------------------------------------------------------------- the models


class CostModel(ABC):
    """Op times under a thread setting, plus the executor's own costs.

    Subclasses set :attr:`kind` (a short name shown to users), :attr:`executor`
    and implement :meth:`op_ns`; :attr:`libraries` and :attr:`pools` say which
    math libraries and framework-mode pools the model can price (candidate
    settings use only those), and :attr:`operators` which operator modes.
    """

    kind: str = "abstract"
    executor: ExecutorCosts = ExecutorCosts()
    # Region costs per OpenMP wait policy; None: not measured, and the
    # candidates keep libgomp's default policy.
    wait: WaitCosts | None = None
    libraries: tuple[str, ...] = ("onednn",)
    pools: tuple[str, ...] = ("openmp", "std", "eigen")
    operators: tuple[str, ...] = ("library", "framework")

    @abstractmethod
    def op_ns(self, graph: Graph, node: Node, threads: int, operator: str = "library",
              library: str = "onednn", pool: str = "openmp") -> float:
        """Time of ``node`` run alone with ``threads`` intra-op threads (ns)."""

    def thread_counts(self, cores: int) -> tuple[int, ...]:
        """Thread counts this model has figures for (<= cores); the candidate
        settings try these besides cores // workers."""
        return calibration_threads(cores)

    def instance_factor(self, graph: Graph, instances: int) -> float | None:
        """How much slower one instance runs ``graph`` with ``instances`` - 1
        copies beside it (each on its own share of the cores) than alone,
        when measured; None: the simulation's co-run penalties stand in."""
        return None

    def memory_bound(self, graph: Graph, node: Node) -> bool:
        """Whether the node counts as memory-bound for the co-run slowdown."""
        s = graph.stats[node.id]
        return s.flops < self.executor.intensity_ridge * max(s.bytes, 1)

    def describe(self) -> str:
        """One line saying what the model is."""
        return self.kind


class TableCostModel(CostModel):
    """Op times given by the caller: what-if studies and deterministic tests.

    Parameters
    ----------
    times
        Per node name (or id): a mapping threads -> ns (interpolated with
        :func:`interpolate_threads`), or a callable ``f(threads) -> ns``.
        Nodes not listed cost ``default_ns`` (alias ops: 0).
    framework
        Same for framework mode; nodes not listed there cost what they
        cost in library mode.
    executor
        The executor's costs (default: none).
    default_ns
        Time of an unlisted, non-alias node.
    wait
        Region costs per OpenMP wait policy (default: not modelled).
    """

    kind = "table"

    def __init__(self, times: Mapping[str | int, Mapping[int, float] | Callable[[int], float]],
                 *, framework: Mapping[str | int, Mapping[int, float] | Callable[[int], float]]
                 | None = None, executor: ExecutorCosts | None = None,
                 default_ns: float = 0.0, wait: WaitCosts | None = None) -> None:
        self._times = dict(times)
        self._framework = dict(framework or {})
        self.executor = executor or ExecutorCosts()
        self._default = float(default_ns)
        self.wait = wait

    @staticmethod
    def _lookup(table: Mapping[str | int, Mapping[int, float] | Callable[[int], float]],
                node: Node, threads: int) -> float | None:
        entry = table.get(node.name, table.get(node.id))
        if entry is None:
            return None
        if callable(entry):
            return float(entry(threads))
        return interpolate_threads({int(k): float(v) for k, v in entry.items()}, threads)

    def op_ns(self, graph: Graph, node: Node, threads: int, operator: str = "library",
              library: str = "onednn", pool: str = "openmp") -> float:
        if operator == "framework" and threads > 1:
            t = self._lookup(self._framework, node, threads)
            if t is not None:
                return t
        t = self._lookup(self._times, node, threads)
        if t is not None:
            return t
        return 0.0 if node.op in ALIAS_OPS else self._default


class CalibratedCostModel(CostModel):
    """Op times measured on this machine (see :mod:`pyparbench.recommender.calibrate`).

    Parameters
    ----------
    tables
        ``config_key(operator, library, pool, threads)`` -> {``op_key``: ns}.
    executor
        The executor's measured costs.
    source
        Where the figures came from (the cache file), for the reasons.
    instances
        :func:`instance_key` -> measured co-run factor of instances (see
        :meth:`instance_factor`).
    wait
        The measured region costs per OpenMP wait policy (None: not measured).
    """

    kind = "calibrated"

    def __init__(self, tables: Mapping[str, Mapping[str, float]], executor: ExecutorCosts,
                 source: str = "", instances: Mapping[str, float] | None = None,
                 wait: WaitCosts | None = None) -> None:
        self.tables = {k: dict(v) for k, v in tables.items()}
        self.wait = wait
        self.instances = dict(instances or {})
        self._signatures: dict[int, tuple[Graph, str]] = {}
        self.executor = executor
        self.source = source
        libs, pools, threads = set(), set(), set()
        for k in self.tables:
            op, lib, pool, t = k.split("/")
            libs.add(lib)
            threads.add(int(t))
            if op == "framework":
                pools.add(pool)
        self.libraries = tuple(sorted(libs, key=lambda x: (x != "onednn", x)))
        self.pools = tuple(sorted(pools))
        self.operators = ("library", "framework") if self.pools else ("library",)
        self._threads = tuple(sorted(threads))
        self._keys: dict[tuple[int, int], str] = {}

    def thread_counts(self, cores: int) -> tuple[int, ...]:
        return tuple(t for t in self._threads if t <= cores) or (1,)

    def _key(self, graph: Graph, node: Node) -> str:
        k = self._keys.get((id(graph), node.id))
        if k is None:
            k = op_key(graph, node)
            self._keys[(id(graph), node.id)] = k
        return k

    def has(self, graph: Graph, threads: Sequence[int], operator: str = "library",
            library: str = "onednn", pool: str = "openmp") -> bool:
        """Whether every computing node of ``graph`` has a figure at each count."""
        for t in threads:
            table = self.tables.get(config_key(operator, library, pool, t))
            if table is None:
                return False
            if any(self._key(graph, n) not in table for n in graph if n.op not in ALIAS_OPS):
                return False
        return True

    def op_ns(self, graph: Graph, node: Node, threads: int, operator: str = "library",
              library: str = "onednn", pool: str = "openmp") -> float:
        if node.op in ALIAS_OPS:
            return 0.0
        key = self._key(graph, node)
        points: dict[int, float] = {}
        for t in self._threads:
            table = self.tables.get(config_key(operator, library, pool, t))
            if table is not None and key in table:
                points[t] = table[key]
        if not points:
            raise KeyError(f"node {node.name!r} ({node.op}) has no calibrated time for "
                           f"{operator}/{library}/{pool}: calibrate its graph first")
        return interpolate_threads(points, threads)

    def instance_factor(self, graph: Graph, instances: int) -> float | None:
        hit = self._signatures.get(id(graph))
        if hit is None or hit[0] is not graph:
            hit = (graph, graph_signature(graph))
            self._signatures[id(graph)] = hit
        return self.instances.get(instance_key(hit[1], instances))

    def describe(self) -> str:
        where = f" ({self.source})" if self.source else ""
        return f"calibrated: op times measured on this machine{where}"


# ------------------------------------------------------------------- analytic


def calibration_threads(cores: int) -> tuple[int, ...]:
    """1, the powers of two below ``cores``, and ``cores``."""
    if cores < 1:
        raise ValueError(f"cores must be >= 1, got {cores}")
    out = {1, cores}
    t = 2
    while t < cores:
        out.add(t)
        t *= 2
    return tuple(sorted(out))


@dataclass(frozen=True)
class MachineSpec:
    """The figures of the analytic model (per core unless named otherwise).

    The defaults are this project's calibration of a 2-core AMD EPYC
    virtual machine with 512-bit FMA units (oneDNN 2.6, AVX-512), single
    threaded, rounded: convolutions and large matrix products run at 190-250
    GFLOP/s (of a 256 GFLOP/s peak), cache-resident element-wise ops at
    30-60 GB/s, batch norm and pooling at 5-11 GFLOP/s, the smallest kernel
    call costs about 0.5 us and a two-thread OpenMP fork/join about 1 us.
    Another machine's figures (e.g. measured ceilings from
    ``pyparbench.machine.peak``) go in as a ``MachineSpec``.

    Attributes
    ----------
    peak_gflops
        Peak fp32 GFLOP/s of one core (2 FMA units x 16 lanes x 2 FLOPs x
        clock).
    gemm_efficiency
        Fraction of ``peak_gflops`` each heavy op kind reaches on one thread
        (depthwise: a grouped convolution).
    glue_gflops
        Single-threaded GFLOP/s of the glue ops that compute (FLOPs as
        :mod:`pyparbench.graph` counts them): their arithmetic, not their
        memory traffic, bounds them when the data is in cache.
    copy_gbps
        Single-threaded GB/s of the data-movement ops (concat, transpose,
        tril_flatten), cache-resident.
    core_gbps
        Memory (DRAM) bandwidth one core can draw (GB/s).
    socket_gbps
        Memory bandwidth of one socket, shared by its cores (GB/s).
    cache_gbps
        Bandwidth of data that fits in the caches (GB/s per core): ops whose
        bytes fit in ``cache_bytes`` read at this speed.
    cache_bytes
        Last-level cache of one socket (bytes).
    launch_ns
        Fixed cost of running one kernel (primitive execute, argument
        checks): the serial part that no thread count removes.
    fork_join_ns
        An OpenMP parallel region's start and end, per doubling of the team
        (a tree barrier): a team of t threads pays ``fork_join_ns * log2(t)``.
    grain_ns
        Single-threaded work below which a thread is not worth starting: an
        op splits into at most ``work / grain_ns`` useful parts.
    cross_socket
        Slowdown of a team spread over two sockets (remote memory, a wider
        barrier).
    pool_fork_join_ns
        A framework-mode pool's ``parallel_for`` start and end per doubling,
        per pool kind (the pools wake sleeping threads; OpenMP's spin).
    """

    peak_gflops: float = 256.0
    gemm_efficiency: Mapping[str, float] = field(default_factory=lambda: {
        "conv2d": 0.78, "linear": 0.85, "matmul": 0.75, "depthwise": 0.1})
    glue_gflops: Mapping[str, float] = field(default_factory=lambda: {
        "eltwise": 10.0, "add": 12.0, "mul": 12.0, "batch_norm": 5.0, "pool2d": 11.0,
        "global_avg_pool": 5.0, "layer_norm": 30.0, "softmax": 13.0, "embedding_bag": 5.0,
        # The decoder's fused kernels, llama-tiny at prompt 128 on the same machine.
        "rms_norm": 6.0, "rotary": 16.0, "attention": 11.0, "glu": 2.4})
    copy_gbps: float = 15.0
    core_gbps: float = 40.0
    socket_gbps: float = 200.0
    cache_gbps: float = 60.0
    cache_bytes: int = 32 << 20
    launch_ns: float = 500.0
    fork_join_ns: float = 1000.0
    grain_ns: float = 4000.0
    cross_socket: float = 1.15
    pool_fork_join_ns: Mapping[str, float] = field(default_factory=lambda: {
        "openmp": 3000.0, "std": 10_000.0, "eigen": 6000.0})


# The bf16 dot product's FLOPs per cycle over the fp32 FMA's (AVX512_BF16's
# vdpbf16ps: two products per fp32 lane; AMX's tiles more, not assumed).
BF16_SPEEDUP = 2.0


# Executor costs of the analytic model: this project's measurements of the
# native executor on the 2-core machine above (the probe graphs of
# calibrate.measure_executor), rounded; the larger worker counts extrapolate
# the growth of the dispatch lock's cost with its contenders.
ANALYTIC_EXECUTOR = ExecutorCosts(
    sync_node_ns=0.0,
    async_node_ns=((1, 200.0), (2, 150.0), (8, 300.0), (64, 1000.0)),
    async_serial_ns=((1, 0.0), (2, 500.0), (8, 700.0), (64, 1200.0)),
    corun_compute=0.05, corun_memory=0.2, intensity_ridge=4.0,
    oversub_node_ns=20_000.0, smt_yield=1.2)


class AnalyticCostModel(CostModel):
    """Roofline op times with Amdahl-style scaling, for unmeasured machines.

    One thread: ``launch + max(compute, bytes / bandwidth)``, where compute
    is FLOPs / (peak x the heavy op kind's efficiency) for conv / linear /
    matmul, FLOPs / the glue op's own rate for the computing glue ops, and
    bytes / ``copy_gbps`` for the data-movement ops; the bandwidth is
    ``cache_gbps`` when the op's bytes fit in the last level cache and
    ``core_gbps`` otherwise.

    ``t`` threads in library mode: the op has ``p = max(1, work / grain)``
    useful parts; its parallel work ``W`` runs on ``min(t, p)`` threads, its
    memory traffic at ``min(t x core, socket)`` bandwidth, and the team pays
    a fork/join of ``fork_join_ns x log2(t)``; a team wider than a socket is
    ``cross_socket`` slower::

        T(t) = launch + max(W_compute / min(t, p), bytes / bw(t)) + fork_join(t)

    so small ops stop scaling where their work per thread meets the fork/join
    cost. Framework mode cuts the op into ``min(t, blocks)`` single-threaded
    blocks (the batch, or the output channels / features at batch 1), each
    paying a kernel launch, plus the pool's ``parallel_for``.

    The executor's per-node thread rule is applied as the executor applies
    it: a node whose one-thread work is below the break-even of its team
    (the team's fork/join times ``t / (t - 1)``, since ``t`` threads save at
    most that share) runs alone, at its one-thread time. (A calibrated model
    needs no such rule: its op times are measured by the executor, which
    already ran such a node alone.)

    Parameters
    ----------
    spec
        The machine's figures (defaults: :class:`MachineSpec`).
    cores_per_socket
        For the cross-socket penalty (None: never applied).
    numa_per_socket
        NUMA domains per socket (SNC, NPS): a socket's memory bandwidth is
        split between them, so a team within one domain streams at its share.
    sockets
        Sockets of the machine (None: unknown): instances of a graph that
        streams its weights share their bandwidth (:meth:`instance_factor`).
    executor
        Executor costs (default: ``ANALYTIC_EXECUTOR``).
    """

    kind = "analytic"

    def __init__(self, spec: MachineSpec | None = None, *, cores_per_socket: int | None = None,
                 numa_per_socket: int = 1, executor: ExecutorCosts | None = None,
                 sockets: int | None = None) -> None:
        self.spec = spec or MachineSpec()
        self.cores_per_socket = cores_per_socket
        self.sockets = sockets
        self.numa_per_socket = max(1, int(numa_per_socket))
        self.executor = executor or ANALYTIC_EXECUTOR
        # Per graph, held weakly: a model kept for the process's life must
        # not keep every graph it priced.
        self._streaming: weakref.WeakKeyDictionary[Graph, bool] = weakref.WeakKeyDictionary()

    def _efficiency(self, node: Node) -> float:
        eff = self.spec.gemm_efficiency
        if node.op == "conv2d" and node.attrs.get("groups", 1) > 1:
            return eff.get("depthwise", 0.1)
        base = eff.get(node.op, 0.0)
        if node.op in ("linear", "matmul"):
            # Few rows (a small batch) leave the GEMM kernel's register blocks
            # part empty: efficiency falls as sqrt(rows / 32).
            rows = math.prod(node.shape[:-1]) if node.op == "linear" else node.shape[-2]
            base *= math.sqrt(min(1.0, rows / 32))
        return base

    # Ops framework mode cuts along their channels / features / rows when the
    # batch is 1 (csrc/pyparbench/graph/node_runner.cpp, feature_blocks).
    _FEATURE_CUT = frozenset({"conv2d", "linear", "eltwise", "batch_norm", "pool2d",
                              "global_avg_pool", "add", "mul", "layer_norm", "softmax"})

    _COPY_OPS = frozenset({"concat", "transpose", "tril_flatten"})

    def _parts(self, graph: Graph, node: Node) -> tuple[float, float, int]:
        """(compute ns at one thread, bytes, units framework mode can cut it into)."""
        s = graph.stats[node.id]
        sp = self.spec
        eff = self._efficiency(node)
        if eff > 0:
            compute = s.flops / (sp.peak_gflops * eff)
            if self._bf16(graph, node):
                # A bf16 matrix node (the bf16 plan's): the bf16 dot product
                # retires twice the fp32 FMA's FLOPs, and its weights are
                # held in bf16, half the bytes the IR counts.
                compute /= BF16_SPEEDUP
                return compute, float(s.bytes - 2 * s.params), self._units(node)
        elif node.op in self._COPY_OPS:
            compute = s.bytes / sp.copy_gbps
        else:
            compute = s.flops / sp.glue_gflops.get(node.op, 10.0)
        return compute, float(s.bytes), self._units(node)

    @staticmethod
    def _bf16(graph: Graph, node: Node) -> bool:
        """A matrix node of the bf16 plan (its input converted to bf16)."""
        return bool(node.inputs) and graph[node.inputs[0]].dtype == "bfloat16"

    def _units(self, node: Node) -> int:
        """The units framework mode can cut ``node`` into."""
        units = node.shape[0] if node.shape else 1
        if units == 1 and len(node.shape) >= 2 and node.op in self._FEATURE_CUT:
            units = node.shape[1]
            if node.op == "conv2d" and node.attrs.get("groups", 1) > 1:
                units = node.attrs["groups"]
        return max(1, int(units))

    def _streams(self, graph: Graph) -> bool:
        """Whether ``graph``'s weights outgrow the last-level cache, so that
        every run reads each op's weights from memory, however small that
        op's own bytes (a decoder's decode step: every layer's weights in
        turn, each evicted before it comes round again)."""
        streams = self._streaming.get(graph)
        if streams is None:
            streams = self._streaming[graph] = 4 * graph.num_params > self.spec.cache_bytes
        return streams

    def _move_ns(self, graph: Graph, node: Node, nbytes: float, threads: int) -> float:
        """Moving ``nbytes`` of ``node``'s bytes on ``threads`` threads: its
        weights' share from memory when the graph streams them, the rest as
        the bytes' size says."""
        if not self._streams(graph):
            return self._mem_ns(nbytes, threads)
        s = graph.stats[node.id]
        per = 2 if self._bf16(graph, node) else 4
        total = max(float(s.bytes - (4 - per) * s.params), 1.0)
        weights = min(nbytes, nbytes * per * s.params / total)
        return (self._mem_ns(weights, threads, from_memory=True)
                + self._mem_ns(nbytes - weights, threads))

    def _mem_ns(self, nbytes: float, threads: int, *, from_memory: bool = False) -> float:
        sp = self.spec
        if nbytes <= sp.cache_bytes and not from_memory:
            bw = sp.cache_gbps * threads
        else:
            bw = self._dram_gbps(threads)
        return nbytes / bw

    def _dram_gbps(self, threads: int) -> float:
        """The memory bandwidth a compact team of ``threads`` draws alone.

        Per NUMA domain: a socket's, split between its domains. A compact
        team fills one domain after another, and each domain gives at most
        its share, however many of the team's threads it holds (one thread
        on a second socket adds one core's bandwidth, not a socket's)."""
        sp = self.spec
        if self.cores_per_socket is None:
            return min(sp.core_gbps * threads, sp.socket_gbps)
        per = self.numa_per_socket
        cores = max(1, self.cores_per_socket // per)
        domain = sp.socket_gbps / per
        full, rest = divmod(threads, cores)
        return full * min(cores * sp.core_gbps, domain) + min(rest * sp.core_gbps, domain)

    def instance_factor(self, graph: Graph, instances: int) -> float | None:
        """Instances of a graph that streams its weights (below the ridge,
        weights past the cache) each draw their team's bandwidth, and the
        NUMA domains they share give at most theirs: each runs the demand
        over the supply slower than alone (None where they fit, or where
        the machine's shape is unknown: the co-run penalties stand in)."""
        if instances <= 1 or self.cores_per_socket is None or self.sockets is None \
                or not self._streams(graph) or graph.flops >= self.executor.intensity_ridge \
                * max(sum(s.bytes for s in graph.stats), 1):
            return None
        cores = self.cores_per_socket * self.sockets
        each = max(1, cores // instances)
        per_domain = max(1, self.cores_per_socket // self.numa_per_socket)
        if each <= per_domain:
            # Compact instances side by side within a domain share its share.
            sharing = per_domain // each
            supply = self.spec.socket_gbps / self.numa_per_socket
            demand = sharing * self._dram_gbps(each)
        else:
            supply = self.sockets * self.spec.socket_gbps
            demand = instances * self._dram_gbps(each)
        factor = demand / supply
        return factor if factor > 1.0 else None

    def op_ns(self, graph: Graph, node: Node, threads: int, operator: str = "library",
              library: str = "onednn", pool: str = "openmp") -> float:
        if node.op in ALIAS_OPS:
            return 0.0
        sp = self.spec
        compute, nbytes, blocks = self._parts(graph, node)
        one = max(compute, self._move_ns(graph, node, nbytes, 1))
        parts = max(1, int(one / sp.grain_ns))
        t = max(1, threads)
        cross = (self.spec.cross_socket if self.cores_per_socket is not None
                 and t > self.cores_per_socket else 1.0)
        if t > 1 and one < self._team_ns(t, operator, pool, blocks) * t / (t - 1):
            return sp.launch_ns + one  # the per-node rule: alone on the worker's thread
        if operator == "framework" and t > 1:
            # Exactly min(t, units) single-threaded blocks, however small: the
            # largest block (ceil(units / b) units) sets the pace.
            b = min(t, blocks)
            frac = math.ceil(blocks / b) / blocks
            # Each block streams its share on one core; all share the sockets.
            body = max(compute * frac, self._move_ns(graph, node, nbytes * frac, 1),
                       self._move_ns(graph, node, nbytes, b))
            return (sp.launch_ns + body + self._team_ns(t, operator, pool, blocks)) * cross
        used = min(t, parts)
        body = max(compute / used, self._move_ns(graph, node, nbytes, used))
        fj = self._team_ns(t, operator, pool, blocks) if t > 1 else 0.0
        return (sp.launch_ns + body + fj) * cross

    def _team_ns(self, threads: int, operator: str, pool: str, blocks: int) -> float:
        """What starting and joining the node's team of ``threads`` costs."""
        sp = self.spec
        if operator == "framework":
            b = min(threads, blocks)
            return sp.pool_fork_join_ns.get(pool, 2000.0) * math.log2(b) if b > 1 else 0.0
        return sp.fork_join_ns * math.log2(threads)

    def describe(self) -> str:
        sp = self.spec
        return (f"analytic: roofline at {sp.peak_gflops:g} GFLOP/s peak and {sp.core_gbps:g} GB/s "
                f"per core ({sp.socket_gbps:g} GB/s per socket), Amdahl scaling with "
                f"{sp.launch_ns / 1e3:g} us launch and {sp.fork_join_ns / 1e3:g} us fork/join "
                f"per doubling")
