"""Pinning of kernels and pools, checked by the audit of what actually ran."""

from __future__ import annotations

import os
import subprocess
import sys
import threading as std_threading
import warnings

import numpy as np
import pytest

import pyparbench as ppb
from pyparbench.threading import (
    KINDS,
    Pool,
    TeamRequest,
    ThreadAudit,
    ThreadingMismatch,
    ThreadingMismatchError,
    audit,
    compare,
    omp_team_tids,
    place,
    topology,
)

ALLOWED = sorted(os.sched_getaffinity(0))
two_cpus = pytest.mark.skipif(len(ALLOWED) < 2, reason=f"needs 2 CPUs this process may use "
                                                        f"(os.sched_getaffinity: {ALLOWED})")


def gemm(threads: int) -> tuple[ppb.ops.Gemm, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 96)).astype(np.float32)
    b = rng.standard_normal((96, 96)).astype(np.float32)
    return ppb.ops.Gemm(96, 96, 96, threads=threads), a, b


def process_tids() -> set[int]:
    return {int(t) for t in os.listdir("/proc/self/task")}


def test_libgomp_reuses_the_team_of_a_size() -> None:
    """The premise of pinning inside a region: same master, same size, same threads."""
    first = omp_team_tids(2)
    assert first[0] == ppb.threading.current_tid()
    assert len(set(first)) == 2
    for _ in range(3):
        assert omp_team_tids(2) == first
        ppb.threading.omp_fork_join(2, repeats=3, warmup=0)
    assert omp_team_tids(2) == first


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_compact_on_one_cpu_kernel(threads: int) -> None:
    """Every thread that ran the kernel was allowed on, and seen on, that CPU only."""
    cpu = place(topology(), [ALLOWED[-1]]).pools[0]
    k, a, b = gemm(threads)
    k.pin(list(cpu))  # type: ignore[arg-type]
    assert k.pinned_cpus == [ALLOWED[-1]]
    k.run(a, b)  # the team exists and is pinned
    before = process_tids()
    with audit(k, strict=True) as report:
        out = k.run(a, b)
        k.timeit(a, b, out=out, repeats=2, warmup=1)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    assert report.ok
    recs = report.audit.team(0)
    assert sorted(r.worker for r in recs) == list(range(threads))
    for r in recs:
        assert r.affinity == (ALLOWED[-1],)
        assert set(r.cpus_seen) == {ALLOWED[-1]}
        assert r.omp_team_size == threads
    # oneDNN's regions could only have used threads of the audited team:
    # no thread appeared in the process while it ran.
    assert process_tids() - before == set()
    assert report.audit.tids == set(omp_team_tids(threads))
    # the calling thread got its own mask back
    assert sorted(os.sched_getaffinity(0)) == ALLOWED


def test_compact_placement_on_one_cpu() -> None:
    cpu = place(topology(), "compact", pools=1, threads=1).pools[0]
    assert cpu == (ALLOWED[0],)
    k, a, b = gemm(2)
    k.pin(list(cpu))  # type: ignore[arg-type]
    with audit(k) as report:
        k.run(a, b)
    assert report.audit is not None and report.mismatches == []
    assert report.audit.cpus_seen == {ALLOWED[0]}


def test_unpin_gives_the_team_its_cpus_back() -> None:
    k, a, b = gemm(2)
    k.pin([ALLOWED[-1]])
    k.run(a, b)
    k.unpin()
    assert k.pinned_cpus == []
    with audit(k, strict=True) as report:
        k.run(a, b)
    for r in report.audit.threads:  # type: ignore[union-attr]
        assert list(r.affinity) == ALLOWED


@pytest.mark.parametrize("kind", KINDS)
def test_compact_on_one_cpu_pool(kind: str) -> None:
    with Pool(kind, 2, cpus=[ALLOWED[-1]]) as p, audit(p, strict=True) as report:
        p.count(200)
        p.work(np.arange(64), np.full(64, 100), mode="parallel_for")
    assert report.audit.cpus_seen == {ALLOWED[-1]}  # type: ignore[union-attr]
    for r in report.audit.threads:  # type: ignore[union-attr]
        assert r.affinity == (ALLOWED[-1],) and r.worker in (0, 1)
        assert r.omp_team_size == (2 if kind == "openmp" else 0)


def run_concurrently(*fns: object) -> None:
    errors: list[BaseException] = []

    def wrap(f):  # type: ignore[no-untyped-def]
        try:
            f()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [std_threading.Thread(target=wrap, args=(f,)) for f in fns]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not errors, errors


@two_cpus
@pytest.mark.parametrize("kind", KINDS)
def test_two_pools_of_one_thread_run_on_different_cpus(kind: str) -> None:
    # smt=True: two logical CPUs, SMT siblings or not (a 2-vCPU VM may be one core).
    placement = place(topology(), "compact", pools=2, threads=1, smt=True)
    (c0,), (c1,) = placement.pools  # type: ignore[misc]
    assert c0 != c1
    with Pool(kind, 1, cpus=placement.pools[0]) as p0, \
            Pool(kind, 1, cpus=placement.pools[1]) as p1:
        # 500 tasks: fewer than an Eigen queue holds (1024), so none runs on the
        # submitting thread (which the audit reports as a mismatch)
        with audit(p0, p1, strict=True) as report:
            run_concurrently(lambda: p0.count(500), lambda: p1.count(500))
    a = report.audit
    assert a is not None and a.teams == [0, 1]
    assert {c for r in a.team(0) for c in r.cpus_seen} == {c0}
    assert {c for r in a.team(1) for c in r.cpus_seen} == {c1}


@two_cpus
def test_two_kernels_as_inter_op_workers() -> None:
    """Two caller threads, each owning its OpenMP team, pinned apart."""
    # smt=True: two logical CPUs, SMT siblings or not (a 2-vCPU VM may be one core).
    placement = place(topology(), "compact", pools=2, threads=1, smt=True)
    k0, a, b = gemm(2)
    k1, _, _ = gemm(2)
    k0.pin(list(placement.pools[0]))  # type: ignore[arg-type]
    k1.pin(list(placement.pools[1]))  # type: ignore[arg-type]
    with audit(k0, k1, strict=True) as report:
        run_concurrently(lambda: [k0.run(a, b) for _ in range(5)],
                         lambda: [k1.run(a, b) for _ in range(5)])
    aud = report.audit
    assert aud is not None
    tids0, tids1 = {r.tid for r in aud.team(0)}, {r.tid for r in aud.team(1)}
    assert len(tids0) == len(tids1) == 2 and not tids0 & tids1  # one team per worker
    assert {c for r in aud.team(0) for c in r.cpus_seen} == set(placement.pools[0])  # type: ignore[arg-type]
    assert {c for r in aud.team(1) for c in r.cpus_seen} == set(placement.pools[1])  # type: ignore[arg-type]


# ---------------------------------------------------------------- mismatches


def test_compare_names_each_difference() -> None:
    k, a, b = gemm(2)
    with audit(k) as report:  # unpinned: no CPU to hold it to
        k.run(a, b)
    assert report.mismatches == []
    aud = report.audit
    assert aud is not None
    # A CPU no thread may run on: every thread's affinity (all the allowed
    # CPUs) differs from it, on a 1-CPU machine too, where asking for the one
    # allowed CPU would match an unpinned thread's affinity.
    other = max(ALLOWED) + 1
    asked = [TeamRequest(0, 3, (other,), True, "asked")]
    diffs = compare(asked, aud)
    assert any("OpenMP team of 2 threads, 3 requested" in d for d in diffs)
    assert any(f"requested CPU {other}" in d for d in diffs)
    assert compare([TeamRequest(5, 1, None, False)], aud) == ["team 5: no thread reported work"]
    assert ThreadAudit.from_native([]).threads == ()


def test_warning_by_default_error_when_strict() -> None:
    """A kernel audited but never run is a mismatch: a warning, or an error."""
    k, _, _ = gemm(1)
    with pytest.warns(ThreadingMismatch, match="no thread reported work"):
        with audit(k) as report:
            pass
    assert report.mismatches and not report.ok
    with pytest.raises(ThreadingMismatchError, match="no thread reported work") as e:
        with audit(k, strict=True):
            pass
    assert e.value.mismatches == ["team 0 (Gemm(threads=1)): no thread reported work"]


def test_omp_thread_limit_shows_as_a_mismatch() -> None:
    """A setting that libgomp overrides (OMP_THREAD_LIMIT) is caught, not trusted."""
    code = """
import warnings, numpy as np, pyparbench as ppb
k = ppb.ops.Gemm(8, 8, 8, threads=2)
a = np.ones((8, 8), np.float32)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    with ppb.threading.audit(k):
        k.run(a, a)
print([str(x.message) for x in w if x.category is ppb.threading.ThreadingMismatch])
"""
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert "OpenMP team of 1 threads, 2 requested" in out.stdout


def test_an_exception_in_the_block_is_not_hidden() -> None:
    k, _, _ = gemm(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(KeyError):
            with audit(k):
                raise KeyError("x")
    # detached: later runs do not report into the old recorder
    with audit(k) as report:
        k.run(np.ones((96, 96), np.float32), np.ones((96, 96), np.float32))
    assert report.ok


# ---------------------------------------------------------------- bad input


def test_pin_bad_input() -> None:
    k, _, _ = gemm(1)
    bad = max(ALLOWED) + 1
    with pytest.raises(ValueError, match=f"CPU {bad} is not one this process may use"):
        k.pin([bad])
    with pytest.raises(ValueError, match="empty"):
        k.pin([])
    with pytest.raises(ValueError, match="listed twice"):
        k.pin([ALLOWED[0], ALLOWED[0]])
    with pytest.raises(TypeError):
        k.pin("0")  # type: ignore[arg-type]
    assert k.pinned_cpus == []


def test_audit_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one"):
        with audit():
            pass
    with pytest.raises(TypeError, match="'kernel'"):
        with audit("kernel"):  # type: ignore[arg-type]
            pass
