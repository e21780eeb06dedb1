"""hwloc XML topologies shaped like real machines, for the tests.

Each starts as ``lstopo --input "<synthetic>" --of xml`` and is edited with
xml.etree the way real machines differ from synthetic ones: PUs renumbered
(SMT siblings far apart, packages interleaved), a package split into NUMA
nodes, a memory-only NUMA node, CPU kinds, disallowed CPUs. :func:`fix_sets`
then recomputes every object's cpuset and nodeset from its PUs and NUMA
nodes, as hwloc would have written them.
"""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

LSTOPO = shutil.which("lstopo") or shutil.which("lstopo-no-graphics")


def lstopo_xml(synthetic: str) -> ET.Element:
    """The <topology> element lstopo writes for a synthetic description."""
    assert LSTOPO is not None, "lstopo is missing (apt-get install -y hwloc)"
    out = subprocess.run([LSTOPO, "--input", synthetic, "--of", "xml", "-"], check=True,
                         capture_output=True, text=True).stdout
    return ET.fromstring(out)


def mask(cpus: Iterable[int]) -> str:
    """hwloc's bitmap string: 32-bit words, most significant first."""
    s = set(cpus)
    if not s:
        return "0x0"
    words = []
    for w in range(max(s) // 32 + 1):
        words.append(sum(1 << (c - 32 * w) for c in s if 32 * w <= c < 32 * (w + 1)))
    return ",".join(f"0x{x:08x}" for x in reversed(words))


def objects(root: ET.Element, type_: str | None = None) -> Iterator[ET.Element]:
    """Every <object> (of one type) in document order."""
    for o in root.iter("object"):
        if type_ is None or o.get("type") == type_:
            yield o


def machine(root: ET.Element) -> ET.Element:
    m = root.find("object")
    assert m is not None
    return m


def pus_below(obj: ET.Element) -> list[int]:
    return [int(p.get("os_index", "0")) for p in obj.iter("object") if p.get("type") == "PU"]


def renumber(root: ET.Element, os_index: Callable[[int, int, int], int]) -> None:
    """Give each PU the OS number ``os_index(package, core in package, thread
    in core)`` (logical positions)."""
    for p, pkg in enumerate(objects(root, "Package")):
        for c, core in enumerate(o for o in pkg.iter("object") if o.get("type") == "Core"):
            for t, pu in enumerate(o for o in core if o.get("type") == "PU"):
                pu.set("os_index", str(os_index(p, c, t)))


def split_numa(root: ET.Element, parts: int, *, package: int | None = None) -> None:
    """Replace the machine's NUMA node by ``parts`` NUMA nodes per package (or
    in one ``package``, the others keeping one each), each attached to a Group
    holding a contiguous share of the package's children (cores, caches)."""
    for parent in [machine(root), *objects(root, "Package")]:
        for n in [o for o in parent if o.get("type") == "NUMANode"]:
            parent.remove(n)
    gp = max(int(o.get("gp_index", "0")) for o in objects(root)) + 1
    node = 0
    for p, pkg in enumerate(objects(root, "Package")):
        k = parts if package is None or p == package else 1
        kids = [o for o in pkg if o.tag == "object"]
        for o in kids:
            pkg.remove(o)
        share = len(kids) // k
        assert share * k == len(kids), f"{len(kids)} children do not split in {k}"
        for g in range(k):
            group = ET.SubElement(pkg, "object", {"type": "Group", "gp_index": str(gp)})
            gp += 1
            ET.SubElement(group, "object", {"type": "NUMANode", "os_index": str(node),
                                            "gp_index": str(gp), "local_memory": str(1 << 34)})
            gp += 1
            node += 1
            for o in kids[g * share:(g + 1) * share]:
                group.append(o)


def add_memory_only_numa(root: ET.Element, subtype: str = "CXL") -> int:
    """A NUMA node with no CPUs of its own (CXL memory) attached to the
    machine; returns its OS index."""
    m = machine(root)
    gp = max(int(o.get("gp_index", "0")) for o in objects(root)) + 1
    os_index = max(int(o.get("os_index", "0")) for o in objects(root, "NUMANode")) + 1
    node = ET.Element("object", {"type": "NUMANode", "os_index": str(os_index),
                                 "gp_index": str(gp), "local_memory": str(1 << 36),
                                 "subtype": subtype})
    first = next(i for i, o in enumerate(m) if o.tag == "object" and o.get("type") != "NUMANode")
    m.insert(first, node)
    return os_index


def add_cpu_kinds(root: ET.Element, kinds: list[tuple[list[int], int, dict[str, str]]]) -> None:
    """hwloc CPU kinds: (CPUs, efficiency, infos), least powerful first."""
    at = next(i for i, e in enumerate(root) if e.tag == "support") if root.find(
        "support") is not None else len(root)
    for cpus, efficiency, infos in reversed(kinds):
        k = ET.Element("cpukind", {"cpuset": mask(cpus), "forced_efficiency": str(efficiency)})
        for name, value in infos.items():
            ET.SubElement(k, "info", {"name": name, "value": value})
        root.insert(at, k)


def remove_smt(root: ET.Element, cores: Iterable[int]) -> None:
    """Drop every PU but the first of these cores (logical indexes)."""
    wanted = set(cores)
    for c, core in enumerate(objects(root, "Core")):
        if c in wanted:
            for pu in [o for o in core if o.get("type") == "PU"][1:]:
                core.remove(pu)


def fix_sets(root: ET.Element, *, disallowed: Iterable[int] = ()) -> None:
    """Every object's cpuset and nodeset from its PUs and NUMA nodes; the
    machine's allowed cpuset without ``disallowed``."""
    numa_of_parent: dict[int, list[int]] = {}

    def walk(obj: ET.Element, inherited: list[int]) -> tuple[set[int], set[int]]:
        kids = [o for o in obj if o.tag == "object"]
        here = [int(o.get("os_index", "0")) for o in kids if o.get("type") == "NUMANode"]
        local = inherited + here
        cpus: set[int] = set()
        nodes: set[int] = set(here)
        if obj.get("type") == "PU":
            cpus.add(int(obj.get("os_index", "0")))
        for k in kids:
            if k.get("type") == "NUMANode":
                continue
            c, n = walk(k, local)
            cpus |= c
            nodes |= n
        nodes |= set(inherited)
        for k in kids:
            if k.get("type") == "NUMANode":
                k.set("cpuset", mask(cpus))
                k.set("complete_cpuset", mask(cpus))
                k.set("nodeset", mask([int(k.get("os_index", "0"))]))
                k.set("complete_nodeset", mask([int(k.get("os_index", "0"))]))
        obj.set("cpuset", mask(cpus))
        obj.set("complete_cpuset", mask(cpus))
        obj.set("nodeset", mask(nodes))
        obj.set("complete_nodeset", mask(nodes))
        numa_of_parent[id(obj)] = here
        return cpus, nodes

    m = machine(root)
    cpus, nodes = walk(m, [])
    m.set("allowed_cpuset", mask(cpus - set(disallowed)))
    m.set("allowed_nodeset", mask(nodes))


def write(root: ET.Element, path: Path) -> Path:
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n'
                    '<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
                    + ET.tostring(root, encoding="unicode"))
    return path


# The shapes of the figures and of the tests.

def intel_2s_interleaved(path: Path, cores: int = 4, *, disallowed: Iterable[int] = ()) -> Path:
    """Two sockets of ``cores`` 2-way SMT cores, numbered as many Intel
    servers are: even CPUs on package 0, odd on package 1, each core's
    sibling ``2 * cores`` above it."""
    root = lstopo_xml(f"package:2 l3:1 core:{cores} pu:2")
    total = 2 * cores
    renumber(root, lambda p, c, t: t * total + c * 2 + p)
    fix_sets(root, disallowed=disallowed)
    return write(root, path)


def intel_snc2(path: Path, cores: int = 8) -> Path:
    """Two sockets, each split into two NUMA nodes (SNC-2), siblings far apart."""
    root = lstopo_xml(f"package:2 core:{cores} pu:2")
    total = 2 * cores
    renumber(root, lambda p, c, t: t * total + p * cores + c)
    split_numa(root, 2)
    fix_sets(root)
    return write(root, path)


def epyc_nps4(path: Path, l3s: int = 8, cores_per_l3: int = 8) -> Path:
    """One socket with ``l3s`` L3s of ``cores_per_l3`` cores (CCDs), four
    NUMA nodes (NPS4), SMT siblings numbered after every core."""
    root = lstopo_xml(f"package:1 l3:{l3s}(size=33554432) core:{cores_per_l3} pu:2")
    total = l3s * cores_per_l3
    renumber(root, lambda p, c, t: t * total + c)
    split_numa(root, 4)
    fix_sets(root)
    return write(root, path)


def hybrid_desktop(path: Path, p_cores: int = 8, e_cores: int = 8,
                   e_infos: dict[str, str] | None = None,
                   p_infos: dict[str, str] | None = None) -> Path:
    """One package: ``p_cores`` 2-way SMT P cores (CPUs 0 ..), then
    ``e_cores`` E cores without SMT, with hwloc CPU kinds (their infos as
    hwloc's Linux backend gives them, or ``e_infos`` / ``p_infos``)."""
    root = lstopo_xml(f"package:1 l3:1(size=31457280) core:{p_cores + e_cores} pu:2")
    remove_smt(root, range(p_cores, p_cores + e_cores))
    renumber(root, lambda p, c, t: 2 * c + t if c < p_cores else p_cores + c)
    fix_sets(root)
    p = list(range(2 * p_cores))
    e = list(range(2 * p_cores, 2 * p_cores + e_cores))
    add_cpu_kinds(root, [
        (e, 0, {"CoreType": "IntelAtom", "FrequencyMaxMHz": "3900"} if e_infos is None else e_infos),
        (p, 1, {"CoreType": "IntelCore", "FrequencyMaxMHz": "5400"} if p_infos is None else p_infos)])
    return write(root, path)


def mixed_kind_siblings(path: Path) -> Path:
    """Two 2-way SMT cores (siblings far apart: 0 and 2, 1 and 3) whose CPUs
    are of three kinds, as hwloc's own CPU-kinds test file has them: CPUs 0
    and 1 the least powerful, CPU 2 and CPU 3 (the P kind) each the sibling
    of a slow CPU."""
    root = lstopo_xml("package:1 core:2 pu:2")
    renumber(root, lambda p, c, t: 2 * t + c)
    fix_sets(root)
    add_cpu_kinds(root, [([0, 1], 0, {"CoreType": "Small", "FrequencyMaxMHz": "1000"}),
                         ([2], 7, {"CoreType": "Big", "FrequencyMaxMHz": "2000"}),
                         ([3], 10, {"CoreType": "IntelCore", "FrequencyMaxMHz": "2000"})])
    return write(root, path)


def with_memory_only(path: Path) -> Path:
    """Two sockets of 4 cores (siblings far apart), a CXL memory-only NUMA
    node attached to the machine, and CPUs 1 and 9 disallowed."""
    root = lstopo_xml("package:2 core:4 pu:2")
    renumber(root, lambda p, c, t: t * 8 + p * 4 + c)
    split_numa(root, 1)
    add_memory_only_numa(root)
    fix_sets(root, disallowed=[1, 9])
    return write(root, path)
