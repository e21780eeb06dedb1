"""The cache a team of threads runs in: its share of the caches that cover its CPUs.

A decision sized by a cache (the micro-batch budget, a probe's working set)
asks for the cache the team will use, not every cache in the machine: a team
on one socket of a 2-socket server sees one L3, a 4-core team on an AMD EPYC
sees one CCD's L3 (32 MiB, not twelve of them), and a team of 2 cores on a
64-core L3 shares it with the 62 others. So each cache instance that holds
one of the team's cores counts in proportion to the cores of that instance
the team uses; the per-core caches below it (L2) count whole.

A virtual machine is the one case hwloc cannot describe: it reports the
host's whole L3 (300 MiB on a 2-vCPU slice of a large host) as if the VM's
vCPUs were its only users, while other tenants fill it. On this machine,
when the CPU says it runs under a hypervisor, each core's share of an
instance is capped at :data:`VM_SHARE_PER_CORE`. A synthetic topology or a
topology file describes a machine as it is, and is taken at its word.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from pyparbench.cpuinfo import cpuinfo_value, read_cpuinfo
from pyparbench.threading.topology import Topology

__all__ = ["VM_SHARE_PER_CORE", "FALLBACK_CACHE_BYTES", "running_under_hypervisor",
           "team_cache_bytes", "team_cores"]

# The most L3 per core of the x86 and Arm server parts a VM is usually cut
# from (Intel Xeon 1.5-5 MiB, AMD EPYC 4 MiB, Graviton / Neoverse 0.5-1.5 MiB
# per core; AMD's 3D V-Cache parts, 12 MiB, are the exception): a VM's vCPU
# is given no more of the host's L3 than a core of such a part has.
VM_SHARE_PER_CORE = 4 << 20
# What a machine whose hwloc reports no cache is assumed to have, for all of
# its cores together.
FALLBACK_CACHE_BYTES = 32 << 20


@functools.cache
def running_under_hypervisor() -> bool:
    """Whether this machine's CPU says it runs under a hypervisor (the x86
    ``hypervisor`` flag in /proc/cpuinfo)."""
    flags = cpuinfo_value(read_cpuinfo(), "flags")
    return flags is not None and "hypervisor" in flags.split()


def team_cores(topo: Topology, cpus: Iterable[int]) -> set[int]:
    """The indexes (into ``topo.cores``) of the cores holding ``cpus``.

    Raises
    ------
    ValueError
        A CPU that ``topo`` does not have.
    """
    core_of = {p.os_index: p.core for p in topo.pus}
    wanted = list(cpus)
    unknown = sorted({c for c in wanted if c not in core_of})
    if unknown:
        raise ValueError(f"CPUs {unknown} are not in the topology ({topo.source})")
    return {core_of[c] for c in wanted}


def team_cache_bytes(topo: Topology, cpus: Iterable[int] | None = None, *,
                     under_hypervisor: bool | None = None) -> int:
    """The cache bytes a team on ``cpus`` (default: every CPU this process may
    use) runs in: over the data and unified caches of level 2 and up, each
    instance holding one of its cores, the instance's size times the share of
    its cores the team uses (a core's own L2 counts whole, a shared L3 in
    proportion).

    ``under_hypervisor`` (default: whether ``topo`` is this machine and its
    CPU says so) caps each core's share of an instance at
    :data:`VM_SHARE_PER_CORE`. With no cache in ``topo``,
    :data:`FALLBACK_CACHE_BYTES` shared by all cores in proportion.
    """
    team = team_cores(topo, topo.allowed_cpus if cpus is None else cpus)
    if not team:
        return 0
    if under_hypervisor is None:
        under_hypervisor = topo.kind == "machine" and running_under_hypervisor()
    core_of = {p.os_index: p.core for p in topo.pus}
    total = 0.0
    levels = [c for c in topo.cache_instances if c.level >= 2 and c.type != "instruction"]
    for c in levels:
        cores = {core_of[p] for p in c.pus if p in core_of}
        used = len(cores & team)
        if not used:
            continue
        per_core = c.size / len(cores)
        if under_hypervisor:
            per_core = min(per_core, VM_SHARE_PER_CORE)
        total += per_core * used
    if not levels:
        total = FALLBACK_CACHE_BYTES * len(team) / max(1, len(topo.cores))
    return int(total)
