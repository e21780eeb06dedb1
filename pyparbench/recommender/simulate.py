"""Schedule simulation: a graph's latency under one setting, from a cost model.

The simulation replays what the native executor does
(``csrc/pyparbench/graph/executor.cpp``):

* **sync**: one worker runs the nodes one after another;
* **async** with ``inter_op`` workers: nodes whose inputs are done wait in
  one FIFO ready queue (the graph's sources in id order, then each finished
  node's consumers in id order); an idle worker takes the queue's front.
  Each dispatch costs ``async_node`` ns on the worker and holds the queue's
  lock for ``async_serial`` ns, which no two workers can do at once.

Each running node advances at a rate that depends on what else runs
(processor sharing, recomputed at every start and end):

* **co-run**: an op slows by ``corun_compute`` (or ``corun_memory`` for a
  memory-bound op) times the fraction of the other cores that are busy,
  other instances' threads counted as busy all the time;
* **SMT and oversubscription**: with more threads than physical cores
  (``instances x inter_op x intra_op``), each team gets its share of the
  cores (SMT siblings adding ``smt_yield - 1`` of a core each), and with more
  threads than CPUs every multi-threaded node also pays ``oversub_node_ns``
  per unit of oversubscription (spinning barriers whose threads were
  descheduled).

Where the model has measured the OpenMP wait policies
(:class:`~pyparbench.recommender.costmodel.WaitCosts`), each node run by an
OpenMP team of more than one thread (library mode, or framework mode on
the OpenMP pool) is one parallel region, and costs what the setting's
policy adds to a region after the serial stretch before it (the time since
its worker's previous node ended) over the default policy's back to back:
op times were measured under the default policy, one node after another.
Under a policy whose regions cost more than the default's, a node costs at
most its one-thread time: the executor's thread rule runs it alone.

With ``instances`` > 1 the graph given is one instance's (its slice of the
batch) and the latency is that instance's; the others run beside it on
their own cores. Where the model has a measured co-run factor for that many
instances of this graph (:meth:`CostModel.instance_factor`: the copies
share caches and memory bandwidth, each streaming its own weights), the
instance is simulated alone and its times scaled by that factor, in place
of the co-run penalty of the other instances' threads.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

from pyparbench.graph import Graph
from pyparbench.recommender.costmodel import ALIAS_OPS, CostModel
from pyparbench.settings import Settings, allowed_cores, allowed_sockets, numa_domains
from pyparbench.threading.topology import Topology, fastest_kind, kind_speed

__all__ = ["Resources", "Simulation", "omp_team", "simulate"]


@dataclass(frozen=True)
class Resources:
    """The CPUs a setting runs on: physical cores, logical CPUs, sockets, and
    the topology they come from (where known: it places a setting's teams,
    whose caches size the micro-batch pass)."""

    cores: int
    logical: int
    sockets: int = 1
    topology: Topology | None = field(default=None, compare=False, repr=False)
    numa_domains: int = 0  # NUMA domains holding CPUs (0: one per socket)
    # On a hybrid machine: the CPU kind the teams run on (None: the most
    # powerful one) and its cores' speed relative to that kind's.
    kind: int | None = None
    speed: float = 1.0

    def __post_init__(self) -> None:
        if self.cores < 1 or self.logical < self.cores or self.sockets < 1:
            raise ValueError(f"resources need 1 <= cores <= logical and sockets >= 1, got "
                             f"cores={self.cores}, logical={self.logical}, "
                             f"sockets={self.sockets}")
        if not 0.0 < self.speed <= 1.0:
            raise ValueError(f"a CPU kind's relative speed must be in (0, 1], got {self.speed}")

    @property
    def cores_per_socket(self) -> int:
        return max(1, self.cores // self.sockets)

    @property
    def numa_per_socket(self) -> int:
        """NUMA domains per socket (SNC, NPS), at least 1."""
        return max(1, self.numa_domains // self.sockets)

    @property
    def smt(self) -> bool:
        return self.logical > self.cores

    @classmethod
    def from_topology(cls, topo: Topology, kind: int | None = None) -> Resources:
        """What this process may use of ``topo``; on a hybrid machine, of one
        CPU kind: by default the most powerful (P cores), a team on one kind,
        where compact placement puts it first; ``kind`` another, at its speed
        (:func:`~pyparbench.threading.topology.kind_speed`, which must be
        known)."""
        cores = allowed_cores(topo)
        logical = len(topo.allowed_cpus)
        fast = fastest_kind(topo)
        speed = 1.0
        if kind is not None and kind != fast:
            known = kind_speed(topo, kind)
            if known is None:
                raise ValueError(f"CPU kind {kind} of {topo.source}: its speed is not known "
                                 f"(no LinuxCapacity or FrequencyMaxMHz in the topology)")
            speed = known[0]
        kind = fast if kind is None else kind
        if kind is not None:
            mine = set(topo.allowed_cpus) & set(topo.cpu_kinds[kind].pus)
            if mine:
                cores = sum(1 for c in topo.cores if mine & set(c.pus))
                logical = len(mine)
        return cls(cores=max(1, cores), logical=max(cores, logical),
                   sockets=allowed_sockets(topo), topology=topo,
                   numa_domains=numa_domains(topo),
                   kind=kind if kind != fast else None, speed=speed)


@dataclass(frozen=True)
class Simulation:
    """One simulated run: latency and each node's placement in time (ns)."""

    settings: Settings
    latency_ns: float
    start_ns: tuple[float, ...]
    end_ns: tuple[float, ...]
    worker: tuple[int, ...]
    op_ns: tuple[float, ...]  # each node's own time at its thread count, alone

    @property
    def work_ns(self) -> float:
        """Sum of the nodes' own times (what one worker would spend on ops)."""
        return sum(self.op_ns)

    def concurrency(self, nodes: list[int] | None = None) -> float:
        """Average number of the given (default: all computing) nodes running at
        once while any of them runs."""
        ids = nodes if nodes is not None else [i for i, t in enumerate(self.op_ns) if t > 0]
        spans = sorted((self.start_ns[i], self.end_ns[i]) for i in ids
                       if self.end_ns[i] > self.start_ns[i])
        if not spans:
            return 1.0
        busy = 0.0
        covered = 0.0
        cur_s, cur_e = spans[0]
        for s, e in spans:
            busy += e - s
            if s > cur_e:
                covered += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        covered += cur_e - cur_s
        return busy / covered if covered > 0 else 1.0


def _thread_share(settings: Settings, res: Resources) -> tuple[float, float, float]:
    """(physical cores per requested thread, SMT speed-up, oversubscription).

    Threads beyond the physical cores go to SMT siblings when the setting may
    use them (smt, or no pinning so the OS places them), each worth
    ``smt_yield - 1`` of a core; threads beyond the CPUs are oversubscribed.
    """
    demand = settings.threads
    cpus = res.logical if (settings.smt or settings.affinity == "none") else res.cores
    share = min(1.0, res.cores / demand)
    oversub = max(0.0, demand / cpus - 1.0)
    return share, float(min(demand, cpus)), oversub


def omp_team(settings: Settings) -> bool:
    """Whether the setting runs its ops on OpenMP teams of more than one
    thread: what the wait policy acts on."""
    return settings.intra_op > 1 and (settings.operator == "library"
                                      or settings.pool == "openmp")


def simulate(graph: Graph, settings: Settings, model: CostModel,
             resources: Resources) -> Simulation:
    """Simulate one run of ``graph`` (one instance's graph) under ``settings``.

    Parameters
    ----------
    graph
        The graph one instance runs (with ``instances`` = k, the model at
        batch / k).
    settings
        The setting; ``instances`` counts the copies running beside this one.
    model
        Op times and executor costs.
    resources
        The machine's cores, CPUs and sockets.

    Returns
    -------
    Simulation
        The latency of this instance and each node's start, end and worker.
    """
    ex = model.executor
    sync = settings.scheduler == "sync"
    workers = 1 if sync else settings.inter_op
    t = settings.intra_op
    dispatch = ex.sync_node_ns if sync else ex.async_node(workers)
    serial = 0.0 if sync else ex.async_serial(workers)
    res = resources
    share, used_cpus, oversub = _thread_share(settings, res)

    # A team of t threads owns t * share physical cores: its op times are the
    # model's at the whole cores it owns, scaled by the fraction left over
    # (below one core a thread runs part of the time). SMT siblings in use
    # add smt_yield - 1 of a core each; oversubscription adds its penalty.
    phys = t * share
    t_query = max(1, math.floor(phys + 1e-9))
    stretch = t_query / phys
    siblings = max(0.0, used_cpus - res.cores)
    smt_gain = 1.0 + siblings * (ex.smt_yield - 1.0) / res.cores
    penalty = ex.oversub_node_ns * oversub

    n = len(graph.nodes)
    own = [0.0] * n
    threads_of = [0] * n
    pcorun = [0.0] * n
    for node in graph.nodes:
        if node.op in ALIAS_OPS:
            continue
        base = model.op_ns(graph, node, t_query, settings.operator, settings.library,
                           settings.pool)
        own[node.id] = base * stretch / smt_gain / res.speed + penalty
        threads_of[node.id] = t
        pcorun[node.id] = ex.corun_memory if model.memory_bound(graph, node) else ex.corun_compute
    # What the wait policy adds to each region, from the gap before it.
    wait = model.wait if omp_team(settings) else None
    # A node's time on its worker's thread alone: where the policy makes a
    # region dearer than the default's (passive pays a futex wake on each,
    # 54 us on the project's 2-core VM), the executor's per-node thread rule,
    # which times the team's start in each process, runs the node alone
    # when that is cheaper (dlrm-kaggle b1 under passive: 30 us measured, as
    # on one thread, where a region per node predicted 1.96 ms).
    alone = [0.0] * n
    if wait is not None and wait.region_ns(settings.omp_wait, t, 0.0) > wait.region_ns(
            None, t, 0.0):
        for node in graph.nodes:
            if own[node.id] > 0:
                alone[node.id] = model.op_ns(graph, node, 1, settings.operator,
                                             settings.library, settings.pool
                                             ) / res.speed + penalty
    last_end = [0.0] * workers
    factor = (model.instance_factor(graph, settings.instances)
              if settings.instances > 1 else None)
    background = (settings.instances - 1) * workers * t if factor is None else 0

    deps = [len(set(node.inputs)) for node in graph.nodes]
    consumers = [sorted(set(c)) for c in graph.consumers]
    ready = deque(i for i in range(n) if deps[i] == 0)
    idle = list(range(workers))
    heapq.heapify(idle)
    start = [0.0] * n
    end = [0.0] * n
    where = [0] * n
    # running node -> [worker, work starts at, remaining work (ns at rate 1)]
    running: dict[int, list[float]] = {}
    order: dict[int, int] = {}  # dispatch order, to finish ties as the executor would
    lock_free = 0.0
    now = 0.0
    seq = 0
    done = 0
    while done < n:
        while idle and ready:
            node_id = ready.popleft()
            w = heapq.heappop(idle)
            lock_at = max(now, lock_free)
            lock_free = lock_at + serial
            start[node_id] = now
            where[node_id] = w
            extra = 0.0
            cost = own[node_id]
            if wait is not None and own[node_id] > 0:
                extra = wait.extra_ns(settings.omp_wait, t, now - last_end[w])
                # A policy saves at most the default's region, which the op time holds.
                extra = max(extra, -min(own[node_id], wait.region_ns(None, t, 0.0)))
                cost += extra
                if 0 < alone[node_id] < cost:
                    cost, threads_of[node_id] = alone[node_id], 1
            running[node_id] = [float(w), lock_at + serial, max(0.0, dispatch + cost)]
            order[node_id] = seq
            seq += 1
        if not running:  # cannot happen for a valid DAG
            raise RuntimeError("simulation stalled: a node's inputs never finish")
        active = [i for i, r in running.items() if r[1] <= now + 1e-9]
        busy = sum(threads_of[i] for i in active)
        rate: dict[int, float] = {}
        for i in active:
            others = busy - threads_of[i] + background
            frac = min(1.0, others / max(1, res.cores - threads_of[i])) if others > 0 else 0.0
            rate[i] = 1.0 / (1.0 + pcorun[i] * frac)
        step = math.inf
        for i in active:
            step = min(step, running[i][2] / rate[i])
        for r in running.values():
            if r[1] > now + 1e-9:
                step = min(step, r[1] - now)
        step = max(step, 0.0)
        finished = []
        for i in active:
            r = running[i]
            left = r[2] - rate[i] * step
            if left <= 1e-6 * max(1.0, r[2]) or r[2] / rate[i] <= step:
                finished.append(i)
            else:
                r[2] = left
        now += step
        for i in sorted(finished, key=order.__getitem__):
            end[i] = now
            w = int(running.pop(i)[0])
            last_end[w] = now
            heapq.heappush(idle, w)
            done += 1
            for c in consumers[i]:
                deps[c] -= 1
                if deps[c] == 0:
                    ready.append(c)
    if factor is not None:
        now *= factor
        start = [v * factor for v in start]
        end = [v * factor for v in end]
    return Simulation(settings, now, tuple(start), tuple(end), tuple(where), tuple(own))
