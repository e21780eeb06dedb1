"""Threading runtime: topology, placement (pinning), thread pools and the audit.

* ``topology()`` — sockets, NUMA nodes, cores, logical CPUs, caches and the
  CPUs this process may use (hwloc; synthetic machines too).
* ``place()`` — CPU lists per pool for ``compact`` / ``scatter`` / ``none``
  / explicit affinity, with or without SMT.
* ``Pool`` — the ``openmp``, ``std`` and ``eigen`` thread pools.
* ``audit()`` — which threads ran a kernel or pool, where, and whether that
  matches what was requested (``ThreadingMismatch``); a graph run's audit
  also lists each node's threads under the per-node rule (``NodeThreads``).
* ``get_default_threads()`` / ``set_default_threads()`` — the intra-op threads
  of kernels made with ``threads=None``.
* Prepared kernels are pinned with ``kernel.pin(cpus)`` / ``kernel.unpin()``.
"""

from pyparbench.threading.audit import (
    AuditReport,
    NodeThreads,
    TeamRequest,
    ThreadAudit,
    ThreadingMismatch,
    ThreadingMismatchError,
    ThreadRecord,
    audit,
    check,
    compare,
)
from pyparbench.cpulist import cpu_str
from pyparbench.threading.defaults import get_default_threads, set_default_threads
from pyparbench.threading.omp import (
    current_tid,
    omp_barrier,
    omp_fork_join,
    omp_gap,
    omp_team_tids,
    omp_wait_env,
    thread_affinity,
)
from pyparbench.threading.placement import Affinity, Placement, place
from pyparbench.threading.pools import KINDS, Pool, serial_work
from pyparbench.threading.topology import Topology, topology, topology_dict

__all__ = [
    "KINDS",
    "Affinity",
    "AuditReport",
    "NodeThreads",
    "Placement",
    "Pool",
    "TeamRequest",
    "ThreadAudit",
    "ThreadRecord",
    "ThreadingMismatch",
    "ThreadingMismatchError",
    "Topology",
    "audit",
    "check",
    "compare",
    "cpu_str",
    "current_tid",
    "get_default_threads",
    "omp_barrier",
    "omp_fork_join",
    "omp_gap",
    "omp_team_tids",
    "omp_wait_env",
    "place",
    "serial_work",
    "set_default_threads",
    "thread_affinity",
    "topology",
    "topology_dict",
]
