"""``pyparbench merge DIR... -o DIR``: join shards' (and identical nodes')
results folders into one machine's results folder: deduplicated by
configuration, in the suite's order, refusing to mix machines."""

from __future__ import annotations

import argparse
import sys

from pyparbench.cli.compare import max_bytes

__all__ = ["add_command"]


def _cmd_merge(args: argparse.Namespace) -> int:
    from pyparbench.merge import merge

    report = merge(args.inputs, args.output, max_bytes=args.max_bytes)
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    dup = f" ({report.duplicates} duplicate(s) dropped)" if report.duplicates else ""
    print(f"{report.records} results from {len(report.inputs)} input(s) in {report.output}{dup}")
    return 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("merge", help="join shards' results folders into one",
                       description=__doc__)
    p.add_argument("inputs", nargs="+", metavar="RESULTS",
                   help="results folders (or results.jsonl files) of one machine type")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder for the merged results.jsonl")
    p.add_argument("--max-bytes", type=max_bytes, default="256M",
                   help="refuse input files larger than this (default 256M)")
    p.set_defaults(func=_cmd_merge)
