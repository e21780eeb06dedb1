"""The run's summary in a terminal: a rich table that fits 80 columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from pyparbench.frameworks.precision import UNSUPPORTED_AT
from pyparbench.frameworks.spec import NO_MODULE
from pyparbench.report.legend import SettingsLegend, framework_label
from pyparbench.report.summary import model_tag, regret_unsure

__all__ = ["MAX_WIDTH", "generation_tables", "overhead_tables", "print_summary",
           "summary_renderable", "summary_table"]

MAX_WIDTH = 80
# A rule under the heading only, and one space between columns: vertical
# rules and double padding would cost the narrow columns room; the best
# setting is a key, its settings in the legend under the table.
BOX = box.SIMPLE_HEAD


def _speedup_cell(entry: Mapping[str, Any], name: str) -> str:
    v = entry.get("speedup", {}).get(name)
    if v is None:
        return "-"
    return f"x{v:.2f}" if v < 10 else f"x{v:.1f}" if v < 100 else f"x{v:.0f}"


def _pct(v: float | None, unsure: bool = False) -> str:
    if v is None:
        return "-"
    return (">999%" if v > 9.99 else f"{100 * v:.0f}%") + ("?" if unsure else "")


# The model column's width in the summary tables.
_MODEL_WIDTH = 14


def _clipped(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, an ellipsis where cut."""
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def summary_table(summary: Mapping[str, Any], legend: SettingsLegend | None = None) -> Table:
    """Per model and batch: the best setting, its latency, its speed-up over
    each preset, and the regret of the study's tuner and of the recommender.
    The best setting is shown by a key (the name it ran under, or a number),
    its settings in ``legend``."""
    legend = legend if legend is not None else SettingsLegend()
    table = Table(title="best setting found vs the presets (median latency)",
                  title_style="bold", pad_edge=False, expand=True, box=BOX,
                  collapse_padding=True)
    # A precision other than fp32 follows the model's name, which gives way
    # to it where the column is short.
    other = any(m.get("precision", "fp32") != "fp32" for m in summary["models"])
    table.add_column("model", no_wrap=True, max_width=_MODEL_WIDTH + 5 * other)
    table.add_column("b", justify="right", no_wrap=True)
    table.add_column("best ms", justify="right", no_wrap=True)
    table.add_column("best", overflow="fold", ratio=1)
    for name in ("tf", "intel", "tuner"):
        table.add_column(f"x{name}", justify="right", no_wrap=True)
    table.add_column("tuner", justify="right", no_wrap=True)
    table.add_column("ours", justify="right", no_wrap=True)
    for m in summary["models"]:
        precision = m.get("precision", "fp32")
        model = (m["model"] if precision == "fp32" else
                 f"{_clipped(m['model'], _MODEL_WIDTH - len(precision) + 4)} {precision}")
        if m["best"] is None:
            table.add_row(model, str(m["batch"]), "-", Text("failed", style="red"),
                          "-", "-", "-", "-", "-")
            continue
        regret = m.get("regret", {})
        names, sep, full = m["best"]["label"].partition(": ")
        if not sep or " " in names:  # no name: the label is the setting
            names, full = "", m["best"]["label"]
        setting = legend.key(full, _column_names(names), model_tag(m))
        if m["failed"]:
            setting += f" ({m['failed']} failed)"
        table.add_row(model, str(m["batch"]), f"{m['best']['median_ms']:.3g}", setting,
                      _speedup_cell(m, "tensorflow"), _speedup_cell(m, "intel"),
                      _speedup_cell(m, "tftuner"),
                      _pct(regret.get("tftuner"), regret_unsure(m, "tftuner")),
                      _pct(regret.get("recommended"), regret_unsure(m, "recommended")))
    return table


_COLUMN_NAMES = {"recommended": "ours", "tftuner": "tuner", "tensorflow": "tf"}
# The frameworks table's headers: five frameworks' runs fit 80 columns.
_FRAMEWORK_COLUMNS = {"tensorflow": "tf", "onnxruntime": "ort", "openvino": "ov"}


def _column_names(names: str) -> str:
    """The names a setting ran under as the columns call them
    ("recommended/tftuner" -> "ours/tuner")."""
    return "/".join(_COLUMN_NAMES.get(n, n) for n in names.split("/")) if names else ""


def overhead_tables(summary: Mapping[str, Any]) -> list[Table]:
    """Per model and batch, each framework run's latency over the native
    executor's under the same setting: one table per precision, fp32 first
    (an item without a precision is fp32); none where no framework ran."""
    by_precision: dict[str, list[Mapping[str, Any]]] = {}
    for i in summary.get("framework_overhead") or []:
        by_precision.setdefault(i.get("precision", "fp32"), []).append(i)
    order = sorted(by_precision, key=lambda p: (p != "fp32", p))
    return [_overhead_table(by_precision[p], p) for p in order]


def _overhead_table(items: Sequence[Mapping[str, Any]], precision: str) -> Table:
    runs = list(dict.fromkeys(framework_label(i) for i in items))
    title = "each framework's latency / pyparbench's (same graph and setting)"
    table = Table(title=title if precision == "fp32" else f"{title} at {precision}",
                  title_style="bold", pad_edge=False, expand=False, box=BOX,
                  collapse_padding=True)
    table.add_column("model", no_wrap=True, max_width=14)
    table.add_column("b", justify="right", no_wrap=True)
    table.add_column("native ms", justify="right", no_wrap=True)
    for r in runs:
        name, _, mode = r.partition(" (")
        table.add_column(_FRAMEWORK_COLUMNS.get(name, name) + (f"\n({mode}" if mode else ""),
                         justify="right", no_wrap=True)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for i in items:
        row = rows.setdefault((i["model"], i["batch"]), {"native": i["native_ms"]})
        row[framework_label(i)] = i["framework_ms"] / i["native_ms"] if i["native_ms"] else None
    for (model, batch), row in rows.items():
        table.add_row(model, str(batch), f"{row['native']:.3g}",
                      *[f"x{row[r]:.2f}" if row.get(r) is not None else "-" for r in runs])
    return table


def presets_table(summary: Mapping[str, Any]) -> Table | None:
    """Per model, batch and framework run, the framework under each of its
    own presets over the same framework under the setting it shares with
    the native executor (None: no framework ran under a preset)."""
    items = summary.get("framework_presets") or []
    if not items:
        return None
    presets = list(dict.fromkeys(i["preset"] for i in items))
    table = Table(title="a framework's own tuner: under its presets / under the shared setting",
                  title_style="bold", pad_edge=False, expand=False, box=BOX,
                  collapse_padding=True)
    table.add_column("model", no_wrap=True, max_width=14)
    table.add_column("b", justify="right", no_wrap=True)
    table.add_column("run", no_wrap=True)
    table.add_column("shared ms", justify="right", no_wrap=True)
    for p in presets:
        table.add_column(p.replace("-", "\n"), justify="right", no_wrap=True)
    rows: dict[tuple[str, int, str], dict[str, Any]] = {}
    for i in items:
        row = rows.setdefault((i["model"], i["batch"], framework_label(i)), {})
        row[""] = i["setting_ms"]
        row[i["preset"]] = _preset_cell(i)
    for (model, batch, run), row in rows.items():
        name, _, mode = run.partition(" (")
        run = _FRAMEWORK_COLUMNS.get(name, name) + (f" ({mode}" if mode else "")
        shared = f"{row['']:.3g}" if row[""] is not None else "-"
        table.add_row(model, str(batch), run, shared, *[row.get(p, "-") for p in presets])
    return table


def _preset_cell(item: Mapping[str, Any]) -> str:
    """'x1.25 2s1t': the ratio, and the streams and threads per stream the
    tuner chose (as far as the framework reports them)."""
    ratio = f"x{item['ratio']:.2f}" if item["ratio"] is not None else f"{item['ms']:.3g}ms"
    compiled = item.get("compiled") or {}
    streams, threads = compiled.get("NUM_STREAMS"), compiled.get("INFERENCE_NUM_THREADS")
    if isinstance(streams, int) and isinstance(threads, int) and streams > 0:
        return f"{ratio} {streams}s{max(1, threads // streams)}t"
    return ratio


_GENERATION_NAMES = {"native": "native", "llamacpp": "llama.cpp", "torch": "PyTorch",
                     "onnxruntime": "ONNX Runtime"}


def generation_tables(summary: Mapping[str, Any]) -> list[Table]:
    """Per decoder generation task, a row per runtime and thread count:
    prefill and decode tokens/s, time to first token and per output token
    (rows, not a column pair per runtime: four runtimes fit 80 columns)."""
    tables = []
    for g in (summary.get("operators") or {}).get("generation") or []:
        batch = f"{g['batch']} x " if g["batch"] != 1 else ""
        table = Table(title=f"Generation ({g['model']}, {batch}prompt {g['prompt']} + "
                            f"{g['new']} new)", title_style="bold", pad_edge=False,
                      expand=False, box=BOX, collapse_padding=True)
        table.add_column("runtime", no_wrap=True)
        for col in ("threads", "prefill tok/s", "decode tok/s", "TTFT ms", "TPOT ms"):
            table.add_column(col, justify="right", no_wrap=True)
        cells = {(p["framework"], p["threads"]): p for p in g["points"]}
        for f in g["frameworks"]:
            for t in sorted(t for (framework, t) in cells if framework == f):
                p = cells[(f, t)]
                table.add_row(_GENERATION_NAMES.get(f, f), str(t),
                              f"{p['prefill_tokens_per_s']:.0f}", f"{p['tokens_per_s']:.0f}",
                              f"{p['ttft_ms']:.3g}", f"{p['tpot_ms']:.3g}")
        tables.append(table)
    return tables


def agreement_lines(summary: Mapping[str, Any]) -> list[str]:
    """Per user's file and batch, how far the native outputs are from ONNX
    Runtime's running the file itself (the worst over its settings)."""
    worst: dict[tuple[str, int], float | str] = {}
    for i in summary.get("framework_overhead") or []:
        if "output_error" not in i:
            continue
        key = (i["model"], i["batch"])
        err = i["output_error"]
        if err is None:
            worst.setdefault(key, str(i.get("output_error_note") or "not measured"))
        elif not isinstance(worst.get(key), float) or err > worst[key]:
            worst[key] = float(err)
    return [f"outputs of {m} b{b} against ONNX Runtime running the file: "
            + (f"max |native - ORT| / max |ORT| = {e:.1e}" if isinstance(e, float)
               else f"not compared ({e})") for (m, b), e in worst.items()]


def summary_renderable(summary: Mapping[str, Any], report: str | None = None) -> Group:
    """The table and the lines under it: what the columns mean, failures,
    the ceilings, and where the report is."""
    legend = SettingsLegend()
    parts: list[Any] = [summary_table(summary, legend)]
    parts.append(Text("best: the best setting, by the name it ran under or a number:"))
    parts += [Text("  " + line) for line in legend.lines()]
    parts.append(Text("xP: how many times faster the best setting is than preset P (tf: "
                      "TensorFlow's defaults, intel: Intel's advice, tuner: the study's "
                      "tuner); tuner, ours: how much slower the study's tuner's choice and "
                      "the recommender's (ours) are than the best measured (their regret); "
                      "?: its 95 % interval over processes includes 0 (report.html gives "
                      "the intervals). A setting run under several names, or again in "
                      "confirmation rounds, counts once: the median over its rounds."))
    frameworks = overhead_tables(summary)
    if frameworks:
        parts += frameworks
        parts.append(Text("xN: the framework's median latency over the native executor's "
                          "(above 1: the framework is slower; pyparbench overhead MODEL "
                          "splits it per op type). tf: TensorFlow, ort: ONNX Runtime, "
                          "ov: OpenVINO."))
        parts += [Text(line) for line in agreement_lines(summary)]
    hints = presets_table(summary)
    if hints is not None:
        parts.append(hints)
        parts.append(Text("xN: the run under the framework's own preset over the same run "
                          "under the setting it shares with the native executor (above 1: "
                          "the shared setting is faster); NsMt: the streams and threads per "
                          "stream its tuner chose, on every CPU."))
    generation = generation_tables(summary)
    if generation:
        parts += generation
        parts.append(Text("prefill: the prompt's tokens per second of the time to first "
                          "token; decode: tokens per second of the median token step after "
                          "it (report.html: TTFT, TPOT, bytes and GB/s per token)."))
    busy = summary.get("conditions", {}).get("busy")
    if busy:
        parts.append(Text(busy, style="yellow"))
    hosts = summary.get("hosts") or []
    if len(hosts) > 1:
        parts.append(Text(f"{len(hosts)} hosts: " + "; ".join(
            f"{h['host']} (CPUs {','.join(map(str, h['cpus_allowed'] or []))})"
            for h in hosts)))
    peak = summary.get("peak")
    if peak:
        top = peak["points"][-1]
        parts.append(Text(f"ceilings at {top['threads']} threads: {top['fma_gflops']:.0f} "
                          f"GFLOP/s FMA ({peak['isa']}), {top['triad_gbs']:.1f} GB/s triad, "
                          f"{top['gather_gbs']:.1f} GB/s gather"))
        if peak.get("fma_warning"):
            parts.append(Text(f"warning: {peak['fma_warning']}", style="yellow"))
    failures = [f for f in summary.get("failures") or [] if f["status"] != "skipped"]
    if failures:
        f = failures[0]
        last = (str(f["error"]).strip().splitlines() or [""])[-1][:120]
        parts.append(Text(f"{len(failures)} configuration(s) failed, e.g. {f['model']} "
                          f"b{f['batch']} {f['setting']}: {last}; the rest are reported "
                          "(report.html lists them all)", style="yellow"))
    # TensorFlow and PyTorch on an ONNX file, and a framework at a precision
    # it has no kernels for, are skipped too, for other reasons.
    skips = [str(f.get("error", "")) for f in summary.get("failures") or []
             if f["status"] == "skipped"]
    no_module = skips.count(NO_MODULE)
    unsupported = sorted({e for e in skips if e.startswith(UNSUPPORTED_AT)})
    skipped = summary["counts"].get("skipped", 0) - no_module - sum(
        skips.count(e) for e in unsupported)
    if skipped:
        parts.append(Text(f"{skipped} setting(s) skipped: this machine cannot hold them"))
    if no_module:
        parts.append(Text(f"{no_module} framework run(s) of ONNX files {NO_MODULE}"))
    for e in unsupported:
        parts.append(Text(f"{skips.count(e)} framework run(s) {e}"))
    if report:
        parts.append(Text(f"report: {report}", style="bold"))
    return Group(*parts)


def print_summary(summary: Mapping[str, Any], console: Console | None = None,
                  report: str | None = None) -> None:
    """Print the summary within ``MAX_WIDTH`` columns (narrower terminals wrap it)."""
    console = console or Console()
    width = min(console.width, MAX_WIDTH)
    console.print(summary_renderable(summary, report), width=width)
