"""The CPU-load probe the main job plans with: it sees other processes'
work now and leaves out this process's own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pyparbench.cpuload import ForeignLoad, busy_cpus


def test_own_work_is_not_counted() -> None:
    with ForeignLoad() as load:
        x = 0
        for i in range(3_000_000):
            x += i
    # Counted, this process's one busy CPU would be a share 1 / cpus.
    assert x > 0 and load.foreign < 0.5 / (os.cpu_count() or 1), load.foreign


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
