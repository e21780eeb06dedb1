"""``pyparbench info``: oneDNN build and ISA, OpenMP runtime, CPUs and topology."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from pyparbench._core import peak as _peak
from pyparbench.cli._common import print_json
from pyparbench.machine.info import info
from pyparbench.cpulist import cpu_str

__all__ = ["add_command"]


def _print_info(data: dict[str, Any]) -> None:
    table = Table(title=f"pyparbench {data['pyparbench']}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    d, o, c = data["onednn"], data["openmp"], data["cpus"]
    cpu = data["cpu"]
    vector = f", SVE {cpu['sve_vector_bits']}-bit" if cpu["sve_vector_bits"] else ""
    rows = [
        ("CPU", cpu["model"] or "unknown"),
        ("architecture", f"{cpu['arch']}{vector}"),
        ("CPU features", " ".join(cpu["flags"]) or "none asked"),
        ("native precisions", _precisions(cpu, _peak.isa_cap())),
        ("pyparbench kernels", ", ".join(f"{k} {v}" for k, v in cpu["kernels"].items())),
        ("oneDNN", f"{d['version']} (API v{d['api_major']}, {d['hash']})"),
        ("oneDNN CPU runtime", d["cpu_runtime"]),
        ("oneDNN ISA", d["isa"]),
        ("OpenMP library", o["library"]),
        ("OpenMP spec", f"{o['spec']} (max threads {o['max_threads']}, procs {o['num_procs']})"),
        ("logical CPUs", str(c["logical"])),
        ("physical cores", str(c["physical_cores"])),
        ("sockets / NUMA nodes", f"{c['sockets']} / {c['numa_nodes']}"),
        ("allowed CPUs", ",".join(map(str, c["allowed"]))),
        ("default intra-op threads", str(data["default_threads"])),
        ("compiler", data["compiler"]),
        ("python", f"{data['python']} on {data['platform']}"),
    ]
    for k, v in rows:
        table.add_row(k, v)
    console = Console()
    console.print(table)
    if "topology" in data:
        console.print(_topology_table(data["topology"]))


def _precisions(cpu: dict[str, Any], isa_cap: str) -> str:
    """The native precisions, each dot-product one with the instructions of
    its `pyparbench peak` ceiling: "fp32, bf16 (vdpbf16ps), int8 (vpdpbusd)";
    one the ISA cap `isa_cap` turns off, by the core's rule (dot_capped),
    with the cap: "bf16 (off under ONEDNN_MAX_CPU_ISA=AVX512_CORE)"."""
    dots = cpu.get("dot_instructions", {})

    def one(p: str) -> str:
        if dots.get(p):
            return f"{p} ({' / '.join(dots[p])})"
        if p != "fp32" and _peak.dot_capped(p, cpu["arch"], cpu["flags"], isa_cap):
            return f"{p} (off under ONEDNN_MAX_CPU_ISA={isa_cap})"
        return p

    return ", ".join(one(p) for p in cpu["precisions"])


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def _topology_table(t: dict[str, Any]) -> Table:
    table = Table(title=f"topology ({t['source']})", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    cores = t["cores"]
    for p in range(t["packages"]):
        mine = [c for c in cores if c["package"] == p]
        cpus = [cpu for c in mine for cpu in c["cpus"]]
        table.add_row(f"socket {p}", f"{len(mine)} cores, CPUs {cpu_str(cpus)}")
    for n in t["numa_nodes"]:
        mem = f", {_size(n['memory'])}" if n["memory"] else ""
        table.add_row(f"NUMA node {n['os_index']}", f"CPUs {cpu_str(n['cpus'])}{mem}")
    per_core = sorted({len(c["cpus"]) for c in cores})
    smt = "none" if per_core == [1] else f"{'/'.join(map(str, per_core))} logical CPUs per core"
    table.add_row("SMT", smt)
    if t["smt_siblings"]:
        pairs = sorted({tuple(sorted(c["cpus"])) for c in cores if len(c["cpus"]) > 1})
        shown = ", ".join("+".join(map(str, p)) for p in pairs[:8])
        table.add_row("sibling CPUs", shown + (", ..." if len(pairs) > 8 else ""))
    names = {"data": "d", "instruction": "i", "unified": ""}
    caches = ", ".join(
        f"L{c['level']}{names.get(c['type'], '')} {_size(c['size'])} x{c['count']}"
        + (f" (shared by {c['cpus_per_instance']} CPUs)" if c["cpus_per_instance"] > 1 else "")
        for c in t["caches"])
    table.add_row("caches", caches or "unknown")
    table.add_row("allowed CPUs", cpu_str(t["allowed_cpus"]))
    return table


def _cmd_info(args: argparse.Namespace) -> int:
    data = info()
    if args.json:
        print_json(data)
    else:
        _print_info(data)
    return 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("info", help="oneDNN build and ISA, OpenMP runtime, CPUs, topology")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_info)
