"""The main job's report: summary dict (``summary.py``), figures
(``plots.py``), the HTML page (``html.py``) and the terminal table
(``terminal.py``); :func:`write_report` writes ``summary.json`` and
``report.html`` into a results folder."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyparbench.report.summary import summarize_run

if TYPE_CHECKING:
    from pyparbench.machine.peak import Peak
    from pyparbench.resultfiles import OpResult, Result

__all__ = ["REPORT_FILE", "SUMMARY_FILE", "summarize_run", "write_report"]

SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"


def write_report(directory: str | Path, records: Sequence[Result],
                 op_records: Sequence[OpResult] = (), peak: Peak | None = None,
                 conditions: Mapping[str, Any] | None = None, *,
                 peaks: Mapping[str, Peak] | None = None,
                 graphs: Mapping[tuple[str, int], Mapping[str, Any]] | None = None
                 ) -> tuple[dict[str, Any], Path]:
    """Summarise the records, write ``summary.json`` and ``report.html`` into
    ``directory``; returns the summary and the report's path. ``peaks``:
    every host's ceilings by fingerprint id, for the list of hosts;
    ``graphs``: each (model, batch)'s graph figures, as the plan has them."""
    from pyparbench.report.html import render_html  # noqa: PLC0415 (heavy: matplotlib, in its plots)

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize_run(records, op_records, peak, conditions=conditions, peaks=peaks,
                            graphs=graphs,
                            fingerprint=peak.fingerprint if peak is not None else None)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1))
    page = out / REPORT_FILE
    page.write_text(render_html(summary))
    return summary, page
