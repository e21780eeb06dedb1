"""``pyparbench topology [FILE|SYNTHETIC]``: the topology model pyparbench
plans on: packages, NUMA nodes with their CPUs (memory-only ones marked), L3
domains, CPU kinds, cores with their CPUs' OS numbers, disallowed CPUs.

Without an argument, this machine. A file is an hwloc XML topology, written
on the machine it describes with ``lstopo --of xml > box.xml``; anything
else is an hwloc synthetic description (``"package:2 core:28 pu:2"``).
CPU lists are written compactly (``0-27,56-83``).
"""

from __future__ import annotations

import argparse

from pyparbench.cli._common import print_json
from pyparbench.threading.topology import describe, topology, topology_dict

__all__ = ["add_command"]


def _cmd_topology(args: argparse.Namespace) -> int:
    topo = topology(args.topology)
    if args.json:
        print_json(topology_dict(topo))
    else:
        print("\n".join(describe(topo)))
    return 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("topology", help="the topology model of this machine, a file or a "
                                        "synthetic string",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topology", nargs="?", default=None, metavar="FILE|SYNTHETIC",
                   help="an hwloc XML file or an hwloc synthetic string (default: this machine)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_cmd_topology)
