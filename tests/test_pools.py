"""The openmp, std and eigen pools: same results as a serial loop, no lost or
duplicated tasks, errors from C++ tasks reach Python, clean shutdown."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from pyparbench.threading import KINDS, Pool, serial_work

ALLOWED = sorted(os.sched_getaffinity(0))
M64 = (1 << 64) - 1


def splitmix_rounds(seed: int, iters: int) -> int:
    """Python twin of the C++ workload, to check the serial loop itself."""
    x = seed
    for _ in range(iters):
        x = (x + 0x9E3779B97F4A7C15) & M64
        z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        x = z ^ (z >> 31)
    return x


@pytest.fixture(params=[(k, t) for k in KINDS for t in (1, 2, 3)],
                ids=lambda p: f"{p[0]}-t{p[1]}", scope="module")
def pool(request: pytest.FixtureRequest) -> Pool:
    kind, threads = request.param
    with Pool(kind, threads) as p:
        yield p


def random_work(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    seeds = rng.integers(0, 2**63, size=n, dtype=np.uint64)
    iters = rng.integers(0, 3000, size=n, dtype=np.int64)  # uneven task lengths
    return seeds, iters


def test_serial_loop_matches_python(rng: np.random.Generator) -> None:
    seeds, iters = random_work(rng, 20)
    iters //= 30
    want = [splitmix_rounds(int(s), int(i)) for s, i in zip(seeds, iters)]
    assert serial_work(seeds, iters).tolist() == want


@pytest.mark.parametrize("mode", ["parallel_for", "submit"])
def test_same_results_as_serial(pool: Pool, mode: str, rng: np.random.Generator) -> None:
    for n in (0, 1, pool.threads + 1, 1000):
        seeds, iters = random_work(rng, n)
        got = pool.work(seeds, iters, mode=mode)  # type: ignore[arg-type]
        assert got.dtype == np.uint64
        np.testing.assert_array_equal(got, serial_work(seeds, iters))


@pytest.mark.parametrize("submitters", [1, 4])
def test_no_task_lost_or_run_twice(pool: Pool, submitters: int) -> None:
    for _ in range(3):
        counts = pool.count(20_000, submitters=submitters)
        assert counts.shape == (20_000,)
        assert (counts == 1).all(), np.flatnonzero(counts != 1)[:10]


@pytest.mark.parametrize("mode", ["parallel_for", "submit"])
def test_error_in_a_task_reaches_python(pool: Pool, mode: str, rng: np.random.Generator
                                        ) -> None:
    with pytest.raises(RuntimeError, match="task 37 failed"):
        pool.fail(100, 37, mode=mode)  # type: ignore[arg-type]
    # the pool is still usable, and the error is not raised twice
    seeds, iters = random_work(rng, 50)
    np.testing.assert_array_equal(pool.work(seeds, iters, mode=mode),  # type: ignore[arg-type]
                                  serial_work(seeds, iters))
    assert (pool.count(100) == 1).all()


def test_properties() -> None:
    with Pool("std", 2) as p:
        assert (p.kind, p.threads, p.cpus) == ("std", 2, None)
        assert "std" in repr(p)
    assert p.closed and repr(p) == "Pool(closed)"
    with pytest.raises(ValueError, match="closed"):
        p.count(1)
    p.close()  # idempotent


@pytest.mark.parametrize("kind", KINDS)
def test_pinned_pool_computes_the_same(kind: str, rng: np.random.Generator) -> None:
    with Pool(kind, 2, cpus=[ALLOWED[-1]]) as p:
        assert p.cpus == (ALLOWED[-1],)
        seeds, iters = random_work(rng, 200)
        np.testing.assert_array_equal(p.work(seeds, iters), serial_work(seeds, iters))


def test_bench_methods_return_positive_times() -> None:
    for kind in KINDS:
        with Pool(kind, 1) as p:
            per_task = p.bench_submit(1000, repeats=2, warmup=0)
            assert per_task.shape == (2,) and (per_task > 0).all()
            fj = p.bench_fork_join(repeats=5, warmup=1)
            assert fj.shape == (5,) and (fj > 0).all()


def test_openmp_gap_times_each_region_and_its_serial_stretch() -> None:
    # "openmp" in the name: the TSan run leaves OpenMP teams out (libgomp is
    # not instrumented, so its hand-off of the region's data reads as a race).
    from pyparbench.threading import omp_gap

    for gap in (0.0, 2e4):
        region, serial = omp_gap(min(2, len(ALLOWED)), gap, repeats=7, warmup=1)
        assert region.shape == serial.shape == (7,) and (region > 0).all()
        # The stretch is real work: it takes time when asked for, none when not.
        assert ((serial > 0) if gap else (serial >= 0)).all()
    with pytest.raises(ValueError, match="gap_ns must be >= 0, got -1"):
        omp_gap(1, -1.0)
    with pytest.raises(ValueError, match="threads"):
        omp_gap(0, 0.0)
    with pytest.raises(ValueError, match="repeats"):
        omp_gap(1, 0.0, repeats=0)


# ---------------------------------------------------------------- bad input


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="'tbb'"):
        Pool("tbb", 2)
    with pytest.raises(TypeError, match="None"):
        Pool(None, 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        Pool("std", 0)
    with pytest.raises(TypeError, match="2.0"):
        Pool("std", 2.0)  # type: ignore[arg-type]
    bad = max(ALLOWED) + 1
    for kind in KINDS:
        with pytest.raises(ValueError, match=f"CPU {bad} is not one this process may use"):
            Pool(kind, 1, cpus=[bad])
    with pytest.raises(ValueError, match=f"CPU {ALLOWED[0]} is listed twice"):
        Pool("std", 2, cpus=[ALLOWED[0], ALLOWED[0]])
    with pytest.raises(ValueError, match="empty"):
        Pool("std", 1, cpus=[])
    with pytest.raises(TypeError, match="'0'"):
        Pool("std", 1, cpus="0")  # type: ignore[arg-type]
    with Pool("std", 1) as p:
        with pytest.raises(ValueError, match="mode"):
            p.work([1], [1], mode="map")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"shapes \(2,\) and \(3,\)"):
            p.work([1, 2], [1, 2, 3])
        with pytest.raises(TypeError, match="float64"):
            p.work([1.5], [1])
        with pytest.raises(IndexError, match="fail_at must be in \\[0, 10\\), got 10"):
            p.fail(10, 10)
        with pytest.raises(ValueError, match="tasks must be >= 0, got -1"):
            p.count(-1)
        with pytest.raises(ValueError, match="submitters must be >= 1, got 0"):
            p.count(5, submitters=0)


# ----------------------------------------------------------------- shutdown

SHUTDOWN = """
import sys
from pyparbench.threading import Pool
pools = [Pool("{kind}", t) for t in (1, 2)]
for p in pools:
    p.count(1000, submitters=2)
    try:
        p.fail(50, 3, mode="{mode}")
    except RuntimeError as e:
        assert "task 3 failed" in str(e)
    else:
        sys.exit("no error")
print("done")
{ending}
"""


@pytest.mark.parametrize("ending", ["", "pools[0].fail(10, 1)", "import os; os._exit(0)"],
                         ids=["normal", "uncaught-task-error", "os-exit"])
@pytest.mark.parametrize("mode", ["submit", "parallel_for"])
@pytest.mark.parametrize("kind", KINDS)  # one kind per process: selectable by name
def test_clean_exit_in_a_subprocess(kind: str, ending: str, mode: str) -> None:
    """Pools left open (some with queued work) do not hang the interpreter's exit,
    also when a task error is left uncaught."""
    code = SHUTDOWN.format(kind=kind, mode=mode, ending=ending)
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert "done" in out.stdout, out.stderr
    if "fail" in ending:
        assert out.returncode == 1
        assert "RuntimeError: task 1 failed" in out.stderr
    else:
        assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_close_runs_queued_tasks_and_joins(kind: str) -> None:
    """Closing (here: dropping the last reference) waits for submitted work."""
    code = f"""
import gc
from pyparbench.threading import Pool
p = Pool("{kind}", 2)
n = p._pool()
for _ in range(3):
    assert (p.count(500, submitters=3) == 1).all()
p.close()
del n
gc.collect()
print("closed")
"""
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "closed" in out.stdout, out.stderr
