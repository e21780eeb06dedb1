"""``pyparbench merge DIR... -o DIR``: join shards' (and identical nodes')
results folders into one machine's results folder: the records
deduplicated by configuration, in the suite's order, the operator
measurements and every host's ceilings, then the report (summary.json,
report.html, the summary tables), refusing to mix machines or CPU
allotments unless --force (recorded in merge.json and the report)."""

from __future__ import annotations

import argparse

from pyparbench.cli._common import output_folder
from pyparbench.cli.compare import max_bytes
from pyparbench.cli.report import show_report
from pyparbench.harness.merge import merge

__all__ = ["add_command"]


def _cmd_merge(args: argparse.Namespace) -> int:
    output_folder(args.output, "-o")
    report = merge(args.inputs, args.output, max_bytes=args.max_bytes, force=args.force)
    dup = f" ({report.duplicates} duplicate(s) dropped)" if report.duplicates else ""
    show_report(report.summary, report.report,
                [*report.warnings, *(f"merged with --force: {f}" for f in report.forced)],
                f"{report.records} results and {report.op_records} operator measurements from "
                f"{len(report.inputs)} input(s) in {report.output}{dup}")
    return 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("merge", help="join shards' results folders into one",
                       description=__doc__)
    p.add_argument("inputs", nargs="+", metavar="RESULTS",
                   help="results folders (or results.jsonl files) of one machine type")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder for the merged results and report")
    p.add_argument("--max-bytes", type=max_bytes, default="256M",
                   help="refuse input files larger than this (default 256M)")
    p.add_argument("--force", action="store_true",
                   help="merge records of different machines or CPU allotments (tasks given "
                        "different numbers of CPUs) all the same; recorded in merge.json and "
                        "the report")
    p.set_defaults(func=_cmd_merge)
