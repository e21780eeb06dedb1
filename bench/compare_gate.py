"""How often does ``compare`` cry wolf on one machine, and does it still see
a real slowdown? The false-positive and detection rates of the regression
gate and of the per-row significance, measured on real runs.

    python bench/compare_gate.py folders [--runs 6] [--out DIR] [--reuse]
    python bench/compare_gate.py pytest  [--runs 4] [--out DIR] [--reuse]
                                         [-k "fc_packed or small_maps"]

``folders``: ``--runs`` runs of one quick main-job configuration (the
Criteo-Kaggle-like DLRM at batch 1 with the recommender, as the gate's test
runs it), each its own results folder. ``pytest``: ``--runs`` runs of the
bench suite's operator benchmarks selected by ``-k``, each saved with
``--benchmark-save-data`` (one process a side: the batch means of
pyparbench's plugin). ``--reuse`` takes the runs already in ``--out``.

Every ordered pair of runs (same code, same machine) is compared twice:

- as it is: the gate ``--fail-slower 5%`` must pass (its false-positive rate
  over pairs, target at most 1 in 20), and at most alpha (5 %) of the rows
  may be marked significant (the per-row false-positive rate);
- with a 1.5x slowdown planted on one row of the second run at a time (each
  of its process medians and runs times 1.5, so its noise stays the run's
  own): the share of such rows the gate fails, and the share marked
  significantly slower (detection, target at least 90 %).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import subprocess
import sys
import time
from pathlib import Path

from pyparbench.compare import compare, judge
from pyparbench.resultfiles import load
from pyparbench.resultfiles.rows import ResultSet

SUITE = ("--quick", "--models", "dlrm-kaggle", "--batches", "1", "--no-operators",
         "--no-frameworks", "--repeats", "3")
PLANT = 1.5
GATE = 1.05


def make_runs(kind: str, runs: int, out: Path, select: str, reuse: bool,
              extra: list[str], one_cpu: bool = False) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    name = "one-cpu" if one_cpu else "run"
    prefix = ["taskset", "-c", "0"] if one_cpu else []
    for i in range(runs):
        if kind == "folders":
            path = out / f"{name}{i}"
            # -P: from a checkout, the installed pyparbench, not the folder's own.
            cmd = [*prefix, sys.executable, "-P", "-m", "pyparbench", "run", *SUITE, "--out",
                   str(path)]
            done = path / "summary.json"
        else:
            path = out / f"{name}{i}.json"
            cmd = [*prefix, sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   str(Path(__file__).with_name("test_bench_ops.py")), "-k", select,
                   "--benchmark-only", "--benchmark-save-data", f"--benchmark-json={path}",
                   *extra]
            done = path
        if not (reuse and done.exists()):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            print(f"{name} {i + 1} of {runs}: {time.perf_counter() - t:.0f} s", flush=True)
        paths.append(path)
    return paths


def planted(rs: ResultSet, key: str) -> ResultSet:
    """``rs`` with row ``key`` made PLANT times slower, run by run."""
    row = rs.rows[key]
    slow = dataclasses.replace(
        row, median_ns=None if row.median_ns is None else row.median_ns * PLANT,
        samples_ns=tuple(s * PLANT for s in row.samples_ns),
        processes=tuple(p * PLANT for p in row.processes))
    return dataclasses.replace(rs, rows={**rs.rows, key: slow})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=("folders", "pytest"))
    ap.add_argument("--runs", type=int, default=None, help="default 6 folders, 4 pytest runs")
    ap.add_argument("--out", default="compare-gate", help="where the runs go")
    ap.add_argument("--reuse", action="store_true", help="take the runs already in --out")
    ap.add_argument("-k", dest="select", default="fc_packed or small_maps",
                    help="the bench operator tests of a pytest run")
    ap.add_argument("--one-cpu", action="store_true",
                    help="also as many runs under taskset -c 0: each against each run of "
                         "this machine, the rows at least 1.5x slower there (the real "
                         "thread-scaling changes) and how many are found")
    ap.add_argument("--pytest-args", default="",
                    help="more options for each pytest run (e.g. '--benchmark-min-rounds 200')")
    a = ap.parse_args()
    runs = a.runs or (6 if a.kind == "folders" else 4)
    if runs < 2:
        ap.error(f"--runs must be at least 2, got {runs}")
    sets = [load(p) for p in make_runs(a.kind, runs, Path(a.out), a.select, a.reuse,
                                         a.pytest_args.split())]

    pairs = gate_fp = rows = rows_fp = 0
    planted_rows = caught = found = 0
    for x, y in itertools.permutations(range(runs), 2):
        c = compare([sets[x], sets[y]], slower_than=GATE)
        pairs += 1
        gate_fp += judge(c).failed
        tested = [r for r in c.pairs[0].rows if r.p_value is not None]
        rows += len(tested)
        rows_fp += sum(r.significant for r in tested)
        for r in c.pairs[0].rows:
            if r.ratio is None:
                continue
            cp = compare([sets[x], planted(sets[y], r.key)], slower_than=GATE)
            j = next(j for j, q in enumerate(cp.pairs[0].rows) if q.key == r.key)
            row = cp.pairs[0].rows[j]
            planted_rows += 1
            caught += judge(cp).verdicts[0][j].slower
            found += bool(row.significant and row.ratio is not None and row.ratio > 1)
    print(f"{a.kind}: {runs} runs, {pairs} ordered pairs of runs, same code and machine")
    print(f"  gate --fail-slower 5 %: failed {gate_fp} of {pairs} pairs "
          f"({gate_fp / pairs:.1%}; target at most 5 %)")
    if rows:
        print(f"  rows marked significant: {rows_fp} of {rows} tested "
              f"({rows_fp / rows:.1%}; target at most 5 %)")
    if planted_rows:
        print(f"  {PLANT}x planted on one row: the gate failed {caught} of {planted_rows} "
              f"({caught / planted_rows:.1%}); marked significantly slower {found} "
              f"({found / planted_rows:.1%}; target at least 90 %)")
    if a.one_cpu:
        ones = [load(p) for p in make_runs(a.kind, runs, Path(a.out), a.select, a.reuse,
                                           a.pytest_args.split(), one_cpu=True)]
        real = hit = gates = 0
        for base, one in itertools.product(sets, ones):
            c = compare([base, one], slower_than=GATE)
            slow = [r for r in c.pairs[0].rows if r.ratio is not None and r.ratio >= PLANT]
            real += len(slow)
            hit += sum(r.significant for r in slow)
            gates += judge(c).failed
        print(f"  under taskset -c 0 against this machine ({runs * runs} pairs): {real} rows "
              f"{PLANT}x slower or more, {hit} marked significant "
              f"({hit / max(real, 1):.1%}; target at least 90 %); the gate failed "
              f"{gates} of {runs * runs} pairs")


if __name__ == "__main__":
    main()
