"""``pyparbench run``: the main job, as a report a person reads.

Measures this machine's ceilings (once per machine, cached in the results
folder), asks the recommender for each model's setting (calibrated on this
machine, cached), then runs a suite (``--quick``, the default, or
``--full``): the presets, the recommended setting, a sweep, the same graphs
in TensorFlow, PyTorch and ONNX Runtime when they are installed, and
operator measurements, each in a fresh process, every result appended to
the folder as it finishes (an interrupted run resumes where it stopped).
Then it writes ``summary.json`` and ``report.html`` beside
``results.jsonl`` and prints the best setting per model against the
presets, the tuner's and the recommender's regret, and the frameworks'
overhead, within 80 columns.
"""

from __future__ import annotations

import argparse

from pyparbench.cli._common import (
    PRECISION_HELP,
    add_precision_arg,
    add_shape_arg,
    non_negative_int,
    output_folder,
    positive_int,
    print_json,
    shapes_from_args,
)
from pyparbench.harness.job import (
    DEFAULT_OUTPUT,
    JobOptions,
    dry_run,
    results_paths,
    run_main_job,
)
from pyparbench.harness.levels import resolve_level
from pyparbench.harness.ui import ConsoleUI

__all__ = ["add_command", "options_from_args"]


def options_from_args(args: argparse.Namespace) -> JobOptions:
    """The main job's options from the command line (the level resolved once).

    Raises
    ------
    ValueError
        An unknown model (naming it and the valid ones).
    """
    name = "quick" if args.quick else "full" if args.full else "default"
    level = resolve_level(name, models=args.models, batches=args.batches,
                          repeats=args.repeats, confirm_rounds=args.confirm,
                          shapes=shapes_from_args(args), precision=args.precision)
    frameworks = not args.no_frameworks
    return JobOptions(level, output=args.output, operators=not args.no_operators,
                      recommend=not args.no_recommend, frameworks=frameworks,
                      resume=not args.no_resume, retry_failed=args.retry_failed,
                      shard=args.shard)


def _cmd_run(args: argparse.Namespace) -> int:
    if not args.dry_run:
        for option, given in (("--topology", args.topology is not None), ("--json", args.json)):
            if given:
                raise ValueError(f"{option} is for --dry-run: a run measures this machine")
        options = options_from_args(args)
        output_folder(results_paths(args.output)[0], "-o")  # before anything is measured
        return run_main_job(options)
    plan = dry_run(options_from_args(args), topology=args.topology)
    if args.json:
        print_json(plan)
    else:
        ConsoleUI().plan(plan)
    return 0


def add_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run [--quick | --full] [-o DIR] [--models ...] [--batches ...]``."""
    p = subparsers.add_parser("run", help="the main job: presets, a sweep, operators and "
                              "ceilings, into a report", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="a smaller suite: about 2 minutes on 2 cores")
    size.add_argument("--full", action="store_true",
                      help="everything: every model, batch and knob (no time budget)")
    p.add_argument("-o", "--output", default=DEFAULT_OUTPUT,
                   help=f"results folder (default: {DEFAULT_OUTPUT}/): results.jsonl, "
                        "operators.jsonl, summary.json, report.html; finished "
                        "measurements in it are not redone. A path ending in .jsonl names "
                        "the results file, the rest goes beside it")
    p.add_argument("--models", nargs="+", help="models (default: the level's)")
    add_precision_arg(p, PRECISION_HELP + "; the native runs' (presets, grid, recommended), "
                      "with the frameworks at bf16 (at int8 they are refused: none has a "
                      "translation of the int8 graphs)")
    add_shape_arg(p)
    p.add_argument("--batches", nargs="+", type=positive_int("--batches"),
                   help="batch sizes (default: the level's: quick 1; default 1 8; full 1 8 32)")
    p.add_argument("--repeats", type=positive_int("--repeats"), default=None,
                   help="timed runs per configuration (default: quick 3, default 5, full 10)")
    p.add_argument("--no-operators", action="store_true",
                   help="model configurations only: no operator scaling or roofline points")
    p.add_argument("--no-recommend", action="store_true",
                   help="leave out the recommender's setting (and its calibration)")
    p.add_argument("--no-frameworks", action="store_true",
                   help="leave out the TensorFlow, PyTorch and ONNX Runtime runs")
    p.add_argument("--confirm", type=non_negative_int("--confirm"), default=None, metavar="N",
                   help="confirmation rounds: the settings a regret rests on (the "
                        "recommended one, the best measured, the tuner's when it beat ours) "
                        "measured N more times each, in fresh processes, where the "
                        "recommendation is more than 3%% off (default: quick 1, default 2, "
                        "full 2; 0: none)")
    p.add_argument("--no-resume", action="store_true", help="measure everything again")
    p.add_argument("--retry-failed", action="store_true", help="run failed ones again")
    p.add_argument("--shard", metavar="K/N",
                   help="run configurations K, K+N, K+2N, ... only (K from 0; default: "
                        "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT in a Slurm array); "
                        "no time budget, operator measurements in shard 0")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan without measuring: each configuration with its "
                        "estimated seconds, what the budget leaves out, the total")
    p.add_argument("--topology", metavar="FILE|SYNTHETIC",
                   help="with --dry-run: plan another machine, given as an hwloc XML file "
                        "(`lstopo --of xml > box.xml` there) or an hwloc synthetic "
                        "description such as 'package:2 core:28 pu:2' (estimates from the "
                        "analytic cost model's per-core figures)")
    p.add_argument("--json", action="store_true", help="with --dry-run: the plan as JSON")
    p.set_defaults(func=_cmd_run)
