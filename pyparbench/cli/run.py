"""``pyparbench run``: the main job, as a report a person reads.

Measures this machine's ceilings (once per machine, cached in the results
folder), asks the recommender for each model's setting (calibrated on this
machine, cached), then runs a suite (:mod:`pyparbench.suite`: ``--quick``,
the default, or ``--full``): the presets, the recommended setting, a sweep,
the same graphs in TensorFlow, PyTorch and ONNX Runtime when they are
installed, and operator measurements, each in a fresh process, every
result appended to the folder as it finishes (an interrupted run resumes
where it stopped). Then it writes ``summary.json`` and ``report.html``
beside ``results.jsonl`` and prints the best setting per model against the
presets, the tuner's and the recommender's regret, and the frameworks'
overhead, within 80 columns.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyparbench.cli._common import positive_int

if TYPE_CHECKING:
    from rich.console import Console

    from pyparbench.op_bench import OpTask
    from pyparbench.runner import Config
    from pyparbench.settings import Settings
    from pyparbench.suite import SuitePlan

__all__ = ["DEFAULT_OUTPUT", "OPERATORS_FILE", "RECOMMENDATIONS_FILE", "RESULTS_FILE",
           "add_command", "results_paths"]

DEFAULT_OUTPUT = "pyparbench-results"
RESULTS_FILE = "results.jsonl"
OPERATORS_FILE = "operators.jsonl"
# The recommender's settings of a run, kept so that a resumed run measures
# the same ones (a recalibration could otherwise pick another).
RECOMMENDATIONS_FILE = "recommendations.json"


def results_paths(output: str) -> tuple[Path, Path]:
    """(results folder, results.jsonl) for ``-o``: a folder, or a path ending
    in ``.jsonl`` that names the results file itself (the rest goes beside
    it). Absolute, from the user's working directory."""
    p = Path(output).expanduser().absolute()
    return (p.parent, p) if p.suffix == ".jsonl" else (p, p / RESULTS_FILE)


def _level(args: argparse.Namespace) -> str:
    return "quick" if args.quick else "full" if args.full else "default"


def _plan_line(plan: SuitePlan) -> str:
    text = (f"{len(plan.configs)} model configurations and {len(plan.tasks)} operator "
            f"measurements, about {plan.estimate_s / 60:.1f} min estimated")
    if plan.slowdown >= 1.05:  # below that it would print "x1.0"
        text += f" (x{plan.slowdown:.2f}: other processes are using the cores)"
    if plan.dropped:
        text += (f"; {len(plan.dropped)} grid settings left out to fit the "
                 f"{plan.budget_s:.0f} s budget (--full runs them)")
    return text


Recommended = dict[tuple[str, int], tuple["Settings", float | None]]


def _read_recommendations(path: Path) -> Recommended:
    """What an earlier run into this folder recommended ({} if none or unreadable)."""
    from pyparbench.settings import Settings

    try:
        items = json.loads(path.read_text())
        return {(str(i["model"]), int(i["batch"])):
                (Settings.from_dict(i["settings"]), float(i["predicted_ns"]))
                for i in items}
    except (OSError, ValueError, TypeError, KeyError):
        return {}


def _recommend(models: list[str], batches: list[int], console: Console, *, calibrate: bool,
               path: Path, resume: bool) -> tuple[Recommended, float]:
    """The recommender's setting and predicted latency per model and batch,
    and the seconds it took (calibration is cached per machine; without
    ``calibrate``, the analytic model, which gives every shard of a
    sharded suite the same list). A resumed run takes what ``path`` holds
    from the run it resumes. A model the recommender fails on is reported
    and left without one."""
    from pyparbench.models import build
    from pyparbench.recommend import recommend

    known = _read_recommendations(path) if resume else {}
    out: Recommended = {}
    started = time.perf_counter()
    pairs = [(m, b) for m in models for b in batches]
    with console.status("") as status:
        for i, (m, b) in enumerate(pairs, 1):
            if (m, b) in known:
                out[(m, b)] = known[(m, b)]
                continue
            status.update(f"recommender: calibrating and simulating {m} b{b} ({i}/{len(pairs)})")
            try:
                rec = recommend(build(m, b), calibrate=calibrate)
            except (RuntimeError, ValueError, OSError) as e:
                console.print(f"[yellow]recommender: no setting for {m} b{b}: {e}[/]")
                continue
            out[(m, b)] = (rec.settings, rec.predicted.latency_ns)
    keep = {**known, **out}
    path.write_text(json.dumps([{"model": m, "batch": b, "settings": s.as_dict(),
                                 "predicted_ns": p} for (m, b), (s, p) in keep.items()],
                               indent=1))
    return out, time.perf_counter() - started


def _run_plan(plan: SuitePlan, out: Path, results: Path, peak: Any, args: argparse.Namespace,
              console: Console) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run every configuration and operator task of the plan under a progress
    bar whose units are estimated seconds, so its ETA weighs each item."""
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from pyparbench.op_bench import run_op_tasks
    from pyparbench.results import ResultStore
    from pyparbench.runner import run_configs

    records: list[dict[str, Any]] = []
    op_records: list[dict[str, Any]] = []
    items = len(plan.configs) + len(plan.tasks)
    columns = (TextColumn("{task.fields[n]:>4}/{task.fields[of]}"), BarColumn(bar_width=20),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
               TextColumn("{task.description}"))
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("starting", total=plan.estimate_s, n=0, of=items)
        done = [0]
        weights = dict(zip((c.key for c in plan.configs), plan.config_s, strict=True))
        weights.update(zip((t.key for t in plan.tasks), plan.task_s, strict=True))

        def step(key: str, what: str, record: dict[str, Any] | None) -> None:
            done[0] += 1
            status = "done before" if record is None else record["status"]
            progress.update(bar, advance=weights[key], n=done[0],
                            description=f"{what[:38]}: {status}")

        def on_config(config: Config, record: dict[str, Any] | None) -> None:
            step(config.key, config.what, record)

        def on_task(task: OpTask, record: dict[str, Any] | None) -> None:
            step(task.key, task.label, record)

        resume = not args.no_resume
        records += run_configs(plan.configs, ResultStore(results), resume=resume,
                               retry_failed=args.retry_failed, on_result=on_config)
        op_records += run_op_tasks(plan.tasks, ResultStore(out / OPERATORS_FILE), peak,
                                   resume=resume, retry_failed=args.retry_failed,
                                   on_result=on_task)
    return records, op_records


def _confirm(records: list[dict[str, Any]], rounds: int, budget_s: float | None, peak: Any,
             results: Path, args: argparse.Namespace, console: Console) -> list[dict[str, Any]]:
    """Confirmation rounds (:mod:`pyparbench.confirm`): up to PASSES passes,
    each fitted to what is left of ``budget_s`` (None: no limit); returns
    the new records."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from pyparbench.confirm import PASSES, confirmations
    from pyparbench.models import build
    from pyparbench.results import ResultStore
    from pyparbench.runner import run_configs
    from pyparbench.suite import estimate_config_s

    added: list[dict[str, Any]] = []
    left = budget_s
    for depth in range(1, PASSES + 1):
        todo = confirmations(records + added, rounds, depth=depth)
        est = [estimate_config_s(c, build(c.model, c.batch), peak) for c in todo]
        if left is not None:
            fits, total = [], 0.0
            for c, e in zip(todo, est, strict=True):
                if total + e <= left:
                    fits.append(c)
                    total += e
            todo, est = fits, [e for c, e in zip(todo, est, strict=True) if c in fits]
        if not todo:
            break
        rows = len({(c.model, c.batch) for c in todo})
        console.print(f"confirming: {len(todo)} more processes of the settings the regret of "
                      f"{rows} model configuration(s) rests on", width=min(console.width, 80))
        columns = (TextColumn("{task.fields[n]:>4}/{task.fields[of]}"), BarColumn(bar_width=20),
                   TimeElapsedColumn(), TextColumn("{task.description}"))
        started = time.perf_counter()
        with Progress(*columns, console=console, transient=False) as progress:
            bar = progress.add_task("", total=sum(est), n=0, of=len(todo))
            weights = {c.key: e for c, e in zip(todo, est, strict=True)}
            done = [0]

            def on_config(config: Config, record: dict[str, Any] | None) -> None:
                done[0] += 1
                status = "done before" if record is None else record["status"]
                progress.update(bar, advance=weights[config.key], n=done[0],
                                description=f"{config.what[:38]}: {status}")

            added += run_configs(todo, ResultStore(results), resume=not args.no_resume,
                                 retry_failed=args.retry_failed, on_result=on_config)
        if left is not None:
            left -= time.perf_counter() - started
    return added


def _cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pyparbench.models import MODELS
    from pyparbench.peak import load_or_measure
    from pyparbench.report import write_report
    from pyparbench.report.summary import busy_note
    from pyparbench.report.terminal import print_summary
    from pyparbench.shards import apply_shard, resolve_shard
    from pyparbench.suite import (
        BATCHES,
        BUDGET_S,
        CONFIRM_ROUNDS,
        CONFIRM_SHARE,
        FRAMEWORK_RUNS,
        busy_slowdown,
        installed_frameworks,
        level_models,
        plan_suite,
    )

    started = time.perf_counter()
    # Before this job adds its own load: were other processes using the cores?
    cpus = len(os.sched_getaffinity(0))
    # What other processes use now (a second's sample), not the 1-minute load
    # average, which after a build still counts the build.
    from pyparbench.cpuload import busy_cpus

    load = busy_cpus(1.0)
    conditions = {"busy_cpus_start": load, "loadavg_start": os.getloadavg()[0], "cpus": cpus,
                  "busy": busy_note(load, cpus)}
    level = _level(args)
    unknown = [m for m in args.models or () if m not in MODELS]
    if unknown:
        raise ValueError(f"unknown model(s) {unknown}; valid names: {', '.join(MODELS)}")
    shard = resolve_shard(args.shard)  # a bad one is refused before anything runs
    # Absolute before any child starts: children run in another directory.
    out, results = results_paths(args.output)
    out.mkdir(parents=True, exist_ok=True)
    console = Console()
    console.print(f"pyparbench run ({level}) into {out}", width=min(console.width, 80))
    with console.status("measuring this machine's ceilings (pyparbench peak)"):
        peak, cached = load_or_measure(out, quick=level == "quick")
    top = peak.points[-1]
    console.print(f"ceilings {'(cached)' if cached else f'({peak.seconds:.1f} s)'}: "
                  f"{top.fma_gflops:.0f} GFLOP/s FMA {peak.isa} at {top.threads} threads, "
                  f"{top.triad_gbs:.1f} GB/s triad, {top.gather_gbs:.1f} GB/s gather",
                  width=min(console.width, 80))
    models = list(args.models or level_models(level))
    batches = list(args.batches or BATCHES[level])
    recommended, rec_s = (({}, 0.0) if args.no_recommend else
                          _recommend(models, batches, console, calibrate=shard is None,
                                     path=out / RECOMMENDATIONS_FILE, resume=not args.no_resume))
    if recommended:
        console.print(f"recommender: a setting for {len(recommended)} model configurations "
                      f"({rec_s:.0f} s)", width=min(console.width, 80))
    frameworks: tuple[tuple[str, str], ...] = ()
    if not args.no_frameworks:
        have = installed_frameworks()
        frameworks = tuple((f, m) for f, m in FRAMEWORK_RUNS if f in have)
        if len(have) < len({f for f, _ in FRAMEWORK_RUNS}):
            lacking = sorted({f for f, _ in FRAMEWORK_RUNS} - set(have))
            console.print(f"frameworks not installed, not compared: {', '.join(lacking)} "
                          "(pip install 'pyparbench[frameworks]')", width=min(console.width, 80))
    # Every shard must build the same list, so a sharded suite is not fitted
    # to a budget (which depends on this job's measured ceilings); the
    # machine-level operator measurements go to shard 0. The time the
    # recommender took comes out of the level's budget.
    budget = BUDGET_S[level]
    confirm = CONFIRM_ROUNDS[level] if args.confirm is None else args.confirm
    reserve = None
    if budget is not None:
        budget = max(0.5 * budget, budget - rec_s)
        if confirm and recommended:
            # Kept for the confirmation rounds; what they leave is not used.
            reserve = CONFIRM_SHARE * budget
            budget -= reserve
    plan = plan_suite(level, models, batches, repeats=args.repeats, peak=peak,
                      operators=not args.no_operators and (shard is None or shard.index == 0),
                      slowdown=busy_slowdown(load, cpus, peak.points[-1].threads),
                      budget_s=None if shard is not None else budget,
                      recommended=recommended, frameworks=frameworks)
    if shard is not None:
        chosen = apply_shard(plan.configs, args.shard, results, log=console.print)
        plan.config_s = [s for c, s in zip(plan.configs, plan.config_s, strict=True)
                         if c in chosen]
        plan.configs = chosen
    console.print(_plan_line(plan), width=min(console.width, 80))
    records, op_records = _run_plan(plan, out, results, peak, args, console)
    if confirm and shard is None and recommended:
        records += _confirm(records, confirm, reserve, peak, results, args, console)
    summary, page = write_report(out, records, op_records, peak, conditions)
    print_summary(summary, console)
    failed = sum(1 for r in records + op_records if r.get("status") in ("error", "timeout"))
    console.print(f"{len(records)} results in {results}, summary in "
                  f"{out / 'summary.json'}; {time.perf_counter() - started:.0f} s",
                  width=min(console.width, 80), soft_wrap=True)
    console.print(f"report: {page}", soft_wrap=True, style="bold")
    return 1 if failed else 0


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
    p.add_argument("--confirm", type=int, default=None, metavar="N",
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
    p.set_defaults(func=_cmd_run)
