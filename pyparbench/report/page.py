"""The HTML page scaffolding, defined once: the main job's ``report.html``
(:mod:`.html`) and ``pyparbench compare --html`` are both one
self-contained page of this kind: inline CSS, figures embedded as base64
PNG, no script, nothing fetched, and every text read from a file escaped."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["CSS", "DPI", "escape", "figure", "page", "png_bytes", "table"]

DPI = 100
CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .6em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
tr.sig td { background: #fff4d6; }
tr.slow td { background: #fbdada; }
.gate-failed { color: #b00; font-weight: bold; } .gate-passed { font-weight: bold; }
.note { color: #555; font-size: .9em; }
.bad { color: #b00; }
.unsure { color: #777; }
.figs { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
img { max-width: 100%; }
section.model { margin-bottom: 2.5em; }
"""


def escape(v: Any) -> str:
    """Any value as HTML text (quotes too: safe in attributes)."""
    return html.escape(str(v))


def png_bytes(fig: Figure) -> bytes:
    """A matplotlib figure as PNG (drawn by Agg; no pyplot, nothing global)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return buf.getvalue()


def figure(png: bytes | None, alt: str) -> str:
    """An embedded PNG (``""`` for None: nothing to draw)."""
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def table(header: Sequence[str], rows: Iterable[Sequence[Any]],
          numeric: Sequence[bool] | None = None,
          classes: Sequence[str] | None = None) -> str:
    """A table of escaped cells; ``numeric`` right-aligns columns, ``classes``
    gives each row a CSS class ("" for none)."""
    num = numeric or [False] * len(header)
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>"]
    for i, r in enumerate(rows):
        cells = "".join(f'<td class="n">{escape(c)}</td>' if n else f"<td>{escape(c)}</td>"
                        for c, n in zip(r, num, strict=True))
        cls = classes[i] if classes is not None else ""
        out.append(f"<tr class='{cls}'>{cells}</tr>" if cls else f"<tr>{cells}</tr>")
    out.append("</table>")
    return "\n".join(out)


def page(title: str, body: Iterable[str], *, heading: str | None = None) -> str:
    """The whole document: ``title``, the first heading (``heading``, else
    the title), then ``body``'s parts (HTML already; empty parts left out)."""
    parts = ["<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
             f"<title>{escape(title)}</title>", f"<style>{CSS}</style></head><body>",
             f"<h1>{escape(heading or title)}</h1>", *body, "</body></html>"]
    return "\n".join(p for p in parts if p)
