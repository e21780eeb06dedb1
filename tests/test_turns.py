"""Configurations measured in turns (pyparbench.harness.turns): each in its
own fresh process, their timed runs interleaved in time, every failure
recorded with the others going on, resumable as any run of configurations."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

import pyparbench as ppb
from pyparbench import child_process
from pyparbench.harness.runner import MIN_MEASURE_S, TEST_FAULT_ENV, Config
from pyparbench.harness.store import ResultStore
from pyparbench.harness.turns import (
    TURNS,
    measure_in_turns,
    run_configs_in_turns,
    turn_groups,
)
from pyparbench.machine.fingerprint import machine_fingerprint
from pyparbench.resultfiles import read_result
from pyparbench.settings import Settings

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow


@pytest.fixture
def no_fault(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.delenv(TEST_FAULT_ENV, raising=False)
    yield monkeypatch


def _settings() -> list[Settings]:
    cores = ppb.settings.allowed_cores(ppb.topology())
    team = min(cores, 2)
    return [Settings(intra_op=team, affinity="compact"),
            Settings(intra_op=team, affinity="compact", omp_wait=20000),
            Settings(omp_wait="passive")]


def test_each_setting_runs_in_its_own_process_and_their_turns_interleave(
        no_fault: pytest.MonkeyPatch) -> None:
    configs = [Config("mlp-512", 1, s, repeats=3, warmup=1) for s in _settings()]
    got = measure_in_turns(configs, machine=machine_fingerprint())
    assert [r.key for r in got] == [c.key for c in configs]
    assert [r.status for r in got] == ["ok"] * 3, [r.error for r in got]
    for c, r in zip(configs, got, strict=True):
        assert r.ns is not None and len(r.ns) >= c.repeats and r.timing.median > 0
        # About MIN_MEASURE_S of timed runs at least, as a one-process run measures.
        assert sum(r.ns) >= 0.5 * MIN_MEASURE_S * 1e9
        assert r.resolved is not None and r.resolved["intra_op"] == c.settings.intra_op
        cpus = child_process.child_cpus(c.settings)
        if cpus is not None:  # the child was pinned as a one-process run would be
            assert r.resolved["process_cpus"] == sorted(cpus)
        assert len(r.resolved["turns"]) == TURNS
    # The turns take place one at a time, each process's spread over the
    # same stretch: process k's turn t lies between the others' turns t-1 and t+1.
    windows = [(w[0], w[1], k) for k, r in enumerate(got)
               for w in r.resolved["turns"]]  # type: ignore[index]
    windows.sort()
    for (s0, e0, _), (s1, _, _) in zip(windows, windows[1:]):
        assert e0 <= s1, "two processes measured at the same time"
    order = [k for _, _, k in windows]
    for t in range(TURNS):
        assert sorted(order[3 * t:3 * t + 3]) == [0, 1, 2], order
    # Each turn starts with another process: none is always first after a pause.
    assert len({order[3 * t] for t in range(TURNS)}) == 3


def test_a_crash_a_hang_and_a_setting_this_machine_cannot_hold_are_recorded(
        no_fault: pytest.MonkeyPatch) -> None:
    cores = ppb.settings.allowed_cores(ppb.topology())
    ok = Config("mlp-512", 1, Settings(), repeats=2, warmup=0)
    crash = Config("ncf", 1, Settings(), repeats=2, warmup=0)
    too_big = Config("mlp-512", 1, Settings(intra_op=4 * cores, affinity="compact"), repeats=2)
    no_fault.setenv(TEST_FAULT_ENV, "segv:ncf")
    got = measure_in_turns([ok, crash, too_big], machine=machine_fingerprint())
    assert [r.status for r in got] == ["ok", "error", "skipped"]
    assert (got[1].error or "").startswith("the child died of SIGSEGV")
    assert got[2].error
    hang = Config("dlrm", 1, Settings(), repeats=2, warmup=0)
    no_fault.setenv(TEST_FAULT_ENV, "hang:dlrm")
    t0 = time.monotonic()
    got = measure_in_turns([hang, ok], timeout=5, machine=machine_fingerprint())
    assert time.monotonic() - t0 < 90
    assert [r.status for r in got] == ["timeout", "ok"]
    assert "timed out after 5 s" in (got[0].error or "")
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="turns must be an int >= 1"):
            measure_in_turns([ok], turns=bad, machine={})  # type: ignore[arg-type]


def test_groups_are_a_rounds_settings_of_one_model_and_batch() -> None:
    a, b = Settings(), Settings(intra_op=2)
    cs = [Config("mlp-512", 1, a, round=1), Config("mlp-512", 1, b, round=1),
          Config("dlrm", 1, a, round=1), Config("mlp-512", 1, a, round=2),
          Config("mlp-512", 8, a, round=2), Config("mlp-512", 8, b, round=2)]
    assert [[cs.index(c) for c in g] for g in turn_groups(cs)] == [[0, 1], [2], [3], [4, 5]]
    assert turn_groups([]) == []


def test_runs_in_turns_are_stored_at_once_and_resumed(tmp_path: Path,
                                                     no_fault: pytest.MonkeyPatch) -> None:
    store = ResultStore(tmp_path / "results.jsonl")
    a, b = _settings()[:2]
    cs = [Config("mlp-512", 1, a, repeats=2, round=1), Config("mlp-512", 1, b, repeats=2, round=1),
          Config("mlp-512", 1, a, repeats=2, round=2)]
    # One of the first group is in the store already: only the other runs.
    first = list(run_configs_in_turns(cs[:1], store))
    seen: list[tuple[str, bool]] = []
    got = list(run_configs_in_turns(cs, store, on_result=lambda c, r: seen.append(
        (c.key, r is None))))
    assert seen == [(cs[0].key, True), (cs[1].key, False), (cs[2].key, False)]
    assert got[0].key == first[0].key and got[0].ns == first[0].ns
    assert [r.status for r in got] == ["ok"] * 3
    assert len(got[1].resolved["turns"]) == TURNS  # type: ignore[index]
    stored = [read_result("test", r) for r in store.records()]
    assert [r.key for r in stored] == [c.key for c in cs]
    seen.clear()
    again = list(run_configs_in_turns(cs, store, on_result=lambda c, r: seen.append(
        (c.key, r is None))))
    assert all(skipped for _, skipped in seen) and [r.key for r in again] == [c.key for c in cs]
    with pytest.raises(ValueError, match="turns must be an int >= 1"):
        list(run_configs_in_turns(cs, store, turns=0))
    # A configuration of the round outside the pending list is measured alone.
    lone = replace(cs[2], round=3)
    assert [r.status for r in run_configs_in_turns([lone], store)] == ["ok"]


TURNS_SWEEP = """
import json, sys
from pyparbench.harness.runner import Config
from pyparbench.harness.store import ResultStore
from pyparbench.harness.turns import run_configs_in_turns
configs = [Config.from_dict(c) for c in json.loads(sys.argv[2])]
for _ in run_configs_in_turns(configs, ResultStore(sys.argv[1]), timeout=120):
    pass
"""


def _turns_children(parent: int) -> list[int]:
    """The measuring children ``parent`` started (running or stopped)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes()
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"pyparbench.harness.turns" in cmd and ppid == parent:
            out.append(int(proc.name))
    return out


def test_a_run_in_turns_killed_mid_group_leaves_no_child_and_resumes(
        tmp_path: Path, no_fault: pytest.MonkeyPatch) -> None:
    path = tmp_path / "results.jsonl"
    # Settings with long turns (a bigger model, many runs), so the kill meets
    # the group loaded and taking turns, some processes stopped.
    cs = [Config("resnet50", 1, s, repeats=40, warmup=0, round=1) for s in _settings()[:2]]
    proc = subprocess.Popen([sys.executable, "-P", "-c", TURNS_SWEEP, str(path),
                             json.dumps([c.as_dict() for c in cs])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(_turns_children(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    children = _turns_children(proc.pid)
    assert len(children) == 2, "the two measuring children never started"
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # The kernel ends them with their parent (stopped ones too).
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() and
                                               "Z" not in _state(p) for p in children):
        time.sleep(0.2)
    assert not [p for p in children if Path(f"/proc/{p}").exists() and "Z" not in _state(p)]
    # Nothing of the unfinished group was recorded; resuming measures it whole.
    assert not path.exists() or not ResultStore(path).records()
    got = list(run_configs_in_turns(cs, ResultStore(path), turns=2))
    assert [r.status for r in got] == ["ok", "ok"]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"
