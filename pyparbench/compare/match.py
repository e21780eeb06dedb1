"""Matching the rows of result sets, normalising them, and testing each pair."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pyparbench.compare.batch_means import BlockTest, batch_means_test
from pyparbench.compare.between_spread import (
    MIN_ROWS,
    between_spread,
    p_slower_with_spread,
    p_with_spread,
)
from pyparbench.compare.slower import slower_p_processes, slower_p_runs
from pyparbench.compare.utest import CompareError, u_test
from pyparbench.machine.fingerprint import fingerprint_differences
from pyparbench.resultfiles import ResultSet, Row
from pyparbench.stats import (
    ProcessSpread,
    estimate_ratio,
    holm,
    input_spread,
    row_spread,
    se_of_interval,
)

__all__ = ["NORMALIZE", "OWN_SPREAD_NOTE", "Comparison", "CompareError", "Normalize", "Pair",
           "RowResult", "Side", "Test", "compare", "machine_differences"]

Normalize = Literal["none", "per-core", "per-peak"]
NORMALIZE: tuple[Normalize, ...] = ("none", "per-core", "per-peak")
# How a row was tested: "processes" (the processes' medians, against each
# input's spread between processes), "runs" (the U test of per-run times),
# "blocks" (batch means of one process a side: pytest-benchmark files),
# "" (not tested).
Test = Literal["processes", "runs", "blocks", ""]


OWN_SPREAD_NOTE = ("two or more processes a side: tested on the row's own spread between "
                   "processes, not its input's")


@dataclass(frozen=True)
class Side:
    """One side of a matched row, after normalisation."""

    median: float  # ns, or normalised units
    n: int  # raw samples
    cores: int | None  # cores used, when known
    processes: int = 0  # processes whose medians the row holds (0: not told apart)


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
    test: Test = ""
    low: float | None = None  # the ratio's interval at 1 - alpha (process test only)
    high: float | None = None
    # Batch means only: the p of the runs within each process, before it is
    # widened by how much the comparison's rows say two processes differ.
    p_within: float | None = None
    # With a gate (compare's ``slower_than``): the one-sided p of "slower
    # than the baseline by more than that factor" (pyparbench.compare.slower),
    # by the row's own test; None where the row is not tested.
    slower_p: float | None = None
    # Tested on its own processes (two or more a side): their spread (sigma
    # of ln process median, pyparbench.stats.row_spread), else None.
    own_spread: float | None = None
    # p_value Holm-adjusted over the pair's tested rows: ``significant`` is
    # p_adjusted < alpha (None where the row is not tested).
    p_adjusted: float | None = None


@dataclass
class Pair:
    """The baseline against one other input."""

    baseline: str
    other: str
    rows: list[RowResult] = field(default_factory=list)
    only_baseline: list[str] = field(default_factory=list)
    only_other: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "label: side status (error)"
    # One process a side (batch means), or one run a side (processes): how
    # far the two are apart beyond what each row's runs or processes show,
    # in log units, from the rows (compare.between_spread).
    between_spread: float | None = None


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
    # Each input's spread between processes (pyparbench.stats.input_spread),
    # None for one that never measured a setting in two processes.
    spreads: list[ProcessSpread | None] = field(default_factory=list)
    slower_than: float | None = None  # the gate's factor (1.05 for 5 %), when one was asked


def _cores_used(row: Row, rs: ResultSet) -> int | None:
    if row.threads is None:
        return None
    return min(row.threads, rs.cores) if rs.cores else row.threads


def _peak_at(rs: ResultSet, cores: int | None, precision: str = "fp32") -> float | None:
    """The peak at ``cores`` threads: the largest count measured not above it
    (the smallest measured when all are above; the largest when unknown), as
    pyparbench's roofline picks its ceiling. A bf16 row's is the bf16 dot
    products' where the input measured them, an int8 row's the int8 dot
    products' (GOP/s), else the FMA's (a CPU without them emulates them:
    Peak.compute_gflops)."""
    dots = {"bf16": rs.peak_bf16_gflops, "int8": rs.peak_int8_gops}.get(precision)
    peak = dots or rs.peak_gflops
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
    peak = _peak_at(rs, cores, row.precision)
    if peak is None:
        return None, f"{rs.path}: no measured peak at {cores} thread(s)"
    return peak, ""


def _side(row: Row, rs: ResultSet, factor: float) -> Side:
    assert row.median_ns is not None
    return Side(row.median_ns * factor, len(row.samples_ns), _cores_used(row, rs),
                len(row.processes))


def _compare_rows(a: Row, b: Row, ra: ResultSet, rb: ResultSet, alpha: float,
                  normalize: Normalize, spread_a: ProcessSpread | None,
                  spread_b: ProcessSpread | None, slower_than: float | None
                  ) -> tuple[RowResult, BlockTest | None]:
    fa, why_a = _factor(a, ra, normalize)
    fb, why_b = _factor(b, rb, normalize)
    if fa is None or fb is None:
        return RowResult(a.key, a.label, None, None, None, None, False, why_a or why_b), None
    sa, sb = _side(a, ra, fa), _side(b, rb, fb)
    ratio = sb.median / sa.median
    if spread_a is not None and spread_b is not None and a.processes and b.processes:
        # The unit is the process (pyparbench.stats.spread): its runs
        # are not independent, and processes differ more than runs do.
        pa, pb = [x * fa for x in a.processes], [x * fb for x in b.processes]
        own = None
        if len(pa) >= 2 and len(pb) >= 2:
            # Processes of its own a side (several runs a side, or a
            # setting the recommender confirmed): the row's own spread.
            own = row_spread(pa, pb)
            est = estimate_ratio(pa, pb, own, level=1.0 - alpha)
        else:
            est = estimate_ratio(pa, pb, spread_a, spread_b, level=1.0 - alpha)
        slower = (None if slower_than is None else
                  slower_p_processes(est.ratio, est.low, est.high, est.df, est.level,
                                     slower_than))
        return RowResult(a.key, a.label, sa, sb, ratio, est.p_value, est.p_value < alpha,
                         OWN_SPREAD_NOTE if own else "", "processes", est.low, est.high,
                         slower_p=slower, own_spread=own.sigma if own else None), None
    xa, xb = [x * fa for x in a.samples_ns], [x * fb for x in b.samples_ns]
    if "pytest-benchmark" in (ra.kind, rb.kind):
        # One process a side, its runs in the order they ran: batch means.
        # The p (and the gate's one-sided p) is set later, with every row of
        # the pair (_widen).
        p, why, bt = batch_means_test(xa, xb, a.blocks, b.blocks)
        return RowResult(a.key, a.label, sa, sb, ratio, p, False, why,
                         test="blocks" if p is not None else "", p_within=p), bt
    p, why = u_test(xa, xb, alpha)
    slower = (None if slower_than is None or p is None else
              slower_p_runs(xa, xb, slower_than))
    return RowResult(a.key, a.label, sa, sb, ratio, p, p is not None and p < alpha, why,
                     test="runs" if p is not None else "", slower_p=slower), None


def _widen_runs(pair: Pair, ests: dict[str, tuple[float, float]], alpha: float,
                slower_than: float | None) -> None:
    """Rows tested over processes when a side is one run: their processes
    say how a setting varies within that run, not how far two runs are
    apart (the machine's state from one run to the next, a setting whose
    processes differ more than those the run measured twice). The pair's
    rows share the two runs, so that is estimated from their scatter as for
    batch means (:func:`~pyparbench.compare.between_spread.between_spread`, tau)
    and each row tested against sqrt(se^2 + tau^2); ``ests``: each such
    row's (log ratio, se). Fewer than :data:`MIN_ROWS` rows, or rows whose
    processes explain their scatter (tau 0), keep their t test."""
    from scipy import stats as scipy_stats  # type: ignore[import-untyped]

    if len(ests) < MIN_ROWS:
        return
    tau = between_spread([d for d, _ in ests.values()], [se for _, se in ests.values()])
    pair.between_spread = tau
    if not tau:
        return
    z = float(scipy_stats.norm.isf(alpha / 2.0))
    for i, r in enumerate(pair.rows):
        if r.key not in ests:
            continue
        d, se = ests[r.key]
        half = z * math.sqrt(se * se + tau * tau)
        p = p_with_spread(d, se, tau)
        slower = (None if slower_than is None else
                  p_slower_with_spread(d, se, tau, slower_than))
        pair.rows[i] = replace(r, p_value=p, significant=p < alpha, low=math.exp(d - half),
                               high=math.exp(d + half), slower_p=slower, note=(
            f"one run a side: tested over processes, with the runs {math.expm1(tau):.1%} "
            "apart beyond them (from the rows' scatter)"))


def _process_se(r: RowResult, alpha: float) -> float:
    """The standard error (log units) a row's interval at 1 - alpha holds
    under the normal: its half-width over z, so that the normal test it
    then meets (:func:`_widen_runs`) is as wide as the row's t test was,
    never narrower."""
    assert r.low is not None and r.high is not None
    return se_of_interval(r.low, r.high, 1.0 - alpha)


def _widen(pair: Pair, blocks: dict[str, BlockTest], alpha: float,
           slower_than: float | None) -> None:
    """Batch-means rows (one process a side): each tested against its blocks'
    error and the spread between the two processes that the pair's rows show
    (:mod:`pyparbench.compare.between_spread`), or left untested when too few
    rows tell; with a gate, its one-sided p of "slower by more than
    ``slower_than``" the same way."""
    tested = [blocks[r.key] for r in pair.rows if r.key in blocks]
    if not tested:
        return
    tau = between_spread([t.log_ratio for t in tested], [t.se for t in tested])
    pair.between_spread = tau
    for i, r in enumerate(pair.rows):
        bt = blocks.get(r.key)
        if bt is None:
            continue
        if tau is None:
            pair.rows[i] = replace(r, p_value=None, significant=False, test="", note=(
                f"untested: one process per side, and {len(tested)} rows tested by batch "
                f"means, too few ({MIN_ROWS} needed) to tell how much two processes differ"))
        else:
            p = p_with_spread(bt.log_ratio, bt.se, tau)
            slower = (None if slower_than is None else
                      p_slower_with_spread(bt.log_ratio, bt.se, tau, slower_than))
            pair.rows[i] = replace(r, p_value=p, significant=p < alpha, slower_p=slower, note=(
                f"one process per side: batch means, with the processes {math.expm1(tau):.1%} "
                "apart beyond their runs (from the rows' scatter)"))


def machine_differences(inputs: Sequence[ResultSet]) -> tuple[list[dict[str, Any]], list[str]]:
    """Compared fingerprint fields that differ between inputs (each with its
    value per input), and the inputs that carry no pyparbench fingerprint."""
    diffs = [d.as_dict() for d in fingerprint_differences([rs.fields for rs in inputs])]
    unknown = [rs.path for rs in inputs if rs.machine is None]
    return diffs, unknown


def compare(inputs: Sequence[ResultSet], *, alpha: float = 0.05,
            normalize: Normalize = "none", slower_than: float | None = None) -> Comparison:
    """Compare every input with the first (see the module docstring).
    ``slower_than`` (a factor above 1, 1.05 for a 5 % gate): each tested
    row also gets the one-sided p of being slower than the baseline by more
    than that (:mod:`pyparbench.compare.gate` decides from them).

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
    if slower_than is not None and not (math.isfinite(slower_than) and slower_than > 1):
        raise CompareError(f"slower_than must be a factor above 1, got {slower_than!r}")
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
    spreads = [input_spread(rs) for rs in inputs]
    base = inputs[0]
    pairs = []
    for other, spread in zip(inputs[1:], spreads[1:], strict=True):
        pair = Pair(base.path, other.path)
        blocks: dict[str, BlockTest] = {}
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
                row, bt = _compare_rows(a, b, base, other, alpha, normalize, spreads[0],
                                        spread, slower_than)
                pair.rows.append(row)
                if bt is not None:
                    blocks[row.key] = bt
        _widen(pair, blocks, alpha, slower_than)
        if min(base.runs, other.runs) == 1:
            _widen_runs(pair, {r.key: (math.log(r.ratio), _process_se(r, alpha))
                               for r in pair.rows if r.test == "processes"
                               and r.ratio is not None}, alpha, slower_than)
        _mark(pair, alpha)
        pairs.append(pair)
    unit = {"none": "ns", "per-core": "core-ns", "per-peak": "peak-GFLOP"}[normalize]
    notes = [n for rs in inputs for n in rs.notes]
    if any(s is not None for s in spreads):
        notes += [f"{rs.path}: no setting measured in two processes, so how much its "
                  "processes differ is unknown; its rows are tested on per-run times (U "
                  "test), which reads any difference between two processes as significant"
                  for rs, s in zip(inputs, spreads, strict=True) if s is None]
    singles = [rs.path for rs in inputs if rs.runs == 1]
    if slower_than is not None and singles:
        notes.append(f"one run ({', '.join(singles)}): most rows have one process there, "
                     "and a row whose processes differ more than the others' reads as a "
                     "change (about 1 pair in 12 of identical runs failed the gate on a "
                     "2-core VM); for a gate give each side two or three runs, a folder of "
                     "runs")
    return Comparison(list(inputs), alpha, normalize, unit, diffs, unknown, pairs, notes,
                      spreads, slower_than)


def _mark(pair: Pair, alpha: float) -> None:
    """Each tested row marked significant by its p Holm-adjusted over the
    pair's tested rows: identical code then marks some row in at most alpha
    of comparisons, where p < alpha alone marks alpha of the rows (a few of
    every 48, and more where the rows share a disturbed process)."""
    tested = [i for i, r in enumerate(pair.rows) if r.p_value is not None]
    adjusted = holm([pair.rows[i].p_value or 0.0 for i in tested])
    for i, p in zip(tested, adjusted, strict=True):
        pair.rows[i] = replace(pair.rows[i], p_adjusted=p, significant=p < alpha)


def _one_line(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."
