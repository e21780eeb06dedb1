"""The machine's topology (hwloc): sockets, NUMA nodes, L3 domains, cores,
logical CPUs, CPU kinds, caches.

One model from three sources, all read by hwloc the same way:

* this machine (``topology()``);
* an hwloc synthetic description such as ``"package:2 core:24 pu:2"``:
  hwloc numbers its logical CPUs in order, so core ``c`` of a 2-way SMT
  machine holds CPUs ``2c`` and ``2c + 1``, and every CPU counts as allowed;
* an hwloc XML file, as ``lstopo --of xml > box.xml`` writes it on the
  machine to plan: its own CPU numbering (SMT siblings far apart, packages
  interleaved), its NUMA nodes (several per package under SNC / NPS, memory-
  only ones), its L3 domains, CPU kinds (hybrid P and E cores) and the CPUs
  its process was not allowed to use.

CPU numbers are OS indices (what ``taskset`` and ``os.sched_setaffinity``
use). ``Topology.kind`` tells the sources apart (``"machine"``,
``"synthetic"``, ``"file"``); ``source`` names it.
"""

from __future__ import annotations

import os
from typing import Any

from pyparbench._core import threading as _t
from pyparbench.cpulist import cpu_str

Topology = _t.Topology

__all__ = ["Topology", "describe", "fastest_kind", "is_topology_file", "kind_name", "kind_speed",
           "topology", "topology_dict"]


def is_topology_file(spec: str | os.PathLike[str]) -> bool:
    """Whether ``spec`` names a file (an existing path, a name ending in
    ``.xml``, or one with a path separator) rather than a synthetic string."""
    if isinstance(spec, os.PathLike):
        return True
    s = spec.strip()
    return (os.path.isfile(s) or s.lower().endswith(".xml") or os.sep in s
            or s.startswith("<"))


def topology(spec: str | os.PathLike[str] | None = None, *,
             synthetic: str | None = None) -> Topology:
    """This machine's topology, a synthetic one, or one from an hwloc XML file.

    Parameters
    ----------
    spec
        None for this machine; a path to an hwloc XML file (``lstopo --of xml
        > box.xml`` on the machine it describes); else an hwloc synthetic
        description, e.g. ``"package:2 core:24 pu:2"`` or ``"package:2
        numa:2 core:12 pu:2"``.
    synthetic
        The same as ``spec`` (the earlier name of the argument).

    Returns
    -------
    Topology
        ``packages``, ``numa_nodes`` (each with the CPUs whose home it is;
        ``memory_only`` ones hold none), ``l3_domains``, ``cores`` (each with
        the OS numbers of its logical CPUs, its package, NUMA node, L3 and CPU
        kind), ``pus`` (logical CPUs with their SMT ``siblings``),
        ``cpu_kinds``, ``caches``, ``allowed_cpus`` (this machine: the
        process's binding within its cgroup; a file: the cpuset the file
        allows; a synthetic one: every CPU) and ``disallowed_cpus``.

    Raises
    ------
    TypeError
        ``spec`` is not a string, a path or None.
    ValueError
        hwloc rejects the description; the file cannot be read, is over
        ``MAX_TOPOLOGY_FILE_BYTES``, is not XML, is XML hwloc rejects (its
        message), has no CPU or allows none: the message names the file.
    """
    if spec is not None and synthetic is not None:
        raise TypeError("give the topology once: spec or synthetic, not both")
    if spec is None:
        spec = synthetic
    if spec is None:
        return _t.load_topology("")
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"a topology must be an hwloc synthetic string or an hwloc XML file "
                        f"path, got {spec!r}")
    if isinstance(spec, str) and not spec.strip():
        raise ValueError(f"a topology must be an hwloc description such as "
                         f"'package:2 core:24 pu:2' or an hwloc XML file, got {spec!r}")
    if is_topology_file(spec):
        path = os.fspath(spec)
        if not os.path.exists(path):
            raise ValueError(f"topology file {path}: no such file")
        if os.path.isdir(path):
            raise ValueError(f"topology file {path}: a folder, not an hwloc XML file")
        return _t.load_topology_file(path)
    assert isinstance(spec, str)
    return _t.load_topology(spec)


def fastest_kind(topo: Topology) -> int | None:
    """The most powerful CPU kind (P cores): by hwloc's efficiency where
    known, else the last in hwloc's order; None with one kind."""
    if len(topo.cpu_kinds) < 2:
        return None
    return max(topo.cpu_kinds, key=lambda k: (k.efficiency, k.index)).index


def _info_number(infos: dict[str, str], name: str) -> float | None:
    try:
        v = float(infos[name])
    except (KeyError, ValueError):
        return None
    return v if v > 0 else None


def kind_speed(topo: Topology, kind: int) -> tuple[float, str] | None:
    """How fast a core of CPU kind ``kind`` runs an op, relative to one of
    the most powerful kind (1.0 for that kind), and where the figure comes
    from; None where the topology does not tell.

    From the Linux kernel's capacity of each kind (hwloc's ``LinuxCapacity``:
    the scheduler's measure of a core's compute, per clock and clock
    together, as the platform describes it) where both kinds have one, else
    from their top clocks (``FrequencyMaxMHz``: the same work per clock
    assumed, which flatters a core of narrower issue, an E core's, so this
    is the optimistic bound)."""
    fast = fastest_kind(topo)
    if fast is None or kind < 0 or kind >= len(topo.cpu_kinds):
        return None
    if kind == fast:
        return 1.0, "the most powerful kind"
    mine, best = topo.cpu_kinds[kind].infos, topo.cpu_kinds[fast].infos
    for name, what in (("LinuxCapacity", "the kernel's capacity"),
                       ("FrequencyMaxMHz", "top clocks")):
        a, b = _info_number(mine, name), _info_number(best, name)
        if a is not None and b is not None:
            return min(1.0, a / b), f"{what}, {name} {mine[name]} / {best[name]}"
    return None


def kind_name(topo: Topology, kind: int) -> str:
    """A CPU kind's short name: hwloc's CoreType where known (``IntelAtom``
    -> ``E``, ``IntelCore`` -> ``P``), else by rank (``kind 0`` the least
    powerful)."""
    if kind < 0 or kind >= len(topo.cpu_kinds):
        return "-"
    core_type = topo.cpu_kinds[kind].infos.get("CoreType", "")
    return {"IntelAtom": "E", "IntelCore": "P"}.get(core_type, f"kind {kind}")


def topology_dict(topo: Topology) -> dict[str, Any]:
    """A topology as a plain, JSON-serialisable dict."""
    return {
        "source": topo.source,
        "kind": topo.kind,
        "synthetic": topo.synthetic,
        "packages": len(topo.packages),
        "package_cpus": [list(p.pus) for p in topo.packages],
        "numa_nodes": [
            {"os_index": n.os_index, "package": n.package, "cpus": list(n.pus),
             "local_cpus": list(n.local_pus), "memory_only": n.memory_only,
             "subtype": n.subtype, "memory": int(n.memory)}
            for n in topo.numa_nodes
        ],
        "l3_domains": [list(d) for d in topo.l3_domains],
        "physical_cores": len(topo.cores),
        "logical_cpus": len(topo.pus),
        "cores": [
            {"index": c.index, "package": c.package, "numa": c.numa, "l3": c.l3,
             "kind": c.kind, "cpus": list(c.pus)}
            for c in topo.cores
        ],
        "smt_siblings": {str(p.os_index): list(p.siblings) for p in topo.pus if p.siblings},
        "cpu_kinds": [
            {"index": k.index, "name": kind_name(topo, k.index), "efficiency": k.efficiency,
             "cpus": list(k.pus), "infos": dict(k.infos)}
            for k in topo.cpu_kinds
        ],
        "caches": [
            {"level": c.level, "type": c.type, "size": int(c.size), "line_size": c.line_size,
             "count": c.count, "cpus_per_instance": c.cpus_per_instance}
            for c in topo.caches
        ],
        "allowed_cpus": list(topo.allowed_cpus),
        "disallowed_cpus": list(topo.disallowed_cpus),
        "offline_cpus": list(topo.offline_cpus),
    }


def describe(topo: Topology) -> list[str]:
    """The model as lines of text: packages, NUMA nodes (memory-only ones
    marked), L3 domains, cores with their CPUs, CPU kinds, disallowed CPUs."""
    def plural(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    lines = [f"topology: {topo.source} ({topo.kind}): {plural(len(topo.packages), 'package')}, "
             f"{plural(len(topo.cores), 'core')}, {plural(len(topo.pus), 'logical CPU')}"]
    for p in topo.packages:
        lines.append(f"package {p.index}: {plural(len(p.cores), 'core')}, CPUs {cpu_str(p.pus)}")
    for n in topo.numa_nodes:
        where = f" (package {n.package})" if n.package >= 0 else ""
        mem = f", {_size(int(n.memory))}" if n.memory else ""
        sub = f" {n.subtype}" if n.subtype else ""
        if n.memory_only:
            lines.append(f"NUMA node {n.os_index}{sub}: memory-only (no CPUs; local to CPUs "
                         f"{cpu_str(n.local_pus)}){mem}")
        else:
            lines.append(f"NUMA node {n.os_index}{sub}{where}: CPUs {cpu_str(n.pus)}{mem}")
    sizes = [int(c.size) for c in topo.cache_instances if c.level == 3 and c.type != "instruction"]
    for i, d in enumerate(topo.l3_domains):
        size = f" ({_size(sizes[i])})" if i < len(sizes) and sizes[i] else ""
        cores = sum(1 for c in topo.cores if c.l3 == i)
        lines.append(f"L3 {i}{size}: {plural(cores, 'core')}, CPUs {cpu_str(d)}")
    for k in topo.cpu_kinds:
        info = ", ".join(f"{name}={value}" for name, value in sorted(k.infos.items()))
        eff = f"efficiency {k.efficiency}" if k.efficiency >= 0 else "efficiency unknown"
        cores = sum(1 for c in topo.cores if c.kind == k.index)
        lines.append(f"CPU kind {k.index} ({kind_name(topo, k.index)}): {eff}, "
                     f"{plural(cores, 'core')}, CPUs {cpu_str(k.pus)}" + (f"; {info}" if info else ""))
    for c in topo.cores:
        extra = [f"package {c.package}"]
        if c.numa >= 0:
            extra.append(f"NUMA {c.numa}")
        if c.l3 >= 0:
            extra.append(f"L3 {c.l3}")
        if c.kind >= 0:
            extra.append(kind_name(topo, c.kind))
        lines.append(f"core {c.index}: CPUs {','.join(map(str, c.pus))} ({', '.join(extra)})")
    lines.append(f"allowed CPUs: {cpu_str(topo.allowed_cpus)}")
    lines.append(f"disallowed CPUs: {cpu_str(topo.disallowed_cpus)}")
    if topo.offline_cpus:
        lines.append(f"offline CPUs: {cpu_str(topo.offline_cpus)}")
    return lines


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"
