"""Compare results across runs and machines: medians, ratios, a U test, fingerprints.

The package: ``match`` (rows matched and normalised, :func:`compare`),
``utest`` (the U test), ``batch_means`` and ``calibrate`` (one process a
side), ``text`` (terminal tables, JSON), ``html`` (a page with plots).

The first input is the baseline; every other input is compared with it.
Rows are matched by identity (model, batch and settings, a preset by its
name, a framework's run apart from the executor's; a pytest-benchmark test
by its full name with its parameters; a summary's operator scaling by shape
and threads; its decoder generation rows are left out). For each matched
row: both medians and the ratio other / baseline (of latencies, so below 1
means the other is faster), tested one of three ways:

* the unit is the process where both inputs allow it
  (:mod:`pyparbench.stats.spread`): a row's figure is the median of
  its processes' medians; the log ratio is tested against each input's
  spread between processes (pooled over every setting it measured in two or
  more processes: confirmation rounds, a setting under two names) with
  Student's t, which also gives the ratio's interval at 1 - alpha. Per-run
  times within a process are not independent and processes differ more
  than runs do: tested per run, two runs of the same suite on one machine
  marked most rows significant.
* pytest-benchmark files (one process a side): batch means of blocks of
  runs (:mod:`pyparbench.compare.batch_means`), with the spread between
  the two processes estimated from the rows of the comparison added to
  each row's error (:mod:`pyparbench.compare.between_spread`); fewer than 8
  rows tested, and the rows are untested;
* else (our older folders, which never measured a setting twice), the
  two-sided Mann-Whitney U test of the two sets
  of per-run times (:func:`scipy.stats.mannwhitneyu`), which needs at least
  :data:`MIN_SAMPLES` each and enough that a p below alpha can occur at
  all (with n1 and n2 samples the smallest two-sided p is
  2 / C(n1 + n2, n1)); otherwise the row says so.

A row is marked significant when its p, Holm-adjusted over the pair's
tested rows (``p_adjusted``), is below alpha: on identical code some row
is marked in at most alpha of comparisons, not alpha of the rows.

``gate`` is the regression gate of ``--fail-slower PCT`` (one-sided tests
of "slower beyond PCT", Holm's correction over the rows); ``names`` the
inputs' letters; the terminal tables show short row keys with the settings
in a legend (:mod:`pyparbench.report.legend`).

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
    results' ``summary.json``. A bf16 row's peak is the bf16 dot products',
    an int8 row's the int8 dot products' (GOP/s), where measured.
"""

from __future__ import annotations

from pyparbench.compare.match import (
    NORMALIZE,
    Comparison,
    CompareError,
    Normalize,
    Pair,
    RowResult,
    Side,
    compare,
    machine_differences,
)
from pyparbench.compare.gate import Gate, Verdict, judge
from pyparbench.compare.input_names import input_names
from pyparbench.compare.text import dumps, format_time, print_text, to_json
from pyparbench.compare.utest import MIN_SAMPLES, smallest_p_at_least, u_test
from pyparbench.stats import holm

__all__ = ["MIN_SAMPLES", "NORMALIZE", "Comparison", "CompareError", "Gate", "Normalize", "Pair",
           "RowResult", "Side", "Verdict", "compare", "dumps", "format_time", "holm",
           "input_names", "judge", "machine_differences", "print_text", "smallest_p_at_least",
           "to_json", "u_test"]
