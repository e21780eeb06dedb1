"""Does the regret hold from run to run? The quick main job, N times.

  python bench/regret_runs.py                        # 10 runs into regret-runs/
  python bench/regret_runs.py -n 3 -o DIR            # 3 runs
  python bench/regret_runs.py -o DIR --report-only   # the table again, from DIR
  python bench/regret_runs.py -- --no-frameworks     # more arguments for `pyparbench run`

Each run is ``pyparbench run --quick -o DIR/run-NN`` in a fresh process
(its own results folder, so nothing is resumed from another run; the
recommender's calibration cache is shared, as a user's would be). A run
whose folder already holds a ``summary.json`` is not run again, so an
interrupted series resumes.

Then, per model and batch, the regret of three choosers across runs, read
from each run's ``summary.json``:

* ``ours``: the recommended setting (``models[i]["regret"]["recommended"]``);
* ``tuner``: the study's tuner (``models[i]["regret"]["tftuner"]``);
* ``intel``: Intel's preset (``models[i]["regret"]["intel"]``).

A regret is the summary's: how much slower than the best measured, read
in pairs (the median over the rounds that measured both of the ratio of
their round medians, :func:`pyparbench.stats.regret_of`).

Each as the median and the largest regret over the runs, and in how many
runs it was within 3 % of the best measured. ``ours - intel`` is ours over
Intel's preset, less one (negative: ours faster; from their regrets,
(1 + ours) / (1 + intel) - 1), and ``>intel`` counts the
runs where ours was slower than Intel's preset by more than that run's
spread of Intel's preset (the larger of its q1..q3 half-width and 3 %).
``ours sure`` counts, where the summaries give each regret's interval over
processes (``models[i]["regret_interval"]``), the runs where ours was more
than 3 % off and its interval excludes 0: a regret the run's processes are
sure of.

The table goes to stdout and, with the per-run figures, to
``DIR/regret_runs.md`` and ``DIR/regret_runs.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A regret within this is "within 3 %": the project's goal for the recommender.
WITHIN = 0.03
CHOOSERS = ("ours", "tuner", "intel")


@dataclass
class Row:
    """One model and batch across runs: each chooser's regret per run (None
    where that run has no figure), and ours over Intel's preset."""

    model: str
    batch: int
    regret: dict[str, list[float | None]] = field(
        default_factory=lambda: {c: [] for c in CHOOSERS})
    vs_intel: list[float | None] = field(default_factory=list)
    intel_noise: list[float | None] = field(default_factory=list)
    ours_sure: list[bool | None] = field(default_factory=list)


def run_folders(out: Path, runs: int) -> list[Path]:
    """The runs' folders, in order."""
    return [out / f"run-{i:02d}" for i in range(1, runs + 1)]


def run_series(out: Path, runs: int, extra: Sequence[str], python: str) -> None:
    """Run the quick main job into each folder that has no summary yet."""
    for i, folder in enumerate(run_folders(out, runs), 1):
        if (folder / "summary.json").is_file():
            print(f"run {i}/{runs}: {folder} has a summary, not run again", file=sys.stderr)
            continue
        # -P: run from the repository root, the source folder (no compiled
        # core) must not shadow the installed package.
        cmd = [python, "-P", "-m", "pyparbench", "run", "--quick", "-o", str(folder), *extra]
        print(f"run {i}/{runs}: {' '.join(cmd)}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        # The main job exits 1 when a measurement failed; its summary still counts.
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
        print(f"run {i}/{runs}: exit {done.returncode} after "
              f"{time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        if not (folder / "summary.json").is_file():
            # Not a failed measurement (those still write the summary): the
            # job itself failed, and would again in every run after it.
            raise SystemExit(f"run {i}/{runs} wrote no summary (exit {done.returncode}); "
                             "the series stops: see the error above")


def _intel_noise(entry: Mapping[str, Any]) -> float | None:
    """The relative spread of Intel's preset in one run: half its q1..q3 over
    its median (the spread of its repeats, or of its processes' medians)."""
    intel = entry.get("presets", {}).get("intel")
    if not intel or not intel.get("median_ms"):
        return None
    return float((intel["q3_ms"] - intel["q1_ms"]) / 2 / intel["median_ms"])


def read_runs(folders: Sequence[Path]) -> tuple[list[Row], list[str]]:
    """Every model row across the runs' summaries, and the folders lacking one."""
    rows: dict[tuple[str, int], Row] = {}
    missing = []
    summaries: list[Mapping[str, Any] | None] = []
    for folder in folders:
        try:
            summaries.append(json.loads((folder / "summary.json").read_text()))
        except (OSError, ValueError):
            summaries.append(None)
            missing.append(str(folder))
    for summary in summaries:
        for entry in (summary or {}).get("models", []):
            key = (str(entry["model"]), int(entry["batch"]))
            rows.setdefault(key, Row(*key))
    for summary in summaries:
        if summary is None:
            continue  # a run without a summary has no figure for anyone
        entries = {(str(e["model"]), int(e["batch"])): e for e in summary.get("models", [])}
        for key, row in rows.items():
            e = entries.get(key, {})
            regret = e.get("regret", {})
            row.regret["ours"].append(regret.get("recommended"))
            row.regret["tuner"].append(regret.get("tftuner"))
            intel, ours = regret.get("intel"), regret.get("recommended")
            row.regret["intel"].append(intel)
            row.vs_intel.append((1 + ours) / (1 + intel) - 1.0
                                if ours is not None and intel is not None else None)
            row.intel_noise.append(_intel_noise(e))
            interval = (e.get("regret_interval") or {}).get("recommended")
            ours_regret = regret.get("recommended")
            row.ours_sure.append(None if not interval or ours_regret is None else
                                 ours_regret > WITHIN and not interval.get("includes_zero"))
    return sorted(rows.values(), key=lambda r: (r.model, r.batch)), missing


def _stats(values: Sequence[float | None]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "-"
    within = sum(v <= WITHIN for v in got)
    return (f"{100 * statistics.median(got):5.1f} / {100 * max(got):5.1f} / "
            f"{within}/{len(got)}")


def _over_intel(row: Row) -> str:
    pairs = [(v, n) for v, n in zip(row.vs_intel, row.intel_noise, strict=True)
             if v is not None]
    if not pairs:
        return "-"
    worse = sum(v > max(WITHIN, n or 0.0) for v, n in pairs)
    values = [v for v, _ in pairs]
    return (f"{100 * statistics.median(values):+5.1f} / {100 * max(values):+5.1f} / "
            f"{worse}/{len(pairs)}")


def table(rows: Sequence[Row], runs: int) -> str:
    """The markdown table: per row, median / max regret (%) / runs within 3 %."""
    head = ("| model | ours: median / max % / within 3 % | tuner | intel | "
            "ours - intel: median / max % / >intel | ours sure |")
    lines = [f"{runs} runs of `pyparbench run --quick`; regret: how much slower than the "
             "best measured, read in pairs of rounds", "", head, "|---|---|---|---|---|---|"]
    for r in rows:
        known = [v for v in r.ours_sure if v is not None]
        sure = f"{sum(known)}/{len(known)}" if known else "-"
        lines.append(f"| {r.model} b{r.batch} | {_stats(r.regret['ours'])} | "
                     f"{_stats(r.regret['tuner'])} | {_stats(r.regret['intel'])} | "
                     f"{_over_intel(r)} | {sure} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--runs", type=int, default=10, help="runs (default 10)")
    ap.add_argument("-o", "--output", default="regret-runs",
                    help="folder of the runs' folders (default regret-runs/)")
    ap.add_argument("--report-only", action="store_true",
                    help="only tabulate the runs already in the folder")
    ap.add_argument("--python", default=sys.executable,
                    help="the Python that runs pyparbench (default: this one)")
    ap.add_argument("extra", nargs="*", help="after --: more arguments for `pyparbench run`")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error(f"--runs must be >= 1, got {args.runs}")
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        run_series(out, args.runs, args.extra, args.python)
    folders = run_folders(out, args.runs)
    rows, missing = read_runs(folders)
    text = table(rows, args.runs - len(missing))
    if missing:
        text += "\n\nno summary in: " + ", ".join(missing)
    print(text)
    (out / "regret_runs.md").write_text(text + "\n")
    (out / "regret_runs.json").write_text(json.dumps(
        [{"model": r.model, "batch": r.batch, "regret": r.regret, "vs_intel": r.vs_intel,
          "intel_noise": r.intel_noise, "ours_sure": r.ours_sure} for r in rows], indent=1))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
