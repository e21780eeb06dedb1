"""The run's summary in a terminal: a rich table that fits 80 columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

__all__ = ["MAX_WIDTH", "print_summary", "summary_renderable", "summary_table"]

MAX_WIDTH = 80


def _speedup_cell(entry: Mapping[str, Any], name: str) -> str:
    v = entry.get("speedup", {}).get(name)
    return "-" if v is None else f"x{v:.2f}"


def summary_table(summary: Mapping[str, Any]) -> Table:
    """Per model and batch: the best setting, its latency, its speed-up over
    each preset and the study's tuner's regret."""
    table = Table(title="best setting found vs the presets (median latency)",
                  title_style="bold", pad_edge=False, expand=False)
    table.add_column("model", no_wrap=True, max_width=14)
    table.add_column("b", justify="right", no_wrap=True)
    table.add_column("best ms", justify="right", no_wrap=True)
    table.add_column("best setting", overflow="fold", ratio=1)
    for name in ("tf", "intel", "tuner"):
        table.add_column(f"x{name}", justify="right", no_wrap=True)
    table.add_column("regret", justify="right", no_wrap=True)
    for m in summary["models"]:
        if m["best"] is None:
            table.add_row(m["model"], str(m["batch"]), "-", Text("failed", style="red"),
                          "-", "-", "-", "-")
            continue
        regret = m.get("regret", {}).get("tftuner")
        setting = m["best"]["short"]
        if m["failed"]:
            setting += f" ({m['failed']} failed)"
        table.add_row(m["model"], str(m["batch"]), f"{m['best']['median_ms']:.3g}", setting,
                      _speedup_cell(m, "tensorflow"), _speedup_cell(m, "intel"),
                      _speedup_cell(m, "tftuner"),
                      "-" if regret is None else f"{100 * regret:.0f}%")
    return table


def summary_renderable(summary: Mapping[str, Any], report: str | None = None) -> Group:
    """The table and the lines under it: what the columns mean, failures,
    the ceilings, and where the report is."""
    parts: list[Any] = [summary_table(summary)]
    parts.append(Text("xP: how many times faster the best setting is than preset P (tf: "
                      "TensorFlow's defaults, intel: Intel's advice, tuner: the study's "
                      "tuner); regret: how much slower the tuner's choice is than the best."))
    busy = summary.get("conditions", {}).get("busy")
    if busy:
        parts.append(Text(busy, style="yellow"))
    peak = summary.get("peak")
    if peak:
        top = peak["points"][-1]
        parts.append(Text(f"ceilings at {top['threads']} threads: {top['fma_gflops']:.0f} "
                          f"GFLOP/s FMA ({peak['isa']}), {top['triad_gbs']:.1f} GB/s triad, "
                          f"{top['gather_gbs']:.1f} GB/s gather"))
    failures = [f for f in summary.get("failures") or [] if f["status"] != "skipped"]
    if failures:
        f = failures[0]
        last = (str(f["error"]).strip().splitlines() or [""])[-1][:120]
        parts.append(Text(f"{len(failures)} configuration(s) failed, e.g. {f['model']} "
                          f"b{f['batch']} {f['setting']}: {last}; the rest are reported "
                          "(report.html lists them all)", style="yellow"))
    skipped = summary["counts"].get("skipped", 0)
    if skipped:
        parts.append(Text(f"{skipped} setting(s) skipped: this machine cannot hold them"))
    if report:
        parts.append(Text(f"report: {report}", style="bold"))
    return Group(*parts)


def print_summary(summary: Mapping[str, Any], console: Console | None = None,
                  report: str | None = None) -> None:
    """Print the summary within ``MAX_WIDTH`` columns (narrower terminals wrap it)."""
    console = console or Console()
    width = min(console.width, MAX_WIDTH)
    console.print(summary_renderable(summary, report), width=width)
