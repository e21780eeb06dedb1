"""``pyparbench run``: the default suite (or a chosen part of it), each
configuration in a fresh process, results appended to a JSONL file as they
finish; then, per model and batch, the best setting found against the
presets (TensorFlow's defaults, Intel's advice, the study's tuner)."""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import Any

from pyparbench.cli._common import positive_int
from pyparbench.names import PRESETS
from pyparbench.settings import Settings

__all__ = ["add_command", "summarize_records"]


def summarize_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, batch): the fastest configuration and each preset's median
    time, with the speed-up of the fastest over each preset."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("status") == "ok":
            groups[(r["config"]["model"], r["config"]["batch"])].append(r)
    rows = []
    for (model, batch), rs in groups.items():
        best = min(rs, key=lambda r: r["summary"]["median"])
        row: dict[str, Any] = {"model": model, "batch": batch,
                               "best_ms": best["summary"]["median"] / 1e6,
                               "best": Settings.from_dict(best["config"]["settings"]).label()}
        for name in PRESETS:
            p = [r for r in rs if r["config"]["settings"].get("name") == name]
            if p:
                t = p[0]["summary"]["median"]
                row[f"{name}_ms"] = t / 1e6
                row[f"best_vs_{name}"] = t / best["summary"]["median"]
        rows.append(row)
    return rows


def _print_summary(rows: list[dict[str, Any]], failed: int, skipped: int) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="best setting found vs the presets (median latency)")
    for col in ("model", "batch", "best ms", "best setting", "vs tf", "vs intel",
                "vs tuner"):
        table.add_column(col, justify="left" if col in ("model", "best setting") else "right",
                         no_wrap=col != "best setting")

    def preset_cell(row: dict[str, Any], name: str) -> str:
        key = f"best_vs_{name}"
        return f"x{row[key]:.2f}" if key in row else "-"

    for r in rows:
        table.add_row(r["model"], str(r["batch"]), f"{r['best_ms']:.3g}", r["best"],
                      preset_cell(r, "tensorflow"), preset_cell(r, "intel"),
                      preset_cell(r, "tftuner"))
    console = Console()
    console.print(table)
    console.print("vs P: how many times faster the best setting is than preset P "
                  "(tf: TensorFlow's defaults, intel: Intel's advice, tuner: the study's).")
    if failed:
        console.print(f"[yellow]{failed} configuration(s) failed; see the JSONL file "
                      "('status': 'error' or 'timeout').[/yellow]")
    if skipped:
        console.print(f"{skipped} configuration(s) skipped: settings this machine cannot "
                      "hold ('status': 'skipped').")


def _cmd_run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from pyparbench.models import MODELS
    from pyparbench.runner import Config, ResultStore, run_configs
    from pyparbench.shards import apply_shard
    from pyparbench.suite import DEFAULT_BATCHES, DEFAULT_MODELS, default_suite

    models = args.models or list(DEFAULT_MODELS)
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise ValueError(f"unknown model(s) {unknown}; valid names: {', '.join(MODELS)}")
    batches = args.batches or list(DEFAULT_BATCHES)
    configs = default_suite(models, batches, repeats=args.repeats)
    configs = apply_shard(configs, args.shard, args.output)
    store = ResultStore(args.output)
    records = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), transient=False) as progress:
        task = progress.add_task("running", total=len(configs))

        def advance(config: Config, record: dict[str, Any] | None) -> None:
            what = "skipped (done)" if record is None else record["status"]
            progress.update(task, advance=1,
                            description=f"{config.model} b{config.batch} "
                                        f"{config.settings.label()}: {what}")

        for record in run_configs(configs, store, resume=not args.no_resume,
                                  retry_failed=args.retry_failed, on_result=advance):
            records.append(record)
    failed = sum(1 for r in records if r.get("status") in ("error", "timeout"))
    skipped = sum(1 for r in records if r.get("status") == "skipped")
    _print_summary(summarize_records(records), failed, skipped)
    print(f"{len(records)} results in {store.path}")
    return 1 if failed else 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run the default suite (presets and a sweep) and compare",
                       description=__doc__)
    p.add_argument("--models", nargs="+", help="models (default: a few of each kind)")
    p.add_argument("--batches", nargs="+", type=positive_int("--batches"),
                   help="batch sizes (default: 1 8)")
    p.add_argument("--repeats", type=positive_int("--repeats"), default=5,
                   help="timed runs per configuration")
    p.add_argument("-o", "--output", default="pyparbench-results.jsonl",
                   help="JSONL results file; finished configurations in it are skipped")
    p.add_argument("--no-resume", action="store_true", help="run everything again")
    p.add_argument("--retry-failed", action="store_true", help="run failed ones again")
    p.add_argument("--shard", metavar="K/N",
                   help="run configurations K, K+N, K+2N, ... only (K from 0; default: "
                        "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT in a Slurm array)")
    p.set_defaults(func=_cmd_run)
