"""The CPU-load probe the main job plans with: it sees other processes'
work now and leaves out this process's own."""

from __future__ import annotations

import os
import time
import subprocess
import sys

import pytest

from pyparbench.machine.cpuload import ForeignLoad, busy_cpus


def test_own_work_is_not_counted() -> None:
    # Windows of this process's own work beside windows of it asleep, in
    # turn: counted, its one busy CPU would add a share 1 / cpus to the
    # busy windows, cpus being the CPUs this process may use (ForeignLoad's
    # reading, os.sched_getaffinity; not os.cpu_count(), the machine's,
    # which a container or taskset makes larger). Other work on a shared
    # machine falls on both kinds, so the least of each is compared.
    def window(work: bool) -> float:
        with ForeignLoad() as load:
            end = time.monotonic() + 0.3
            while work and time.monotonic() < end:
                sum(range(10_000))
            if not work:
                time.sleep(0.3)
        return load.foreign

    busy, idle = [], []
    for _ in range(3):
        busy.append(window(True))
        idle.append(window(False))
    assert min(busy) < min(idle) + 0.5 / len(os.sched_getaffinity(0)), (busy, idle)


def test_another_process_spinning_is_seen() -> None:
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = busy_cpus(1.0)
    finally:
        spin.kill()
        spin.wait()
    # One CPU spun for the whole second (less scheduling noise).
    assert busy >= 0.6, busy


def test_a_bad_window_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="seconds must be > 0, got 0"):
        busy_cpus(0)
