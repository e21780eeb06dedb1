"""A thread's /proc stat line, read in one place."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pyparbench.frameworks.proc_audit import parse_task_stat, read_task_stat


def test_a_thread_stat_line_keeps_a_name_with_spaces_and_parentheses() -> None:
    stat = parse_task_stat("4242 (pool (worker) 3) R 1 2 3")
    assert stat.name == "pool (worker) 3"
    assert stat.state == "R" and stat.fields == ("R", "1", "2", "3")
    with pytest.raises(ValueError, match="not a /proc task stat line: '4242 R'"):
        parse_task_stat("4242 R")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_this_thread_reads_as_running_and_a_gone_thread_as_none() -> None:
    stat = read_task_stat("self", threading.get_native_id())
    assert stat is not None and stat.state == "R"  # it is reading its own stat
    assert stat.name == Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text(
        ).strip()
    assert read_task_stat(os.getpid(), 2**22 + 1) is None  # above any pid_max
