"""Placement: the CPUs each pool's threads are pinned to, for a topology.

Policies (over the CPUs the process may use):

``"none"``
    No pinning.
``"compact"``
    Physical cores first, SMT siblings last (siblings found by core, whatever
    their OS numbers). Each pool's team stays in one L3 domain, else one NUMA
    node, else one socket, when it fits there; otherwise it takes the next
    free CPUs in compact order. On a hybrid machine a team stays on one CPU
    kind where it fits, the most powerful (P cores) first. With ``group``
    (an instance's inter-op workers), each group of pools is first given the
    tightest home that holds all its threads, SMT siblings or not: an
    instance never crosses a NUMA node it fits in.
``"scatter"``
    Threads dealt round-robin across sockets (and NUMA nodes within a
    socket), physical cores before SMT siblings; pool ``p`` takes threads
    ``p*T .. p*T+T-1`` of that order, so a pool spans sockets.
explicit CPU lists
    One flat list of ``pools * threads`` CPUs (split in order), or one list
    of ``threads`` CPUs per pool.

SMT siblings are used only with ``smt=True``, and only when the physical
cores are not enough for ``pools * threads`` threads. Disallowed CPUs are
never used; memory-only NUMA nodes hold no threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyparbench._core import threading as _t
from pyparbench._checks import as_int
from pyparbench.threading.topology import Topology

Affinity = str | Sequence[int] | Sequence[Sequence[int]]


@dataclass(frozen=True)
class Placement:
    """CPU lists, one per pool (None for a pool that is not pinned)."""

    policy: str
    smt: bool
    pools: tuple[tuple[int, ...] | None, ...]

    @property
    def pinned(self) -> bool:
        """Whether threads are pinned at all."""
        return any(p is not None for p in self.pools)

    @property
    def cpus(self) -> tuple[int, ...]:
        """Every CPU used, pool after pool."""
        return tuple(c for p in self.pools if p is not None for c in p)



def _explicit(affinity: Sequence[object], pools: int, threads: int) -> list[list[int]]:
    if len(affinity) == 0:
        raise ValueError("explicit affinity is an empty list of CPUs")
    nested = [a for a in affinity if isinstance(a, (list, tuple))]
    if len(nested) == len(affinity):
        return [[as_int(c, "a CPU number") for c in a] for a in nested]
    if nested:
        raise TypeError(f"explicit affinity must be a list of CPUs or a list of CPU lists, "
                        f"got {affinity!r}")
    flat = [as_int(c, "a CPU number") for c in affinity]
    if len(flat) != pools * threads:
        raise ValueError(f"explicit affinity lists {len(flat)} CPUs for {pools} pool(s) x "
                         f"{threads} thread(s) = {pools * threads}: {flat}")
    return [flat[p * threads:(p + 1) * threads] for p in range(pools)]


def place(topology: Topology, affinity: Affinity, pools: int = 1, threads: int = 1, *,
          smt: bool = False, group: int = 0) -> Placement:
    """Pin ``pools`` pools of ``threads`` threads each on ``topology``.

    Parameters
    ----------
    topology
        From ``pyparbench.topology()`` (this machine, a synthetic one or an
        hwloc XML file).
    affinity
        ``"none"``, ``"compact"``, ``"scatter"`` or explicit CPU lists (see
        the module docstring).
    pools, threads
        Inter-op pools and threads per pool (>= 1).
    smt
        Whether SMT siblings (hyper-threads) may be used.
    group
        Pools per instance (``inter_op``): compact placement keeps each
        group of pools in the tightest home that holds it (0: the pools are
        not instances).

    Returns
    -------
    Placement
        ``pools`` disjoint CPU tuples of ``threads`` CPUs each (None each
        for ``"none"``).

    Raises
    ------
    ValueError
        Unknown policy name; pools or threads < 1; more ``pools * threads``
        than CPUs with pinning requested (physical cores with
        ``smt=False``); an explicit list naming a CPU this process may not
        use, a CPU twice, the wrong number of CPUs, or SMT siblings with
        ``smt=False``.
    TypeError
        Arguments of the wrong type.
    """
    pools = as_int(pools, "pools")
    threads = as_int(threads, "threads")
    if pools < 1:
        raise ValueError(f"pools must be >= 1, got {pools}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    group = as_int(group, "group")
    if group < 0:
        raise ValueError(f"group must be >= 0, got {group}")
    if not isinstance(smt, bool):
        raise TypeError(f"smt must be a bool, got {smt!r}")
    if not isinstance(topology, Topology):
        raise TypeError(f"topology must come from pyparbench.topology(), got {topology!r}")
    if isinstance(affinity, str):
        lists = _t.place(topology, affinity, pools, threads, smt, group)
        if affinity == "none":
            return Placement("none", smt, tuple(None for _ in lists))
        return Placement(affinity, smt, tuple(tuple(p) for p in lists))
    if not isinstance(affinity, (list, tuple)):
        raise TypeError(f"affinity must be a policy name or CPU lists, got {affinity!r}")
    lists = _t.place_explicit(topology, _explicit(affinity, pools, threads), pools, threads, smt)
    return Placement("explicit", smt, tuple(tuple(p) for p in lists))
