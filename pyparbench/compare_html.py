"""``pyparbench compare --html``: one self-contained page (PNG figures embedded).

The page holds the inputs and their machines, the fingerprint fields that
differ, and per input against the baseline: a ratio bar per matched row
(significant ones coloured) and the table of medians, ratios and p-values;
then, when the inputs hold thread sweeps (the same row at several thread
counts), latency or GFLOP/s against threads, the machines side by side
(with each machine's measured FMA peak beside GFLOP/s curves).
Everything read from the inputs is HTML-escaped.
"""

from __future__ import annotations

import base64
import io
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any

from pyparbench.compare import Comparison, Pair, format_time, input_names
from pyparbench.resultfiles import ResultSet

__all__ = ["MAX_SWEEPS", "render_html", "sweeps", "write_html"]

MAX_SWEEPS = 40  # thread-sweep figures on one page; the rest are counted, not drawn
ROWS_PER_FIGURE = 60

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.sig td { background: #fff4d6; }
img { max-width: 100%; }
.note { color: #875; }
"""


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return ("<img alt='figure' src='data:image/png;base64,"
            + base64.b64encode(buf.getvalue()).decode("ascii") + "'>")


def _ratio_figures(pair: Pair, base: str, name: str, alpha: float) -> list[str]:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    rows = [r for r in pair.rows if r.ratio is not None]
    out = []
    for start in range(0, len(rows), ROWS_PER_FIGURE):
        chunk = rows[start:start + ROWS_PER_FIGURE]
        fig, ax = plt.subplots(figsize=(9, 0.8 + 0.28 * len(chunk)))
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
                      f"grey: p >= {alpha:g} or untested)")
        out.append(_png(fig))
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
    import matplotlib.pyplot as plt

    gflops = all(g is not None for pts in per_input.values() for _, _, g in pts)
    fig, axes = plt.subplots(1, len(inputs), figsize=(3.6 * len(inputs), 3), sharey=True,
                             squeeze=False)
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
    return _png(fig)


def render_html(c: Comparison) -> str:
    """The whole page as text."""
    try:
        import matplotlib
    except ImportError:
        raise ValueError("--html needs matplotlib: pip install 'pyparbench[compare]'") from None
    matplotlib.use("Agg")  # files only, never a window
    names = input_names(c.inputs)
    h: list[str] = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
                    "<title>pyparbench compare</title>", f"<style>{_CSS}</style></head><body>",
                    "<h1>pyparbench compare</h1>"]
    h.append("<h2>Inputs</h2><table><tr><th></th><th>input</th><th>kind</th><th>rows</th>"
             "<th>CPU</th><th>cores</th><th>ISA</th><th>oneDNN</th></tr>")
    for n, rs in zip(names, c.inputs):
        f = rs.fields
        h.append(f"<tr><td>{n}</td><td>{escape(rs.path)}</td><td>{rs.kind}</td>"
                 f"<td class='num'>{len(rs.rows)}</td>"
                 f"<td>{escape(f.get('cpu_model', '?'))}</td>"
                 f"<td class='num'>{rs.cores or '?'}</td>"
                 f"<td>{escape(f.get('onednn.isa', '?'))}</td>"
                 f"<td>{escape(f.get('onednn.version', '?'))}</td></tr>")
    h.append("</table>")
    if c.differences:
        h.append("<h2>Machines differ in</h2><table><tr><th>field</th>"
                 + "".join(f"<th>{n}</th>" for n in names) + "</tr>")
        for d in c.differences:
            h.append(f"<tr><td>{escape(d['label'])}</td>" + "".join(
                f"<td>{escape(v) if v is not None else '?'}</td>" for v in d["values"]) + "</tr>")
        h.append("</table>")
    else:
        h.append("<p>The machines' significant fingerprint fields are the same.</p>")
    for path in c.unknown:
        h.append(f"<p class='note'>{escape(path)} carries no pyparbench fingerprint.</p>")
    for note in c.notes:
        h.append(f"<p class='note'>{escape(note)}</p>")
    norm = f", normalised {c.normalize}" if c.normalize != "none" else ""
    for name, pair in zip(names[1:], c.pairs):
        h.append(f"<h2>{name} against {names[0]}{norm}</h2>")
        h.extend(_ratio_figures(pair, names[0], name, c.alpha))
        h.append(f"<table><tr><th>row</th><th>{names[0]}</th><th>{name}</th>"
                 f"<th>{name}/{names[0]}</th><th>p</th><th>note</th></tr>")
        for r in pair.rows:
            if r.baseline is None or r.other is None or r.ratio is None:
                h.append(f"<tr><td>{escape(r.label)}</td><td></td><td></td><td></td><td></td>"
                         f"<td>{escape(r.note)}</td></tr>")
                continue
            p = f"{r.p_value:.3g}" if r.p_value is not None else "-"
            h.append(f"<tr{' class=sig' if r.significant else ''}><td>{escape(r.label)}</td>"
                     f"<td class='num'>{format_time(r.baseline.median, c.unit)}</td>"
                     f"<td class='num'>{format_time(r.other.median, c.unit)}</td>"
                     f"<td class='num'>{r.ratio:.3f}{' *' if r.significant else ''}</td>"
                     f"<td class='num'>{p}</td><td>{escape(r.note)}</td></tr>")
        h.append("</table>")
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
    h.append(f"<p>Ratios are of median latency{norm} (below 1: faster than {names[0]}); "
             f"p: two-sided Mann-Whitney U test of the per-run times; *: p &lt; {c.alpha:g}.</p>")
    h.append("</body></html>")
    return "\n".join(h)


def write_html(c: Comparison, path: str | Path) -> Path:
    """Write the page to ``path``; returns it."""
    p = Path(path)
    p.write_text(render_html(c), encoding="utf-8")
    return p
