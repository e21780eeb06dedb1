"""Compare results across runs and machines: medians, ratios, a U test, fingerprints.

The first input is the baseline; every other input is compared with it.
Rows are matched by identity (model, batch and settings, a preset by its
name; a pytest-benchmark test by its full name with its parameters). For
each matched row: both medians, the ratio other / baseline (of latencies,
so below 1 means the other is faster), and the two-sided Mann-Whitney U
test of the two sets of per-run times (:func:`scipy.stats.mannwhitneyu`),
marked significant when p < alpha. The test needs enough samples on both
sides: at least :data:`MIN_SAMPLES` each, and enough that a p below alpha
can occur at all (with n1 and n2 samples the smallest two-sided p is
2 / C(n1 + n2, n1)); otherwise the row says so.

Normalisation, so that machines of different sizes compare fairly:

``per-core``
    latency x cores used (core-seconds per run; equivalently throughput per
    core). Cores used: the row's thread count (instances x inter_op x
    intra_op, or the benchmark's ``threads`` parameter), capped at the
    physical cores the machine let the process use.
``per-peak``
    latency x the machine's measured peak GFLOP/s (at the row's cores when
    the peak is given per thread count): the work the machine could have
    done at its peak in that time. The ratio equals the inverse ratio of
    the two machines' fractions of peak. Needs a ``peak`` section in the
    results' ``summary.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pyparbench.resultfiles import SIGNIFICANT_FIELDS, ResultSet, Row

__all__ = ["MIN_SAMPLES", "Comparison", "CompareError", "Pair", "RowResult", "compare",
           "format_time", "input_names", "machine_differences", "print_text", "to_json", "u_test"]

Normalize = Literal["none", "per-core", "per-peak"]
NORMALIZE: tuple[Normalize, ...] = ("none", "per-core", "per-peak")
MIN_SAMPLES = 3


class CompareError(ValueError):
    """The inputs cannot be compared as asked (one line, naming the input)."""


@dataclass(frozen=True)
class Side:
    """One side of a matched row, after normalisation."""

    median: float  # ns, or normalised units
    n: int  # raw samples
    cores: int | None  # cores used, when known


@dataclass(frozen=True)
class RowResult:
    """One matched row."""

    key: str
    label: str
    baseline: Side | None
    other: Side | None
    ratio: float | None  # other / baseline
    p_value: float | None
    significant: bool
    note: str = ""  # why there is no ratio or no p-value


@dataclass
class Pair:
    """The baseline against one other input."""

    baseline: str
    other: str
    rows: list[RowResult] = field(default_factory=list)
    only_baseline: list[str] = field(default_factory=list)
    only_other: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "label: side status (error)"


@dataclass
class Comparison:
    """Everything ``pyparbench compare`` reports."""

    inputs: list[ResultSet]
    alpha: float
    normalize: Normalize
    unit: str  # of the medians: "ns", "core-ns" or "peak-GFLOP"
    differences: list[dict[str, Any]]  # fingerprint fields that differ
    unknown: list[str]  # inputs with no pyparbench fingerprint
    pairs: list[Pair]
    notes: list[str]


def u_test(a: Sequence[float], b: Sequence[float], alpha: float) -> tuple[float | None, str]:
    """(two-sided Mann-Whitney U p-value, "") or (None, why not)."""
    n1, n2 = len(a), len(b)
    if min(n1, n2) < MIN_SAMPLES:
        return None, f"too few samples for a U test ({n1} and {n2}; {MIN_SAMPLES} a side needed)"
    smallest = 2.0 / math.comb(n1 + n2, n1)
    if smallest >= alpha:
        return None, (f"too few samples for a U test ({n1} and {n2}: the smallest p "
                      f"possible is {smallest:.3g} >= alpha {alpha:g})")
    try:
        from scipy.stats import mannwhitneyu  # type: ignore[import-untyped]
    except ImportError:
        raise CompareError("the U test needs scipy: pip install 'pyparbench[compare]'") from None
    p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    if math.isnan(p):  # every sample equal: no evidence of a difference
        p = 1.0
    return p, ""


def _cores_used(row: Row, rs: ResultSet) -> int | None:
    if row.threads is None:
        return None
    return min(row.threads, rs.cores) if rs.cores else row.threads


def _peak_at(rs: ResultSet, cores: int | None) -> float | None:
    """The peak at ``cores`` threads: the largest count measured not above it
    (the smallest measured when all are above; the largest when unknown), as
    pyparbench's roofline picks its ceiling."""
    peak = rs.peak_gflops
    if not peak:
        return None
    if cores is None:
        return peak[max(peak)]
    below = [t for t in peak if t <= cores]
    return peak[max(below)] if below else peak[min(peak)]


def _factor(row: Row, rs: ResultSet, normalize: Normalize) -> tuple[float | None, str]:
    """The factor a row's times are multiplied by, or (None, why not)."""
    if normalize == "none":
        return 1.0, ""
    cores = _cores_used(row, rs)
    if normalize == "per-core":
        if cores is None:
            return None, f"{rs.path}: thread count unknown, cannot normalise per core"
        return float(cores), ""
    peak = _peak_at(rs, cores)
    if peak is None:
        return None, f"{rs.path}: no measured peak at {cores} thread(s)"
    return peak, ""


def _side(row: Row, rs: ResultSet, factor: float) -> Side:
    assert row.median_ns is not None
    return Side(row.median_ns * factor, len(row.samples_ns), _cores_used(row, rs))


def _compare_rows(a: Row, b: Row, ra: ResultSet, rb: ResultSet, alpha: float,
                  normalize: Normalize) -> RowResult:
    fa, why_a = _factor(a, ra, normalize)
    fb, why_b = _factor(b, rb, normalize)
    if fa is None or fb is None:
        return RowResult(a.key, a.label, None, None, None, None, False, why_a or why_b)
    sa, sb = _side(a, ra, fa), _side(b, rb, fb)
    p, why = u_test([x * fa for x in a.samples_ns], [x * fb for x in b.samples_ns], alpha)
    return RowResult(a.key, a.label, sa, sb, sb.median / sa.median, p,
                     p is not None and p < alpha, why)


def machine_differences(inputs: Sequence[ResultSet]) -> tuple[list[dict[str, Any]], list[str]]:
    """Significant fingerprint fields that differ between inputs (each with
    its value per input), and the inputs that carry no pyparbench fingerprint."""
    diffs = []
    for path, label in SIGNIFICANT_FIELDS:
        values = [rs.fields.get(path) for rs in inputs]
        known = {v for v in values if v is not None}
        if len(known) > 1:
            diffs.append({"field": path, "label": label, "values": values})
    unknown = [rs.path for rs in inputs if rs.machine is None]
    return diffs, unknown


def compare(inputs: Sequence[ResultSet], *, alpha: float = 0.05,
            normalize: Normalize = "none") -> Comparison:
    """Compare every input with the first (see the module docstring).

    Raises
    ------
    CompareError
        Fewer than two inputs, alpha outside (0, 1), an unknown
        normalisation, or ``per-peak`` for an input with no measured peak.
    """
    if len(inputs) < 2:
        raise CompareError("compare needs at least two inputs")
    if not 0 < alpha < 1:
        raise CompareError(f"alpha must be between 0 and 1, got {alpha}")
    if normalize not in NORMALIZE:
        raise CompareError(f"normalize must be one of {', '.join(NORMALIZE)}, got {normalize!r}")
    if normalize == "per-peak":
        for rs in inputs:
            if rs.peak_gflops is None:
                raise CompareError(
                    f"{rs.path}: no measured peak (the 'peak' section of the summary.json "
                    "in its results folder, from `pyparbench peak`); --normalize per-peak "
                    "needs one for every input, per-core does not")
    if normalize == "per-core":
        for rs in inputs:
            if rs.cores is None and any(r.threads is not None for r in rs.rows.values()):
                rs.notes.append(f"{rs.path}: the machine's core count is unknown; cores used "
                                "are taken as the thread counts")
    diffs, unknown = machine_differences(inputs)
    base = inputs[0]
    pairs = []
    for other in inputs[1:]:
        pair = Pair(base.path, other.path)
        for key in sorted(set(base.rows) | set(other.rows),
                          key=lambda k: (base.rows.get(k) or other.rows[k]).label):
            a, b = base.rows.get(key), other.rows.get(key)
            if a is None:
                assert b is not None
                pair.only_other.append(b.label)
            elif b is None:
                pair.only_baseline.append(a.label)
            elif a.status != "ok" or b.status != "ok":
                bad = [(p, r) for p, r in ((base.path, a), (other.path, b)) if r.status != "ok"]
                pair.failed.append(a.label + ": " + "; ".join(
                    f"{r.status} in {p}" + (f" ({_one_line(r.error)})" if r.error else "")
                    for p, r in bad))
            else:
                pair.rows.append(_compare_rows(a, b, base, other, alpha, normalize))
        pairs.append(pair)
    unit = {"none": "ns", "per-core": "core-ns", "per-peak": "peak-GFLOP"}[normalize]
    notes = [n for rs in inputs for n in rs.notes]
    return Comparison(list(inputs), alpha, normalize, unit, diffs, unknown, pairs, notes)


def _one_line(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


# -- output -----------------------------------------------------------------------


def format_time(v: float, unit: str) -> str:
    """A median in a readable unit: '1.23 ms', '4.56 core-ms', '7.8 peak-GFLOP'."""
    if unit == "peak-GFLOP":
        return f"{v / 1e9:.4g} {unit}"  # ns x GFLOP/s = FLOP
    prefix = "core-" if unit == "core-ns" else ""
    for name, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if v >= scale:
            return f"{v / scale:.4g} {prefix}{name}"
    return f"{v:.4g} {prefix}ns"


def to_json(c: Comparison) -> dict[str, Any]:
    """A JSON-serialisable form of the comparison (``--json``)."""
    return {
        "alpha": c.alpha,
        "normalize": c.normalize,
        "unit": c.unit,
        "inputs": [{"path": rs.path, "source": rs.source, "kind": rs.kind,
                    "rows": len(rs.rows), "fingerprint": rs.fields, "cores": rs.cores,
                    "peak_gflops": ({str(k): v for k, v in sorted(rs.peak_gflops.items())}
                                    if rs.peak_gflops is not None else None)}
                   for rs in c.inputs],
        "machine_differences": c.differences,
        "no_fingerprint": c.unknown,
        "comparisons": [{
            "baseline": p.baseline, "other": p.other,
            "rows": [{**asdict(r), "ratio_meaning": "other / baseline"} for r in p.rows],
            "only_in_baseline": p.only_baseline, "only_in_other": p.only_other,
            "failed": p.failed,
        } for p in c.pairs],
        "notes": c.notes,
    }


def print_text(c: Comparison, *, file: Any = None) -> None:
    """The comparison as terminal tables (rich), one per input against the baseline."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console(file=file, highlight=False)
    names = input_names(c.inputs)
    for name, rs in zip(names, c.inputs):
        machine = rs.fields.get("cpu_model", "unknown CPU")
        cores = f", {rs.cores} cores" if rs.cores else ""
        con.print(f"{name}: {escape(rs.path)} ({rs.kind}, {len(rs.rows)} rows; "
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
    for name, pair in zip(names[1:], c.pairs):
        table = Table(title=f"{name} against {base}"
                      + (f" (normalised {c.normalize})" if c.normalize != "none" else ""))
        table.add_column("row", overflow="fold")
        table.add_column(base, justify="right", no_wrap=True)
        table.add_column(name, justify="right", no_wrap=True)
        table.add_column(f"{name}/{base}", justify="right", no_wrap=True)
        table.add_column("p", justify="right", no_wrap=True)
        table.add_column("", no_wrap=True)
        for r in pair.rows:
            if r.baseline is None or r.other is None or r.ratio is None:
                table.add_row(escape(r.label), "-", "-", "-", "-", "")
                continue
            p = f"{r.p_value:.3g}" if r.p_value is not None else f"n={r.baseline.n},{r.other.n}"
            table.add_row(escape(r.label), format_time(r.baseline.median, c.unit),
                          format_time(r.other.median, c.unit), f"{r.ratio:.3f}", p,
                          "*" if r.significant else "")
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
    con.print(f"{'/'.join(names[1:])}/{base}: ratio of medians (of latency: below 1 is "
              f"faster than {base}). p: two-sided Mann-Whitney U test of the per-run times "
              f"(n=a,b: too few samples). *: p < {c.alpha:g}.")


def input_names(inputs: Sequence[ResultSet]) -> list[str]:
    """A, B, C, ... (Z, then A1, B1, ...)."""
    return [chr(ord("A") + i % 26) + (str(i // 26) if i >= 26 else "")
            for i in range(len(inputs))]


def dumps(c: Comparison) -> str:
    """``to_json`` as indented text."""
    return json.dumps(to_json(c), indent=2)
