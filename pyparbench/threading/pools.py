"""The three thread pools of the Library layer, driven from Python.

Every pool owns ``threads`` threads that do all its work; the caller hands
work over and waits (with the GIL released). The work itself is C++ (Python
callables never run on a pool): a random-length hashing workload to check
results against a serial loop, a counting workload to check that no task is
lost or run twice, a failing task to check that errors come back, and the
pool-overhead microbenchmarks.

Kinds:

``"openmp"``
    A driver thread owning an OpenMP team (libgomp, the runtime oneDNN
    uses); ``parallel_for`` is one parallel region, submitted tasks become
    OpenMP tasks.
``"std"``
    One FIFO queue under a mutex, workers asleep on a condition variable
    (the Caffe2 / PyTorch style).
``"eigen"``
    Eigen's non-blocking pool: per-thread lock-free queues, work stealing,
    spinning before sleeping. A task submitted when the chosen queue is full
    (1024 tasks) runs on the submitting thread, as Eigen does.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from pyparbench._core import threading as _t
from pyparbench.choices import POOLS
from pyparbench._checks import as_int, thread_count

KINDS = POOLS  # the pool kinds, as Settings.pool names them
Mode = Literal["parallel_for", "submit"]



def _submit(mode: str) -> bool:
    if mode not in ("parallel_for", "submit"):
        raise ValueError(f"mode must be 'parallel_for' or 'submit', got {mode!r}")
    return mode == "submit"


def _work_arrays(seeds: npt.ArrayLike, iters: npt.ArrayLike
                 ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    s, it = np.asarray(seeds), np.asarray(iters)
    if s.dtype.kind not in "iu" or it.dtype.kind not in "iu":
        raise TypeError(f"seeds and iters must be integer arrays, got {s.dtype} and {it.dtype}")
    if s.ndim != 1 or s.shape != it.shape:
        raise ValueError(f"seeds and iters must be 1-D and of one length, got shapes "
                         f"{s.shape} and {it.shape}")
    return (np.ascontiguousarray(s.astype(np.uint64, copy=False)),
            np.ascontiguousarray(it, dtype=np.int64))


def serial_work(seeds: npt.ArrayLike, iters: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """The pools' test workload in a plain C++ loop: ``iters[i]`` rounds of splitmix64 from ``seeds[i]``."""
    s, it = _work_arrays(seeds, iters)
    return _t.serial_work(s, it)


class Pool:
    """A thread pool of ``kind`` with ``threads`` threads, optionally pinned.

    Parameters
    ----------
    kind
        ``"openmp"``, ``"std"`` or ``"eigen"``.
    threads
        Pool threads (>= 1).
    cpus
        CPUs to pin to: thread ``i`` runs on ``cpus[i % len(cpus)]``
        (typically one pool's list from ``pyparbench.threading.place``).
        None: not pinned.

    Raises
    ------
    ValueError
        Unknown kind, threads < 1, or ``cpus`` empty, naming a CPU twice or a
        CPU this process may not use.
    TypeError
        Arguments of the wrong type.

    Notes
    -----
    ``close()`` (or leaving a ``with`` block, or dropping the last
    reference) runs what is still queued, then stops and joins the threads.
    """

    def __init__(self, kind: str, threads: int, cpus: Sequence[int] | None = None) -> None:
        if not isinstance(kind, str):
            raise TypeError(f"kind must be a string, got {kind!r}")
        if kind not in KINDS:
            raise ValueError(f"unknown pool kind {kind!r}; expected one of {KINDS}")
        threads = thread_count(threads, "threads")
        cpu_list: list[int] = []
        if cpus is not None:
            if isinstance(cpus, (str, bytes)) or not isinstance(cpus, Sequence):
                raise TypeError(f"cpus must be a sequence of ints or None, got {cpus!r}")
            cpu_list = [as_int(c, "a CPU number") for c in cpus]
            if not cpu_list:
                raise ValueError("cpus is empty; pass None for an unpinned pool")
        self._native: Any = _t.Pool(kind, threads, cpu_list)

    # ------------------------------------------------------------ state

    def _pool(self) -> Any:
        if self._native is None:
            raise ValueError("this pool is closed")
        return self._native

    @property
    def kind(self) -> str:
        """``"openmp"``, ``"std"`` or ``"eigen"``."""
        return str(self._pool().kind)

    @property
    def threads(self) -> int:
        """Number of pool threads."""
        return int(self._pool().threads)

    @property
    def cpus(self) -> tuple[int, ...] | None:
        """CPUs the threads are pinned to, None when not pinned."""
        c = self._pool().cpus
        return tuple(c) if c else None

    @property
    def closed(self) -> bool:
        return self._native is None

    def close(self) -> None:
        """Run what is queued, stop and join the threads. Idempotent."""
        self._native = None

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._native is None:
            return "Pool(closed)"
        return f"Pool({self.kind!r}, threads={self.threads}, cpus={self.cpus})"

    # ------------------------------------------------------------- work

    def work(self, seeds: npt.ArrayLike, iters: npt.ArrayLike, *,
             mode: Mode = "parallel_for") -> npt.NDArray[np.uint64]:
        """Run the test workload on the pool: item ``i`` is ``iters[i]`` rounds of
        splitmix64 from ``seeds[i]`` (equal to ``serial_work``).

        ``mode="parallel_for"`` spreads the items over the threads in blocks;
        ``"submit"`` submits one task per item, then joins.
        """
        submit = _submit(mode)
        s, it = _work_arrays(seeds, iters)
        return self._pool().work(s, it, submit)  # type: ignore[no-any-return]

    def count(self, tasks: int, *, submitters: int = 1) -> npt.NDArray[np.int32]:
        """Submit ``tasks`` tasks from ``submitters`` threads at once, join, and
        return how many times each task ran (all ones when nothing is lost or
        duplicated)."""
        tasks, submitters = as_int(tasks, "tasks"), as_int(submitters, "submitters")
        if tasks < 0:
            raise ValueError(f"tasks must be >= 0, got {tasks}")
        if submitters < 1:
            raise ValueError(f"submitters must be >= 1, got {submitters}")
        return np.asarray(self._pool().count(tasks, submitters), dtype=np.int32)

    def fail(self, tasks: int, fail_at: int, *, mode: Mode = "submit") -> None:
        """Run ``tasks`` tasks of which task ``fail_at`` throws a C++
        ``std::runtime_error``: raises RuntimeError("task <fail_at> failed ...")
        from the join (or the parallel_for), after the other tasks ran."""
        submit = _submit(mode)
        self._pool().fail(as_int(tasks, "tasks"), as_int(fail_at, "fail_at"), submit)

    # -------------------------------------------------------- benchmarks

    def bench_submit(self, tasks: int = 100_000, *, repeats: int = 5,
                     warmup: int = 1) -> npt.NDArray[np.float64]:
        """Pool overhead per task: ``tasks`` trivial tasks (an atomic increment
        each) submitted one by one, then a join, timed in C++. Returns ns per
        task for each timed repeat."""
        tasks = as_int(tasks, "tasks")
        ns = self._pool().bench_submit(tasks, as_int(repeats, "repeats"), as_int(warmup, "warmup"))
        return np.asarray(ns, dtype=np.float64) / tasks

    def bench_fork_join(self, *, repeats: int = 1000, warmup: int = 100
                        ) -> npt.NDArray[np.float64]:
        """Fork/join latency: ``parallel_for(threads, trivial)``, ns per call."""
        return np.asarray(
            self._pool().bench_fork_join(as_int(repeats, "repeats"), as_int(warmup, "warmup")),
            dtype=np.float64)
