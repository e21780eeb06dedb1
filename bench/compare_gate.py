"""How often does ``compare`` cry wolf on one machine, and does it still see
a real slowdown? The false-positive and detection rates of the regression
gate and of the per-row significance, measured on real runs.

    python bench/compare_gate.py folders [--runs 6] [--out DIR] [--reuse]
    python bench/compare_gate.py pytest  [--runs 4] [--out DIR] [--reuse]
                                         [-k "fc_packed or small_maps"] [--per-side K]

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
  significantly slower (detection, target at least 90 %);
- (pytest) with a real thread-scaling change: the second run's t2 rows
  given its own t1 rows' times, as if it had lost a CPU (under ``taskset -c
  0`` the plugin skips every t2 row: it cannot pin 2 threads on 1 CPU); the
  share of those at least 1.5x slower that is marked significant.

``--per-side K``: each side is K runs read together, as a folder of runs
is (a folder of results folders, each row with every run's processes, or
of pytest-benchmark files, each file a process:
:func:`pyparbench.resultfiles.merge_runs`); the pairs are disjoint groups
of K runs (at most 20 of them).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pyparbench.compare import compare, judge
from pyparbench.resultfiles import load, merge_runs
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
    return _with_rows(rs, {**rs.rows, key: slow})


def _with_rows(rs: ResultSet, rows: dict[str, Any]) -> ResultSet:
    groups = [r.processes for r in rows.values() if len(r.processes) >= 2]
    return dataclasses.replace(rs, rows=rows, process_groups=groups)


def one_cpu_less(rs: ResultSet) -> ResultSet:
    """``rs`` with each t2 row's times replaced by its t1 row's."""
    rows = dict(rs.rows)
    for key, row in rs.rows.items():
        one = rs.rows.get(key.replace("[t2-", "[t1-"))
        if "[t2-" in key and one is not None:
            rows[key] = dataclasses.replace(one, key=key, label=row.label, name=row.name)
    return _with_rows(rs, rows)


def sides(sets: list[ResultSet], per_side: int) -> list[tuple[ResultSet, ResultSet]]:
    """The pairs compared: every ordered pair of runs, or with ``per_side``
    K > 1, up to 20 pairs of disjoint groups of K runs, each read as one."""
    if per_side == 1:
        return [(sets[x], sets[y]) for x, y in itertools.permutations(range(len(sets)), 2)]
    rng = random.Random(0)
    groups = list(itertools.combinations(range(len(sets)), per_side))
    rng.shuffle(groups)
    out = []
    for g in groups[:20]:
        rest = [i for i in range(len(sets)) if i not in g]
        other = rng.sample(rest, per_side)
        out.append(tuple(merge_runs(Path(f"side{i}"), [sets[j] for j in side])
                         for i, side in enumerate((g, other))))
    return out  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=("folders", "pytest"))
    ap.add_argument("--runs", type=int, default=None, help="default 6 folders, 4 pytest runs")
    ap.add_argument("--out", default="compare-gate", help="where the runs go")
    ap.add_argument("--reuse", action="store_true", help="take the runs already in --out")
    ap.add_argument("-k", dest="select", default="fc_packed or small_maps",
                    help="the bench operator tests of a pytest run")
    ap.add_argument("--per-side", type=int, default=1, metavar="K",
                    help="K runs a side read as one input, as a folder of runs is "
                         "(default 1)")
    ap.add_argument("--one-cpu", action="store_true",
                    help="also as many runs under taskset -c 0: each against each run of "
                         "this machine, the rows at least 1.5x slower there and how many "
                         "are found")
    ap.add_argument("--pytest-args", default="",
                    help="more options for each pytest run (e.g. '--benchmark-min-rounds 200')")
    a = ap.parse_args()
    runs = a.runs or (6 if a.kind == "folders" else 4)
    if runs < 2:
        ap.error(f"--runs must be at least 2, got {runs}")
    if a.per_side < 1 or 2 * a.per_side > runs:
        ap.error(f"--per-side {a.per_side}: two sides of it must fit in --runs {runs}")
    sets = [load(p) for p in make_runs(a.kind, runs, Path(a.out), a.select, a.reuse,
                                         a.pytest_args.split())]

    pairs = gate_fp = rows = rows_fp = 0
    planted_rows = caught = found = scaling = scaled_found = 0
    for base, other in sides(sets, a.per_side):
        c = compare([base, other], slower_than=GATE)
        pairs += 1
        gate_fp += judge(c).failed
        tested = [r for r in c.pairs[0].rows if r.p_value is not None]
        rows += len(tested)
        rows_fp += sum(r.significant for r in tested)
        for r in c.pairs[0].rows:
            if r.ratio is None:
                continue
            cp = compare([base, planted(other, r.key)], slower_than=GATE)
            j = next(j for j, q in enumerate(cp.pairs[0].rows) if q.key == r.key)
            row = cp.pairs[0].rows[j]
            planted_rows += 1
            caught += judge(cp).verdicts[0][j].slower
            found += bool(row.significant and row.ratio is not None and row.ratio > 1)
        if a.kind == "pytest":
            for r in compare([base, one_cpu_less(other)]).pairs[0].rows:
                if "[t2-" in r.key and r.ratio is not None and r.ratio >= PLANT:
                    scaling += 1
                    scaled_found += r.significant
    side = "runs" if a.per_side == 1 else f"sides of {a.per_side} runs"
    print(f"{a.kind}: {runs} runs, {pairs} ordered pairs of {side}, same code and machine")
    print(f"  gate --fail-slower 5 %: failed {gate_fp} of {pairs} pairs "
          f"({gate_fp / pairs:.1%}; target at most 5 %)")
    if rows:
        print(f"  rows marked significant: {rows_fp} of {rows} tested "
              f"({rows_fp / rows:.1%}; target at most 5 %)")
    if planted_rows:
        print(f"  {PLANT}x planted on one row: the gate failed {caught} of {planted_rows} "
              f"({caught / planted_rows:.1%}); marked significantly slower {found} "
              f"({found / planted_rows:.1%}; target at least 90 %)")
    if scaling:
        print(f"  a CPU less (t2 rows given their t1 times): {scaling} rows {PLANT}x slower or "
              f"more, {scaled_found} marked significant ({scaled_found / scaling:.1%}; target "
              "at least 90 %)")
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
              f"({hit / max(real, 1):.1%}); the gate failed {gates} of {runs * runs} pairs")


if __name__ == "__main__":
    main()
