"""OpenMP (libgomp) knobs and measurements: the ``omp_wait`` setting, fork/join
and barrier latency, and the threads of the calling thread's team.

The wait policy is process-wide and read once, when libgomp starts, so a
setting is tried in a fresh process whose environment is set before
anything is imported: ``subprocess.run(..., env={**os.environ,
**omp_wait_env("passive")})``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pyparbench._core import threading as _t

OmpWait = str | int | None


def omp_wait_env(policy: OmpWait) -> dict[str, str]:
    """Environment variables for an ``omp_wait`` setting (libgomp).

    Parameters
    ----------
    policy
        ``None`` or ``"default"``: libgomp's defaults (spin a while, then
        sleep); ``"active"``: idle threads spin (``OMP_WAIT_POLICY=active``);
        ``"passive"``: they sleep at once (``OMP_WAIT_POLICY=passive``); an
        int ``n >= 0``: spin ``n`` times before sleeping (``GOMP_SPINCOUNT``).

    Raises
    ------
    ValueError
        Any other value, or a negative count.
    """
    if policy is None or policy == "default":
        return {}
    if policy in ("active", "passive"):
        return {"OMP_WAIT_POLICY": str(policy)}
    if isinstance(policy, int) and not isinstance(policy, bool):
        if policy < 0:
            raise ValueError(f"omp_wait spin count must be >= 0, got {policy}")
        return {"GOMP_SPINCOUNT": str(policy)}
    raise ValueError(f"omp_wait must be 'default', 'active', 'passive' or a spin count, "
                     f"got {policy!r}")


def omp_fork_join(threads: int, *, repeats: int = 1000, warmup: int = 100
                  ) -> npt.NDArray[np.float64]:
    """ns per empty ``omp parallel num_threads(threads)`` region started by the calling thread."""
    return np.asarray(_t.omp_fork_join(threads, repeats, warmup), dtype=np.float64)


def omp_barrier(threads: int, *, repeats: int = 100, warmup: int = 10, inner: int = 100
                ) -> npt.NDArray[np.float64]:
    """ns per ``omp barrier`` of a team of ``threads`` (each repeat: the mean of ``inner``)."""
    return np.asarray(_t.omp_barrier(threads, repeats, warmup, inner), dtype=np.float64)


def omp_gap(threads: int, gap_ns: float, *, repeats: int = 200, warmup: int = 20
            ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(region ns, serial ns) per repeat: ``omp parallel num_threads(threads)``
    regions, each after a serial stretch of about ``gap_ns`` on the calling
    thread, during which the team's idle threads wait as the wait policy
    says (spin, then sleep). A region after a gap longer than the spin
    pays for waking the sleeping threads; a serial stretch longer than
    ``gap_ns`` was slowed by the waiting threads (or by other processes).

    Raises
    ------
    ValueError
        ``gap_ns`` < 0, threads < 1, repeats < 1, warmup < 0.
    """
    region, serial = _t.omp_gap(threads, float(gap_ns), repeats, warmup)
    return np.asarray(region, dtype=np.float64), np.asarray(serial, dtype=np.float64)


def omp_team_tids(threads: int) -> list[int]:
    """OS thread ids of the calling thread's OpenMP team of ``threads``, by thread number.

    libgomp hands the same threads to every non-nested region of one size
    started by one thread; calling this twice shows it.
    """
    return list(_t.omp_team_tids(threads))


def current_tid() -> int:
    """OS thread id of the calling thread."""
    return int(_t.current_tid())


def thread_affinity() -> list[int]:
    """CPUs the calling thread may run on."""
    return list(_t.thread_affinity())
