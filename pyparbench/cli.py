"""The ``pyparbench`` command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any


def _print_info(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"pyparbench {data['pyparbench']}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    d, o, c = data["onednn"], data["openmp"], data["cpus"]
    rows = [
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
    Console().print(table)


def _cmd_info(args: argparse.Namespace) -> int:
    from pyparbench.info import info

    data = info()
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_info(data)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pyparbench",
        description="Measure deep-learning operators and graphs under CPU parallelism knobs.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    pi = sub.add_parser("info", help="oneDNN build and ISA, OpenMP runtime, CPUs")
    pi.add_argument("--json", action="store_true", help="print JSON instead of a table")
    pi.set_defaults(func=_cmd_info)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
