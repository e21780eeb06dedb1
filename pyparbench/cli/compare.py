"""``pyparbench compare A B [C ...]``: results of runs or machines side by side.

Each input is a pyparbench results folder, results.jsonl or summary.json, a
pytest-benchmark JSON file, or a folder of runs of one suite on one machine
(results folders, or pytest-benchmark files, each a process: every row
then tested on its own spread between processes; two or three runs a side
keep same-code comparisons at alpha on a shared 2-core VM). The first is
the baseline; per matched row the command prints both medians, the ratio,
a p-value and a mark when p < alpha, the fingerprint fields in which the
machines differ, and the rows found on one side only. A file that is not a result is one
line on stderr naming it, exit status 2.

``--fail-slower PCT`` (e.g. 5%) makes it a regression gate for CI: exit
status 1 when a row is slower than the baseline by more than PCT and that
is significant after Holm's correction over all the rows (a row that
cannot be tested counts by its ratio alone), 0 otherwise."""

from __future__ import annotations

import argparse

from pyparbench.cli._common import output_file, print_json
from pyparbench.compare import CompareError, compare, judge, print_text, to_json
from pyparbench.compare.html import write_html
from pyparbench.resultfiles import ResultFileError, load, parse_size

__all__ = ["add_command", "max_bytes"]


def _alpha(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--alpha must be a number, got {text!r}") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"--alpha must be between 0 and 1, got {text}")
    return v


def percent(text: str) -> float:
    """An argparse type for ``--fail-slower``: a percentage such as 5% (above 0)."""
    number = text.strip()
    if not number.endswith("%"):
        raise argparse.ArgumentTypeError(
            f"--fail-slower takes a percentage such as 5%, got {text!r}")
    try:
        v = float(number[:-1])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--fail-slower takes a percentage such as 5%, got {text!r}") from None
    if not (0 < v <= 1e6):  # also refuses nan and inf
        raise argparse.ArgumentTypeError(
            f"--fail-slower must be above 0% (and at most 1000000%), got {text!r}")
    return v


def max_bytes(text: str) -> int:
    """An argparse type for ``--max-bytes``: a size such as 256M."""
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--max-bytes: {e}") from None


def _cmd_compare(args: argparse.Namespace) -> int:
    if args.html:
        try:
            output_file(args.html, "--html")  # before the inputs are read
        except ValueError as e:
            raise CompareError(str(e)) from None
    inputs = [load(p, max_bytes=args.max_bytes) for p in args.inputs]
    slower_than = None if args.fail_slower is None else 1.0 + args.fail_slower / 100.0
    result = compare(inputs, alpha=args.alpha, normalize=args.normalize,
                     slower_than=slower_than)
    gate = judge(result) if slower_than is not None else None
    if args.html:
        try:
            write_html(result, args.html, gate)
        except OSError as e:
            raise CompareError(f"cannot write {args.html}: {e.strerror or e}") from None
    if args.json:
        print_json(to_json(result, gate))
    else:
        print_text(result, gate=gate)
        if args.html:
            print(f"page written to {args.html}")
    return 1 if gate is not None and gate.failed else 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compare", help="compare results of runs or machines (ratios, U test)",
                       description=__doc__)
    p.add_argument("inputs", nargs="+", metavar="RESULTS",
                   help="results folders, results.jsonl, summary.json, pytest-benchmark JSON, "
                        "or a folder of runs of one suite (results folders, or "
                        "pytest-benchmark files), read as one input; the first is the "
                        "baseline")
    p.add_argument("--alpha", type=_alpha, default=0.05,
                   help="significance level of the U test (default 0.05)")
    p.add_argument("--normalize", choices=("none", "per-core", "per-peak"), default="none",
                   help="per-core: latency x cores used; per-peak: latency x the machine's "
                        "measured peak GFLOP/s (needs summary.json's peak)")
    p.add_argument("--fail-slower", type=percent, metavar="PCT",
                   help="a regression gate: exit status 1 when a row is slower than the "
                        "baseline by more than PCT (e.g. 5%%), significant after Holm's "
                        "correction over the rows (untestable rows: by their ratio alone)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page")
    p.add_argument("--max-bytes", type=max_bytes, default="256M",
                   help="refuse input files larger than this (default 256M)")
    # Bad input is a file that is not a result, or inputs that cannot be
    # compared as asked; any other exception is a bug, shown with its traceback.
    p.set_defaults(func=_cmd_compare, user_errors=(ResultFileError, CompareError))
