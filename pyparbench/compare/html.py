"""``pyparbench compare --html``: one self-contained page (PNG figures embedded).

The page holds the inputs and their machines, the fingerprint fields that
differ, and per input against the baseline: a ratio bar per matched row
(significant ones coloured) and the table of medians, ratios and p-values
(with ``--fail-slower``, the gate's verdict on top and per row);
then, when the inputs hold thread sweeps (the same row at several thread
counts), latency or GFLOP/s against threads, the machines side by side
(with each machine's measured FMA peak beside GFLOP/s curves).
Everything read from the inputs is HTML-escaped.
"""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from pyparbench.compare.gate import Gate, Verdict
from pyparbench.compare.match import Comparison, Pair
from pyparbench.compare.text import format_time, input_names, test_legend
from pyparbench.report.page import escape, figure, page, png_bytes, table
from pyparbench.resultfiles import ResultSet

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["MAX_SWEEPS", "render_html", "sweeps", "write_html"]

MAX_SWEEPS = 40  # thread-sweep figures on one page; the rest are counted, not drawn
ROWS_PER_FIGURE = 60


def _figure(fig: Figure) -> str:
    return figure(png_bytes(fig), "figure")


def _ratio_figures(pair: Pair, base: str, name: str, alpha: float) -> list[str]:
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    rows = [r for r in pair.rows if r.ratio is not None]
    out = []
    for start in range(0, len(rows), ROWS_PER_FIGURE):
        chunk = rows[start:start + ROWS_PER_FIGURE]
        fig = Figure(figsize=(9, 0.8 + 0.28 * len(chunk)))
        ax = fig.add_subplot()
        y = range(len(chunk))
        colors = ["#d62728" if r.significant and (r.ratio or 1) > 1 else
                  "#2ca02c" if r.significant else "#9e9e9e" for r in chunk]
        # Bars grow from 1 (no difference) towards the ratio, on a log scale
        # so that 2x faster and 2x slower are the same length.
        ax.barh(list(y), [(r.ratio or 1.0) - 1.0 for r in chunk], left=1.0, color=colors)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(plain)
        ax.tick_params(axis="x", which="minor", labelsize=7)
        ax.set_yticks(list(y))
        ax.set_yticklabels([r.label[:70] for r in chunk], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(f"{name}/{base} (median latency; green: {name} faster, red: slower, "
                      f"grey: not significant after Holm's correction, or untested)")
        out.append(_figure(fig))
    return out


def sweeps(inputs: list[ResultSet]) -> dict[str, dict[int, list[tuple[int, float, float | None]]]]:
    """Thread sweeps: sweep key -> input index -> [(threads, median ns, GFLOP per run)],
    kept where some input has the row at two thread counts or more."""
    found: dict[str, dict[int, list[tuple[int, float, float | None]]]] = defaultdict(dict)
    for i, rs in enumerate(inputs):
        for row in rs.rows.values():
            if row.sweep is None or row.threads is None or row.median_ns is None:
                continue
            found[row.sweep].setdefault(i, []).append((row.threads, row.median_ns, row.gflop))
    return {k: {i: sorted(pts) for i, pts in v.items()} for k, v in found.items()
            if any(len({t for t, _, _ in pts}) > 1 for pts in v.values())}


def _sweep_figure(label: str, per_input: dict[int, list[tuple[int, float, float | None]]],
                  inputs: list[ResultSet], names: list[str]) -> str:
    from matplotlib.figure import Figure

    gflops = all(g is not None for pts in per_input.values() for _, _, g in pts)
    fig = Figure(figsize=(3.6 * len(inputs), 3))
    axes = fig.subplots(1, len(inputs), sharey=True, squeeze=False)
    for i, ax in enumerate(axes[0]):
        rs = inputs[i]
        pts = per_input.get(i, [])
        if pts:
            t = [p[0] for p in pts]
            y = [(p[2] or 0.0) / (p[1] * 1e-9) if gflops else p[1] / 1e6 for p in pts]
            ax.plot(t, y, marker="o", label="measured")
            if gflops and rs.peak_gflops:
                # The machine's FMA ceiling over the same thread range.
                pk = sorted((n, g) for n, g in rs.peak_gflops.items() if n <= max(t))
                if pk:
                    ax.plot([n for n, _ in pk], [g for _, g in pk], linestyle="--",
                            color="grey", label="FMA peak")
                    ax.legend(fontsize=7)
            ax.set_xticks(sorted(set(t)))
        else:
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(f"{names[i]}: {rs.fields.get('cpu_model', 'unknown CPU')[:40]}",
                     fontsize=8)
        ax.set_xlabel("threads")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("GFLOP/s" if gflops else "median latency (ms)")
    fig.suptitle(label[:110], fontsize=9, y=1.04)
    return _figure(fig)


def _gate_cell(v: Verdict | None) -> str:
    if v is None or not v.slower:
        return "pass" if v is not None else ""
    return "slower (tested)" if v.tested else "slower (untested: by its ratio alone)"


def render_html(c: Comparison, gate: Gate | None = None) -> str:
    """The whole page as text; with ``gate`` (``compare --fail-slower``), its
    verdict on top and per row."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ValueError("--html needs matplotlib: pip install 'pyparbench[compare]'")
    names = input_names(c.inputs)
    h: list[str] = ["<h2>Inputs</h2>", table(
        ["", "input", "kind", "rows", "CPU", "cores", "ISA", "oneDNN"],
        [(n, rs.path, rs.kind, len(rs.rows), rs.fields.get("cpu_model", "?"), rs.cores or "?",
          rs.fields.get("onednn.isa", "?"), rs.fields.get("onednn.version", "?"))
         for n, rs in zip(names, c.inputs)],
        [False, False, False, True, False, True, False, False])]
    if c.differences:
        h.append("<h2>Machines differ in</h2>")
        h.append(table(["field", *names],
                       [(d["label"], *[v if v is not None else "?" for v in d["values"]])
                        for d in c.differences]))
    else:
        h.append("<p>The machines' significant fingerprint fields are the same.</p>")
    for path in c.unknown:
        h.append(f"<p class='note'>{escape(path)} carries no pyparbench fingerprint.</p>")
    for note in c.notes:
        h.append(f"<p class='note'>{escape(note)}</p>")
    norm = f", normalised {c.normalize}" if c.normalize != "none" else ""
    if gate is not None:
        h.insert(0, f"<h2>Regression gate: {'failed' if gate.failed else 'passed'}</h2>"
                    f"<p class='{'gate-failed' if gate.failed else 'gate-passed'}'>"
                    f"{escape(gate.line())}</p><p class='note'>slower: by more than "
                    f"{gate.percent:g}%, one-sided test significant after Holm's correction "
                    f"over the tested rows (alpha {gate.alpha:g}); an untested row counts by "
                    "its ratio alone.</p>")
    for index, (name, pair) in enumerate(zip(names[1:], c.pairs)):
        verdicts: list[Verdict | None] = (list(gate.verdicts[index]) if gate is not None
                                          else [None] * len(pair.rows))
        h.append(f"<h2>{name} against {names[0]}{norm}</h2>")
        h.extend(_ratio_figures(pair, names[0], name, c.alpha))
        rows: list[tuple[object, ...]] = []
        classes = []
        for r, v in zip(pair.rows, verdicts, strict=True):
            gate_cell = (_gate_cell(v),) if gate is not None else ()
            if r.baseline is None or r.other is None or r.ratio is None:
                rows.append((r.label, "", "", "", "", "", *[""] * len(gate_cell), r.note))
                classes.append("")
                continue
            interval = (f"{r.low:.3f} - {r.high:.3f}" if r.low is not None
                        and r.high is not None else "")
            test = {"processes": "processes", "runs": "runs (U)",
                    "blocks": "blocks of runs"}.get(r.test, "")
            rows.append((r.label, format_time(r.baseline.median, c.unit),
                         format_time(r.other.median, c.unit),
                         f"{r.ratio:.3f}{' *' if r.significant else ''}", interval,
                         f"{r.p_value:.3g} {test}" if r.p_value is not None else "-",
                         *gate_cell, r.note))
            classes.append("slow" if v is not None and v.slower
                           else "sig" if r.significant else "")
        gate_head = ["gate"] if gate is not None else []
        h.append(table(["row", names[0], name, f"{name}/{names[0]}",
                        f"{100 * (1 - c.alpha):g}% interval", "p", *gate_head, "note"], rows,
                       [False, True, True, True, True, True, *[False] * len(gate_head), False],
                       classes))
        for title, items in ((f"Only in {names[0]}", pair.only_baseline),
                             (f"Only in {name}", pair.only_other),
                             ("Not compared (a side has no timing)", pair.failed)):
            if items:
                h.append(f"<h3>{title} ({len(items)})</h3><ul>"
                         + "".join(f"<li>{escape(i)}</li>" for i in items) + "</ul>")
    found = sweeps(c.inputs)
    if found:
        h.append("<h2>Thread sweeps</h2>")
        labels: dict[str, str] = {}
        for rs in c.inputs:
            for row in rs.rows.values():
                if row.sweep in found:
                    labels.setdefault(row.sweep, row.sweep_label or row.label)
        ordered = sorted(found, key=lambda k: labels.get(k, k))
        for key in ordered[:MAX_SWEEPS]:
            h.append(_sweep_figure(labels.get(key, key), found[key], c.inputs, names))
        if len(ordered) > MAX_SWEEPS:
            h.append(f"<p class='note'>{len(ordered) - MAX_SWEEPS} more thread sweeps "
                     "not drawn.</p>")
    h.append(f"<p>Ratios are of median latency{norm} (below 1: faster than {names[0]}). "
             f"{escape(test_legend(c))} *: p &lt; {c.alpha:g} after Holm's correction over "
             "the pair's tested rows.</p>")
    return page("pyparbench compare", h)


def write_html(c: Comparison, path: str | Path, gate: Gate | None = None) -> Path:
    """Write the page to ``path``; returns it."""
    p = Path(path)
    p.write_text(render_html(c, gate), encoding="utf-8")
    return p
