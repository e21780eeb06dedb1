"""A comparison as text: terminal tables (rich) and JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pyparbench.compare.match import Comparison, RowResult
from pyparbench.compare.input_names import input_names
from pyparbench.report.legend import SettingsLegend
from pyparbench.resultfiles import RowName

if TYPE_CHECKING:
    from pyparbench.compare.gate import Gate

__all__ = ["dumps", "format_time", "input_names", "print_text", "test_legend", "to_json"]


def format_time(v: float, unit: str) -> str:
    """A median in a readable unit: '1.23 ms', '4.56 core-ms', '7.8 peak-GFLOP'."""
    if unit == "peak-GFLOP":
        return f"{v / 1e9:.4g} {unit}"  # ns x GFLOP/s = FLOP
    prefix = "core-" if unit == "core-ns" else ""
    for name, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if v >= scale:
            return f"{v / scale:.4g} {prefix}{name}"
    return f"{v:.4g} {prefix}ns"


def to_json(c: Comparison, gate: Gate | None = None) -> dict[str, Any]:
    """A JSON-serialisable form of the comparison (``--json``); with the
    gate's verdict per row and overall when there is one."""
    verdicts: list[list[Any]] = (gate.verdicts if gate is not None else
                                 [[None] * len(p.rows) for p in c.pairs])
    out: dict[str, Any] = {
        "alpha": c.alpha,
        "normalize": c.normalize,
        "unit": c.unit,
        "inputs": [{"path": rs.path, "source": rs.source, "kind": rs.kind, "runs": rs.runs,
                    "rows": len(rs.rows), "fingerprint": rs.fields, "cores": rs.cores,
                    "spread": None if s is None else s.as_dict(),
                    "peak_gflops": ({str(k): v for k, v in sorted(rs.peak_gflops.items())}
                                    if rs.peak_gflops is not None else None),
                    "peak_bf16_gflops": ({str(k): v for k, v in
                                          sorted(rs.peak_bf16_gflops.items())}
                                         if rs.peak_bf16_gflops is not None else None),
                    "peak_int8_gops": ({str(k): v for k, v in
                                        sorted(rs.peak_int8_gops.items())}
                                       if rs.peak_int8_gops is not None else None)}
                   for rs, s in zip(c.inputs, c.spreads or [None] * len(c.inputs),
                                    strict=True)],
        "machine_differences": c.differences,
        "no_fingerprint": c.unknown,
        "comparisons": [{
            "baseline": p.baseline, "other": p.other,
            "rows": [{**asdict(r), "ratio_meaning": "other / baseline",
                      **({"gate": v.as_dict()} if v is not None else {})}
                     for r, v in zip(p.rows, vs, strict=True)],
            "only_in_baseline": p.only_baseline, "only_in_other": p.only_other,
            "failed": p.failed,
            # One process or one run a side: how far the two are apart beyond
            # what each row's runs or processes show (log units), from the
            # rows (pyparbench.compare.between_spread).
            "between_spread": p.between_spread,
        } for p, vs in zip(c.pairs, verdicts, strict=True)],
        "notes": c.notes,
    }
    if gate is not None:
        out["gate"] = gate.as_dict()
    return out


def print_text(c: Comparison, *, file: Any = None, gate: Gate | None = None,
               width: int | None = None) -> None:
    """The comparison as terminal tables (rich), one per input against the
    baseline: a row shows a short key (model and batch above their rows,
    then the name a setting ran under or its number), the settings in full
    in the legend under the tables. ``gate``: the verdict of
    ``--fail-slower`` marks its rows and closes the output."""
    con = Console(file=file, highlight=False, width=width)
    names = input_names(c.inputs)
    for name, rs in zip(names, c.inputs):
        machine = rs.fields.get("cpu_model", "unknown CPU")
        cores = f", {rs.cores} cores" if rs.cores else ""
        runs = f"{rs.runs} runs, " if rs.runs > 1 else ""
        con.print(f"{name}: {escape(rs.path)} ({rs.kind}, {runs}{len(rs.rows)} rows; "
                  f"{escape(machine)}{cores})")
    if c.differences:
        con.print("[bold]machines differ in:[/bold]")
        for d in c.differences:
            vals = ", ".join(f"{v if v is not None else 'unknown'} ({n})"
                             for n, v in zip(names, d["values"]))
            con.print(f"  {d['label']}: {escape(vals)}")
    else:
        con.print("machines: same significant fingerprint fields "
                  "(host names, clocks and times are not compared)")
    for path in c.unknown:
        con.print(f"[yellow]{escape(path)} carries no pyparbench fingerprint[/yellow]")
    for n in c.notes:
        con.print(f"[yellow]note: {escape(n)}[/yellow]")
    base = names[0]
    legend = SettingsLegend()
    runners: dict[str, str] = {}
    for index, (name, pair) in enumerate(zip(names[1:], c.pairs)):
        tests = {r.test for r in pair.rows if r.test}
        # One space between columns and no vertical rules: the room goes to
        # the row keys, which then fit 80 columns.
        table = Table(title=f"{name} against {base}"
                      + (f" (normalised {c.normalize})" if c.normalize != "none" else ""),
                      box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        table.add_column("row", overflow="fold")
        table.add_column(base, justify="right", no_wrap=True)
        table.add_column(name, justify="right", no_wrap=True)
        table.add_column(f"{name}/{base}", justify="right", no_wrap=True)
        if "processes" in tests:
            table.add_column(f"{100 * (1 - c.alpha):g}% interval", justify="right",
                             no_wrap=True)
        table.add_column("p", justify="right", no_wrap=True)
        table.add_column("", no_wrap=True)
        verdicts: list[Any] = (gate.verdicts[index] if gate is not None else
                               [None] * len(pair.rows))
        group = None
        for r, v in sorted(zip(pair.rows, verdicts, strict=True),
                           key=lambda rv: _order(c, rv[0])):
            row_name = _row_name(c, r)
            if row_name is not None and row_name.group != group:
                group = row_name.group
                table.add_row(Text(group, style="bold"))
            cell = r.label if row_name is None else "  " + _short(row_name, legend, runners)
            interval = ([f"{r.low:.3f}-{r.high:.3f}" if r.low is not None and r.high is not None
                         else "-"] if "processes" in tests else [])
            if r.baseline is None or r.other is None or r.ratio is None:
                table.add_row(escape(cell), "-", "-", "-", *interval, "-", "")
                continue
            p = (f"{r.p_value:.3g}" if r.p_value is not None
                 else "untested" if r.note.startswith("untested")  # why: in the notes below
                 else f"n={r.baseline.n},{r.other.n}")
            if r.test == "runs" and len(tests) > 1:
                p += " U"  # this row's p is of per-run times, the others' of processes
            mark = "*" if r.significant else ""
            if v is not None and v.slower:
                mark = "slow" if v.tested else "slow?"
            table.add_row(escape(cell), format_time(r.baseline.median, c.unit),
                          format_time(r.other.median, c.unit), f"{r.ratio:.3f}", *interval, p,
                          mark)
        con.print(table)
        notes = sorted({r.note for r in pair.rows if r.note})
        for n in notes:
            con.print(f"  {escape(n)}")
        for title, items in ((f"only in {base}", pair.only_baseline),
                             (f"only in {name}", pair.only_other),
                             ("not compared, a side has no timing", pair.failed)):
            if items:
                con.print(f"{title} ({len(items)}):")
                for item in items:
                    con.print(f"  {escape(item)}")
    lines = legend.lines()
    if runners:
        lines.append("frameworks as framework:mode; " + ", ".join(
            f"{short}: {full}" for full, short in runners.items()))
    if lines:
        con.print("settings of the rows (a preset's on the baseline, " + base + "):")
        for line in lines:
            con.print(Text("  " + line))
    con.print(f"{'/'.join(names[1:])}/{base}: ratio of medians (of latency: below 1 is "
              f"faster than {base}). {test_legend(c)} *: p < {c.alpha:g} after Holm's "
              "correction over the pair's tested rows (JSON: p_adjusted).")
    if gate is not None:
        con.print(f"slow: slower than {base} by more than {gate.percent:g}%, one-sided "
                  f"test significant after Holm's correction over the {_tested(gate)} tested "
                  f"rows (alpha {gate.alpha:g}); slow?: a row that cannot be tested, slower "
                  "by its ratio alone.")
        con.print(Text(gate.line(), style="bold red" if gate.failed else "bold"))


# Frameworks by a short name in the row keys (their full name in the legend).
_RUNNERS = {"tensorflow": "tf", "onnxruntime": "ort", "openvino": "ov"}


def _short(n: RowName, legend: SettingsLegend, runners: dict[str, str]) -> str:
    """A row's key within its group: '[framework:mode ]name-or-number', or its item."""
    if n.item:
        return n.item
    framework, _, mode = n.runner.partition(" (")
    # A framework's own preset without the framework's name ('openvino-
    # throughput' under ov reads 'throughput'): the key fits its column.
    chooser = n.chooser.removeprefix(framework + "-") if n.runner else n.chooser
    key = legend.key(n.setting, chooser or n.chooser, n.group)
    if not n.runner:
        return key
    if framework in _RUNNERS:
        runners[framework] = _RUNNERS[framework]
    return _RUNNERS.get(framework, framework) + (":" + mode.rstrip(")") if mode else "") + " " + key


def _row_name(c: Comparison, r: RowResult) -> RowName | None:
    row = c.inputs[0].rows.get(r.key)
    return row.name if row is not None else None


def _order(c: Comparison, r: RowResult) -> tuple[str, str, int, str]:
    """Rows by group (model and batch), the native executor's first, named
    settings before numbered ones, then by label."""
    n = _row_name(c, r)
    if n is None:
        return (r.label, "", 0, "")
    if n.item:
        return (n.group, n.runner, 0, n.item)
    return (n.group, n.runner, 1 if n.chooser else 2, n.chooser or r.label)


def _tested(gate: Gate) -> int:
    return sum(v.tested for vs in gate.verdicts for v in vs)


def test_legend(c: Comparison) -> str:
    """What the p-values of ``c`` are (one or two sentences)."""
    tests = {r.test for p in c.pairs for r in p.rows if r.test}
    out = []
    if "processes" in tests:
        out.append("p: Student's t on the log ratio of the processes' medians, against "
                   "how much one setting's processes differ within each input (the "
                   "interval: the ratio's, at 1 - alpha).")
    if "blocks" in tests:
        out.append("p (pytest-benchmark files, one process a side): batch means, Welch's t "
                   "on the log medians of blocks of consecutive runs long enough to be "
                   "uncorrelated, with how far two processes are apart beyond their runs "
                   "(estimated from the rows' scatter) added to each row's error.")
    if "runs" in tests or not tests:
        out.append(("U: " if len(tests) > 1 else "p: ")
                   + "two-sided Mann-Whitney U test of the per-run times, each run taken "
                     "as independent (n=a,b: too few samples).")
    return " ".join(out)


def dumps(c: Comparison) -> str:
    """``to_json`` as indented text."""
    return json.dumps(to_json(c), indent=2)
