"""Settings: the knobs of the study's four layers, named once, and the presets.

=========== ============================================== ====================
field       values                                         study layer
=========== ============================================== ====================
scheduler   ``sync`` (one node at a time) or ``async``      Scheduler
inter_op    workers running independent nodes at once       Scheduler
intra_op    threads per worker                              Operator
operator    ``library`` (one library call threads the op)   Operator
            or ``framework`` (the op cut into blocks, each
            single-threaded on the worker's pool)
library     ``onednn``, ``eigen``, ``blas`` (heavy ops)     Library (math)
pool        ``openmp``, ``std``, ``eigen``                  Library (pool)
affinity    ``none``, ``compact``, ``scatter`` or explicit  all
            CPU lists (one per worker)
smt         whether hyper-thread siblings may be used       all
instances   data-parallel copies, each on its own cores     Beyond one socket
            with a slice of the batch
placement   ``shared`` or ``per-socket`` (parallel          Beyond one socket
            branches kept on different core groups)
omp_wait    spin policy of idle OpenMP threads: ``None``,   Library
            ``"active"``, ``"passive"`` or a spin count
            (process-wide: applied in a fresh subprocess)
graph_opt   graph passes applied when the plan is built:    (native executor)
            ``full`` (default), ``none`` (op for op as
            built) or one pass (``bn_fold``, ``residual``,
            ``activation``, ``layout``)
precision   ``fp32`` (default), ``bf16``: weights stored    (number format)
            in bf16, the conv2d / linear / matmul nodes'
            activations converted to bf16 once per value,
            products accumulated in fp32, every other node
            and the graph outputs fp32; or ``int8``: the
            conv2d / linear nodes int8 (u8 inputs on grids
            calibrated on generated data, s8 weights per
            output channel), every other node fp32
            (both onednn library only)
=========== ============================================== ====================

Presets (:func:`preset`): ``tensorflow`` (TensorFlow's defaults),
``intel`` (Intel's published TensorFlow CPU advice) and ``tftuner`` (the
study's tuner, which needs the graph's average width).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pyparbench._checks import MAX_RUN_THREADS, as_int, choice, thread_count
from pyparbench.choices import (
    AFFINITIES,
    LIBRARIES,
    OPERATORS,
    PLACEMENTS,
    POOLS,
    PRESETS,
    SCHEDULERS,
    check_precision,
    graph_opt_passes,
)

if TYPE_CHECKING:
    from pyparbench.graph import Graph
    from pyparbench.threading.topology import Topology

__all__ = ["PRESETS", "Settings", "allowed_cores", "allowed_layout", "allowed_sockets",
           "instance_cpus", "numa_domains", "preset", "team_cpus"]

Affinity = str | tuple[tuple[int, ...], ...]
OmpWait = None | str | int


# Intel's advice is KMP_BLOCKTIME=1 (ms) for the Intel OpenMP runtime. libgomp
# counts spins instead of time; at the ~50 ns a spin-wait iteration with a
# pause takes on current x86 cores, 1 ms is about 20,000 spins.
INTEL_SPINCOUNT = 20_000


@dataclass(frozen=True)
class Settings:
    """One point of the parallelism design space (see the module docstring)."""

    scheduler: str = "sync"
    inter_op: int = 1
    intra_op: int = 1
    operator: str = "library"
    library: str = "onednn"
    pool: str = "openmp"
    affinity: Affinity = "none"
    smt: bool = False
    instances: int = 1
    placement: str = "shared"
    omp_wait: OmpWait = None
    graph_opt: str = "full"
    precision: str = "fp32"
    name: str = ""  # the preset it came from, if any

    def __post_init__(self) -> None:
        choice("scheduler", self.scheduler, SCHEDULERS)
        choice("operator", self.operator, OPERATORS)
        choice("library", self.library, LIBRARIES)
        choice("pool", self.pool, POOLS)
        choice("placement", self.placement, PLACEMENTS)
        graph_opt_passes(self.graph_opt)
        check_precision(self.precision)
        if self.precision != "fp32" and self.library != "onednn":
            raise ValueError(f"precision={self.precision!r} runs on the onednn library only, "
                             f"got library={self.library!r}")
        for f in ("inter_op", "intra_op", "instances"):
            # Stored as a plain int: a numpy integer would not serialise to JSON.
            object.__setattr__(self, f, thread_count(getattr(self, f), f))
        thread_count(self.threads, "instances x inter_op x intra_op", MAX_RUN_THREADS)
        if isinstance(self.affinity, str):
            choice("affinity", self.affinity, AFFINITIES)
        else:
            # CPU numbers are ints: a float (even an infinite one, from a
            # hostile file) is a TypeError here, not truncated or overflowing.
            if isinstance(self.affinity, (bytes, dict)) or not hasattr(self.affinity, "__iter__"):
                raise TypeError(f"affinity must be a name or CPU lists, got {self.affinity!r}")
            lists = tuple(tuple(as_int(c, "an affinity CPU number") for c in _iterable(cpus))
                          for cpus in self.affinity)
            object.__setattr__(self, "affinity", lists)
        if not isinstance(self.smt, (bool, np.bool_)):
            raise TypeError(f"smt must be True or False, got {self.smt!r}")
        object.__setattr__(self, "smt", bool(self.smt))
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string, got {self.name!r}")
        if self.scheduler == "sync" and self.inter_op != 1:
            raise ValueError(f"the sync scheduler runs one node at a time: inter_op must be 1, "
                             f"got {self.inter_op} (use scheduler='async')")
        if self.placement == "per-socket" and self.inter_op < 2:
            raise ValueError("placement='per-socket' spreads branches over workers: it needs "
                             f"inter_op >= 2, got {self.inter_op}")
        if self.omp_wait is not None and not (
                self.omp_wait in ("active", "passive")
                or (isinstance(self.omp_wait, int) and not isinstance(self.omp_wait, bool)
                    and self.omp_wait >= 0)):
            raise ValueError(f"omp_wait must be None, 'active', 'passive' or a spin count >= 0, "
                             f"got {self.omp_wait!r}")

    @property
    def threads(self) -> int:
        """Threads in use: instances x inter_op x intra_op."""
        return self.instances * self.inter_op * self.intra_op

    def with_(self, **changes: Any) -> Settings:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """The fields as JSON values; ``precision`` only when not fp32, so
        an fp32 run's records and keys are those written before the knob."""
        d = asdict(self)
        if not isinstance(self.affinity, str):
            d["affinity"] = [list(c) for c in self.affinity]
        if self.precision == "fp32":
            del d["precision"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Settings:
        """The inverse of :meth:`as_dict` (CPU lists back to tuples; a dict
        without a precision, as files written before it existed, reads fp32)."""
        d = dict(d)
        if isinstance(d.get("affinity"), list):
            d["affinity"] = tuple(tuple(c) for c in d["affinity"])
        return cls(**d)

    def label(self) -> str:
        """A short description such as 'async 2x1 library/onednn/openmp compact'."""
        aff = self.affinity if isinstance(self.affinity, str) else "explicit"
        parts = [self.name] if self.name else []
        parts.append(f"{self.scheduler} {self.inter_op}x{self.intra_op} "
                     f"{self.operator}/{self.library}/{self.pool} {aff}")
        if self.smt:
            parts.append("smt")
        if self.instances > 1:
            parts.append(f"x{self.instances} instances")
        if self.placement != "shared":
            parts.append(self.placement)
        if self.omp_wait is not None:
            parts.append(f"omp_wait={self.omp_wait}")
        if self.graph_opt != "full":
            parts.append(f"graph_opt={self.graph_opt}")
        if self.precision != "fp32":
            parts.append(self.precision)
        return " ".join(parts)


def _iterable(cpus: Any) -> Any:
    """One worker's CPU list; TypeError for anything but a list of them."""
    if isinstance(cpus, (str, bytes, dict)) or not hasattr(cpus, "__iter__"):
        raise TypeError(f"each affinity entry must be a list of CPU numbers, got {cpus!r}")
    return cpus


def allowed_cores(topo: Topology) -> int:
    """Physical cores with at least one CPU this process may use."""
    allowed = set(topo.allowed_cpus)
    return sum(1 for c in topo.cores if allowed & set(c.pus))


def team_cpus(settings: Settings, topo: Topology) -> tuple[int, ...]:
    """The CPUs one team of ``settings`` runs on in ``topo``: the first
    worker's of its placement (instances x inter_op workers of intra_op
    threads); where it pins nothing (affinity ``none``), those compact
    placement would give it, since that is where a team is most likely to
    land. A setting that does not fit (more threads than cores): a compact
    team of as many cores as the process may use, up to ``intra_op``."""
    # Imported here: placement loads the native core, which a framework's
    # child (it reads Settings) must never load next to its framework.
    from pyparbench.threading.placement import place  # noqa: PLC0415 (framework child: no native core)

    affinity = "compact" if settings.affinity == "none" else settings.affinity
    try:
        first = place(topo, affinity, settings.instances * settings.inter_op,
                      settings.intra_op, smt=settings.smt, group=settings.inter_op).pools[0]
    except ValueError:
        first = place(topo, "compact", 1, max(1, min(settings.intra_op, allowed_cores(topo))),
                      smt=False).pools[0]
    return tuple(first or topo.allowed_cpus)


def instance_cpus(settings: Settings, topo: Topology) -> tuple[tuple[int, ...], ...]:
    """The OS CPU numbers each instance of ``settings`` is pinned to on
    ``topo``: its inter_op workers' teams, one list per instance (compact
    placement where the setting pins nothing, as instances are run).

    Raises
    ------
    ValueError
        The setting does not fit ``topo`` (more threads than CPUs to pin).
    """
    from pyparbench.threading.placement import place  # see team_cpus  # noqa: PLC0415 (framework child: no native core)

    affinity = "compact" if settings.affinity == "none" else settings.affinity
    placement = place(topo, affinity, settings.instances * settings.inter_op, settings.intra_op,
                      smt=settings.smt, group=settings.inter_op)
    per = settings.inter_op
    return tuple(tuple(c for p in placement.pools[i * per:(i + 1) * per] for c in (p or ()))
                 for i in range(settings.instances))


def numa_domains(topo: Topology) -> int:
    """NUMA nodes holding a CPU this process may use (memory-only ones hold
    none); at least the sockets."""
    allowed = set(topo.allowed_cpus)
    nodes = sum(1 for n in topo.numa_nodes if not n.memory_only and allowed & set(n.pus))
    return max(allowed_sockets(topo), nodes)


def allowed_layout(topo: Topology) -> str:
    """Where the CPUs this process may use lie: per socket, its cores that
    hold one and how many CPUs of each, e.g. ``"2 cores x 1 CPU"`` or
    ``"4 cores x 2 CPUs | 4 cores x 2 CPUs"`` (two sockets). Two jobs with
    one layout run a thread count the same way, whichever CPU numbers each
    was given."""
    allowed = set(topo.allowed_cpus)
    per_socket: dict[int, Counter[int]] = {}
    for c in topo.cores:
        n = len(allowed & set(c.pus))
        if n:
            per_socket.setdefault(c.package, Counter())[n] += 1

    def plural(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    parts = [" + ".join(f"{plural(cores, 'core')} x {plural(n, 'CPU')}"
                        for n, cores in sorted(counts.items(), reverse=True))
             for counts in per_socket.values()]
    return " | ".join(sorted(parts, reverse=True)) or "no CPU"


def allowed_sockets(topo: Topology) -> int:
    """Sockets with at least one CPU this process may use."""
    allowed = set(topo.allowed_cpus)
    return max(1, sum(1 for p in topo.packages if allowed & set(p.pus)))


def preset(name: str, topology: Topology | None = None, graph: Graph | None = None) -> Settings:
    """The settings a preset gives on a machine (this one by default).

    * ``tensorflow``: TensorFlow's defaults: inter_op = intra_op = logical
      CPUs, asynchronous scheduling, no pinning, SMT on (above 256 logical
      CPUs, inter_op = 65,536 // logical CPUs: see the code).
    * ``intel``: Intel's advice: inter_op = sockets, intra_op = physical
      cores per socket, compact affinity over physical cores, a short spin
      (KMP_BLOCKTIME=1 ms, as a libgomp spin count: :data:`INTEL_SPINCOUNT`).
    * ``tftuner``: the study's tuner: inter_op = max(1, round(average
      width)), intra_op = physical cores // inter_op, library operator
      mode, compact affinity, SMT off. Needs ``graph``.

    Raises
    ------
    ValueError
        An unknown name, or ``tftuner`` without a graph.
    """
    choice("preset", name, PRESETS)
    if topology is None:
        from pyparbench.threading.topology import topology as this_machine  # noqa: PLC0415 (framework child: no native core)

        topology = this_machine()
    logical = len(topology.allowed_cpus)
    cores = allowed_cores(topology)
    sockets = allowed_sockets(topology)
    if name == "tensorflow":
        # TensorFlow's inter-op workers share one intra-op pool; here each
        # worker has a team of its own, so inter_op x intra_op threads may
        # exist, past MAX_RUN_THREADS above 256 logical CPUs. There the
        # workers are capped to fit: still at least 170, far more than the
        # independent ops any model has ready at once, so the cap changes
        # nothing that runs.
        inter = min(logical, MAX_RUN_THREADS // logical)
        return Settings(scheduler="async" if inter > 1 else "sync", inter_op=inter,
                        intra_op=logical, affinity="none", smt=True, name=name)
    if name == "intel":
        return Settings(scheduler="async" if sockets > 1 else "sync", inter_op=sockets,
                        intra_op=max(1, cores // sockets), affinity="compact", smt=False,
                        omp_wait=INTEL_SPINCOUNT, name=name)
    if graph is None:
        raise ValueError("the tftuner preset needs the graph (its average width)")
    inter = max(1, min(cores, round(graph.avg_width)))
    return Settings(scheduler="async" if inter > 1 else "sync", inter_op=inter,
                    intra_op=max(1, cores // inter), operator="library", affinity="compact",
                    smt=False, name=name)
