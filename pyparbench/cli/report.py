"""``pyparbench report DIR``: rebuild a results folder's ``summary.json`` and
``report.html`` from its records and print the summary tables, whatever made
the folder: a complete main job, an interrupted one, a merge of shards, or
another machine's run (copied here). Every host whose records it holds is
listed, each operator measurement on its own host's ceilings. A file of the
folder that is not what its name says is one line on stderr naming it, exit
status 2."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyparbench.cli.compare import max_bytes
from pyparbench.harness.folder import read_folder, write_folder_report
from pyparbench.harness.ui import ConsoleUI
from pyparbench.resultfiles import ResultFileError

__all__ = ["add_command", "show_report"]


def show_report(summary: dict[str, Any], page: Path | None, warnings: Sequence[str],
                done: str) -> None:
    """What ``report`` and ``merge`` print: the warnings (on stderr), the
    summary tables, what was read, and where the report is."""
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    ui = ConsoleUI()
    ui.summary(summary)
    ui.say(done, wrap=False)
    ui.say(f"report: {page}", style="bold", wrap=False)


def _cmd_report(args: argparse.Namespace) -> int:
    folder = read_folder(args.folder, max_bytes=args.max_bytes)
    if not os.access(folder.path, os.W_OK | os.X_OK):
        raise ResultFileError(folder.path, "the folder cannot be written (summary.json and "
                                           "report.html go into it)")
    summary, page = write_folder_report(folder)
    show_report(summary, page, folder.warnings,
                f"{len(folder.records)} results and {len(folder.op_records)} operator "
                f"measurements from {folder.path}; summary in {folder.path / 'summary.json'}")
    return 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="rebuild a results folder's summary and report",
                       description=__doc__)
    p.add_argument("folder", metavar="DIR",
                   help="a results folder (or its results.jsonl)")
    p.add_argument("--max-bytes", type=max_bytes, default="256M",
                   help="refuse input files larger than this (default 256M)")
    # Bad input is a file that is not what its name says; any other exception
    # is a bug, shown with its traceback.
    p.set_defaults(func=_cmd_report, user_errors=(ResultFileError,))
