"""The machine's topology (hwloc): sockets, NUMA nodes, cores, logical CPUs, caches.

CPU numbers are OS indices (what ``taskset`` and ``os.sched_setaffinity``
use). For a synthetic topology (an hwloc synthetic description such as
``"package:2 core:24 pu:2"``) hwloc numbers the logical CPUs in order, so
core ``c`` of a 2-way SMT machine holds CPUs ``2c`` and ``2c + 1``, and every
CPU counts as allowed.
"""

from __future__ import annotations

from typing import Any

from pyparbench._core import threading as _t

Topology = _t.Topology


def topology(synthetic: str | None = None) -> Topology:
    """This machine's topology, or a synthetic one.

    Parameters
    ----------
    synthetic
        None for this machine, else an hwloc synthetic description, e.g.
        ``"package:2 core:24 pu:2"`` or ``"package:2 numa:2 core:12 pu:2"``.

    Returns
    -------
    Topology
        ``packages``, ``numa_nodes``, ``cores`` (each with the OS numbers of
        its logical CPUs, its package and NUMA node), ``pus`` (logical CPUs
        with their SMT ``siblings``), ``caches`` (size per level) and
        ``allowed_cpus``: the CPUs this process may use (its binding, as set
        by ``taskset``, within what its cgroup allows).

    Raises
    ------
    TypeError
        If ``synthetic`` is not a string or None.
    ValueError
        If hwloc rejects the description.
    """
    if synthetic is None:
        return _t.load_topology("")
    if not isinstance(synthetic, str):
        raise TypeError(f"synthetic must be a string or None, got {synthetic!r}")
    if not synthetic.strip():
        raise ValueError(f"synthetic must be an hwloc description such as "
                         f"'package:2 core:24 pu:2', got {synthetic!r}")
    return _t.load_topology(synthetic)


def topology_dict(topo: Topology) -> dict[str, Any]:
    """A topology as a plain, JSON-serialisable dict."""
    return {
        "source": topo.source,
        "synthetic": topo.synthetic,
        "packages": len(topo.packages),
        "numa_nodes": [
            {"os_index": n.os_index, "package": n.package, "cpus": list(n.pus),
             "memory": int(n.memory)}
            for n in topo.numa_nodes
        ],
        "physical_cores": len(topo.cores),
        "logical_cpus": len(topo.pus),
        "cores": [
            {"index": c.index, "package": c.package, "numa": c.numa, "cpus": list(c.pus)}
            for c in topo.cores
        ],
        "smt_siblings": {str(p.os_index): list(p.siblings) for p in topo.pus if p.siblings},
        "caches": [
            {"level": c.level, "type": c.type, "size": int(c.size), "line_size": c.line_size,
             "count": c.count, "cpus_per_instance": c.cpus_per_instance}
            for c in topo.caches
        ],
        "allowed_cpus": list(topo.allowed_cpus),
    }

