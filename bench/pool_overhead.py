"""The study's pool-overhead experiment, and OpenMP fork/join latency per wait policy.

  python bench/pool_overhead.py                  # both tables, markdown
  python bench/pool_overhead.py --tasks 20000 --repeats 3 --json

Table 1, per pool kind (openmp, std, eigen) and pool size P: the overhead per
task of `tasks` trivial tasks (one atomic increment each) submitted one by
one and joined, and the fork/join latency of the pool's parallel_for over P
trivial items.

Table 2, per omp_wait setting (OMP_WAIT_POLICY active/passive, GOMP_SPINCOUNT
values) and team size: the latency of an empty OpenMP parallel region started
by the calling thread (fork/join) and of one barrier inside a region.

Every configuration runs in a fresh subprocess (this file with --child):
the wait policy is process-wide and read once by libgomp, and a pool's idle
threads (which may spin) must not steal CPU from the next measurement. All
timing loops run in C++; each figure is the median over repeats, with the
interquartile range beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
from pyparbench.cli._common import positive_int

KINDS = ("openmp", "std", "eigen")
WAITS: tuple[str | int, ...] = ("default", "active", "passive", 0, 10_000, 1_000_000)


# ------------------------------------------------------------ measurements


def stats(ns: Any) -> dict[str, float]:
    """Median and interquartile range of per-repeat figures (ns)."""
    a = np.asarray(ns, dtype=np.float64)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {"median": float(med), "q1": float(q1), "q3": float(q3), "n": int(a.size)}


def measure_pool(kind: str, threads: int, tasks: int, repeats: int,
                 fork_join_repeats: int) -> dict[str, Any]:
    """Per-task overhead and fork/join latency of one pool, in this process."""
    from pyparbench.threading import Pool

    with Pool(kind, threads) as p:
        per_task = p.bench_submit(tasks, repeats=repeats, warmup=1)
        fork_join = p.bench_fork_join(repeats=fork_join_repeats, warmup=fork_join_repeats // 10)
    return {"kind": kind, "threads": threads, "tasks": tasks,
            "per_task_ns": stats(per_task), "fork_join_ns": stats(fork_join)}


def measure_omp(threads: int, repeats: int) -> dict[str, Any]:
    """Fork/join and barrier latency of this process's OpenMP runtime."""
    from pyparbench.threading import omp_barrier, omp_fork_join

    return {"threads": threads,
            "fork_join_ns": stats(omp_fork_join(threads, repeats=repeats,
                                                warmup=repeats // 10)),
            "barrier_ns": stats(omp_barrier(threads, repeats=max(1, repeats // 10),
                                            warmup=2, inner=100))}


# ----------------------------------------------------------- subprocesses


def run_child(args: list[str], env_extra: dict[str, str] | None = None,
              timeout: float = 300) -> Any:
    """Run this file with --child ... in a fresh interpreter; its JSON result."""
    env = {**os.environ, **(env_extra or {})}
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *args],
                         capture_output=True, text=True, env=env, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"child {args} failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def pool_table(threads: list[int], tasks: int, repeats: int, fj_repeats: int
               ) -> list[dict[str, Any]]:
    return [run_child(["pool", kind, str(t), str(tasks), str(repeats), str(fj_repeats)])
            for kind in KINDS for t in threads]


def omp_table(threads: list[int], repeats: int, waits: tuple[str | int, ...] = WAITS
              ) -> list[dict[str, Any]]:
    from pyparbench.threading import omp_wait_env

    rows = []
    for wait in waits:
        env = omp_wait_env(wait)
        for t in threads:
            row = run_child(["omp", str(t), str(repeats)], env)
            row["omp_wait"] = wait
            row["env"] = " ".join(f"{k}={v}" for k, v in env.items()) or "(none)"
            rows.append(row)
    return rows


# ---------------------------------------------------------------- output


def fmt(s: dict[str, float]) -> str:
    return f"{s['median']:,.0f} [{s['q1']:,.0f}-{s['q3']:,.0f}]"


def context() -> dict[str, Any]:
    """What the figures depend on: the CPUs, the load, the OpenMP runtime."""
    import platform

    from pyparbench.machine.info import info

    d = info()
    return {"cpu": platform.processor() or platform.machine(),
            "allowed_cpus": d["cpus"]["allowed"], "physical_cores": d["cpus"]["physical_cores"],
            "openmp": d["openmp"]["library"], "load_average": list(os.getloadavg())}


def print_tables(pools: list[dict[str, Any]], omp: list[dict[str, Any]], tasks: int,
                 ctx: dict[str, Any]) -> None:
    load = ", ".join(f"{x:.2f}" for x in ctx["load_average"])
    print(f"Machine: CPUs {ctx['allowed_cpus']} ({ctx['physical_cores']} physical cores), "
          f"{ctx['openmp']}, load average {load} at start.\n")
    print(f"Pool overhead ({tasks:,} trivial tasks submitted then joined; "
          "fork/join = parallel_for over P items). ns: median [IQR]\n")
    print("| pool | P | per task (ns) | fork/join (ns) |")
    print("|---|---|---|---|")
    for r in pools:
        print(f"| {r['kind']} | {r['threads']} | {fmt(r['per_task_ns'])} | "
              f"{fmt(r['fork_join_ns'])} |")
    print("\nOpenMP (libgomp) region fork/join and barrier latency per omp_wait setting. "
          "ns: median [IQR]\n")
    print("| omp_wait | environment | threads | fork/join region (ns) | barrier (ns) |")
    print("|---|---|---|---|---|")
    for r in omp:
        print(f"| {r['omp_wait']} | {r['env']} | {r['threads']} | {fmt(r['fork_join_ns'])} | "
              f"{fmt(r['barrier_ns'])} |")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        what, rest = argv[1], argv[2:]
        if what == "pool":
            kind, t, tasks, repeats, fj = rest
            res = measure_pool(kind, int(t), int(tasks), int(repeats), int(fj))
        else:
            t, repeats = rest
            res = measure_omp(int(t), int(repeats))
        print(json.dumps(res))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=positive_int("--threads"), nargs="+",
                   default=[1, 2], help="pool sizes P")
    p.add_argument("--tasks", type=positive_int("--tasks"),
                   default=100_000, help="tasks per repeat")
    p.add_argument("--repeats", type=positive_int("--repeats"),
                   default=7, help="timed repeats of the task batch")
    p.add_argument("--fork-join-repeats", type=positive_int("--fork-join-repeats"), default=2000,
                   help="timed fork/join calls (and OpenMP regions)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = p.parse_args(argv)
    ctx = context()
    pools = pool_table(args.threads, args.tasks, args.repeats, args.fork_join_repeats)
    omp = omp_table(args.threads, args.fork_join_repeats)
    if args.json:
        json.dump({"context": ctx, "pools": pools, "omp": omp}, sys.stdout, indent=1)
        print()
    else:
        print_tables(pools, omp, args.tasks, ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
