"""Thread-pool overhead benchmarks (the study's thread-pool library layer).

  pytest bench/test_bench_pools.py --benchmark-group-by=group
  pytest bench/test_bench_pools.py --benchmark-disable     # smoke test (CI)

The timing loops are C++ (Pool.bench_submit / bench_fork_join); pytest-benchmark
times the call and `extra_info` carries the C++ figures. For clean numbers,
one fresh process per configuration, use `python bench/pool_overhead.py`.
Every benchmark also checks that no task was lost.
"""

from __future__ import annotations

import numpy as np
import pytest

from pool_overhead import measure_omp, omp_table, pool_table
from pyparbench.threading import KINDS, Pool, omp_fork_join

pytestmark = pytest.mark.ppb_threads(1, 2)  # --ppb-threads overrides it


@pytest.mark.parametrize("kind", KINDS)
def test_submit_overhead(benchmark, kind: str, ppb_threads: int) -> None:  # type: ignore[no-untyped-def]
    tasks = 10_000
    with Pool(kind, ppb_threads) as pool:
        benchmark.group = "pool: 10k trivial tasks, submit + join"
        per_task = benchmark.pedantic(pool.bench_submit, args=(tasks,),
                                      kwargs={"repeats": 1, "warmup": 0}, rounds=5)
        benchmark.extra_info["ns_per_task"] = float(np.median(per_task))
        assert (pool.count(tasks) == 1).all()


@pytest.mark.parametrize("kind", KINDS)
def test_fork_join_latency(benchmark, kind: str, ppb_threads: int) -> None:  # type: ignore[no-untyped-def]
    with Pool(kind, ppb_threads) as pool:
        benchmark.group = "pool: parallel_for fork/join"
        ns = benchmark(pool.bench_fork_join, repeats=20, warmup=2)
        benchmark.extra_info["ns_per_fork_join"] = float(np.median(ns))
        assert ns.shape == (20,) and (ns > 0).all()


def test_omp_region_latency(benchmark, ppb_threads: int) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "openmp: empty parallel region"
    ns = benchmark(omp_fork_join, ppb_threads, repeats=20, warmup=2)
    benchmark.extra_info["ns_per_region"] = float(np.median(ns))
    assert (ns > 0).all()


def test_subprocess_runner_smoke() -> None:
    """The table script's fresh-process runner, at a tiny size."""
    pools = pool_table([1], tasks=200, repeats=1, fj_repeats=10)
    assert [r["kind"] for r in pools] == list(KINDS)
    assert all(r["per_task_ns"]["median"] > 0 for r in pools)
    omp = omp_table([2], repeats=20, waits=("passive", 0))
    assert [r["env"] for r in omp] == ["OMP_WAIT_POLICY=passive", "GOMP_SPINCOUNT=0"]
    assert measure_omp(1, 10)["barrier_ns"]["n"] == 1
