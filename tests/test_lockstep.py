"""Runtimes in lockstep (pyparbench.frameworks.lockstep): each in its own
child, one timed run each in turn; the paired ratio and its interval."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

from pyparbench.frameworks import Contender, LockstepResult, ModelRef, run_lockstep
from pyparbench.frameworks.child import HOOK_ENV
from pyparbench.frameworks.lockstep import median_interval, running_threads, wait_until_idle
from pyparbench.settings import Settings

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

FAST = ModelRef("mlp-512", 1, kwargs={"layers": 1})
ONE = Settings(intra_op=1)
# Skipped without onnx and onnxruntime, and marked so that CI runs them again
# against the oldest onnxruntime declared (.ci/oldest onnxruntime: -m onnxruntime).
ONNX_MARKS = (pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None,
    reason="onnxruntime or onnx is not installed"), pytest.mark.onnxruntime)


def needs_onnx(test: Any) -> Any:
    for mark in ONNX_MARKS:
        test = mark(test)
    return test


def _binom_cdf(k: int, n: int) -> float:
    return sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n


@pytest.mark.parametrize("n", [6, 7, 20, 31, 100])
def test_median_interval_is_the_binomial_order_statistics(n: int) -> None:
    lo, hi = median_interval(n)
    assert hi == n - 1 - lo
    # The lower bound leaves at most 2.5 % below it, one more sample would not.
    assert _binom_cdf(lo, n) <= 0.025 < _binom_cdf(lo + 1, n)
    assert median_interval(n, 0.5)[0] >= lo


def test_median_interval_covers_the_median_as_stated() -> None:
    rng = np.random.default_rng(3)
    n, trials, hits = 25, 4000, 0
    lo, hi = median_interval(n)
    for _ in range(trials):
        x = np.sort(rng.lognormal(0.0, 0.5, n))  # true median 1
        hits += x[lo] <= 1.0 <= x[hi]
    assert hits / trials >= 0.94


def test_median_interval_of_few_samples_is_their_range() -> None:
    assert median_interval(5) == (0, 4)
    assert median_interval(1) == (0, 0)
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        median_interval(0)
    with pytest.raises(ValueError, match="confidence must be in"):
        median_interval(10, 1.0)


def test_paired_ratio_cancels_a_slow_spell_shared_by_both() -> None:
    rng = np.random.default_rng(0)
    spell = rng.choice([1.0, 1.6], size=40)  # the machine's speed, step by step
    a = (10.0 * spell * rng.uniform(0.99, 1.01, 40)).tolist()
    b = (12.5 * spell * rng.uniform(0.99, 1.01, 40)).tolist()
    r = LockstepResult(["a", "b"], {"a": a, "b": b}).ratio("a", "b")
    assert r.steps == 40 and r.a_faster == 40
    assert r.low <= r.median <= r.high
    assert 1.22 < r.low and r.high < 1.28
    assert "a vs b: x1.2" in str(r)
    with pytest.raises(KeyError, match="no contender 'c'"):
        LockstepResult(["a", "b"], {"a": a, "b": b}).ratio("a", "c")
    with pytest.raises(ValueError, match="no completed steps"):
        LockstepResult(["a", "b"], {"a": [], "b": []}).ratio("a", "b")


@needs_onnx
def test_native_and_onnxruntime_take_turns() -> None:
    seen: list[tuple[int, int]] = []
    res = run_lockstep(FAST, [Contender("native", settings=ONE),
                              Contender("onnxruntime", "all", ONE)],
                       steps=5, warmup=1, gap_s=0.0, progress=lambda i, n: seen.append((i, n)))
    assert res.errors == {}
    assert res.steps == 5 and seen[-1] == (5, 5)
    for label in ("native", "onnxruntime/all"):
        ns = res.ns[label]
        assert len(ns) == 5 and all(v > 0 for v in ns)
        job = res.answers[label].job
        assert job.ok and job.latency["n"] == 5
        assert list(job.ns) == pytest.approx(ns, abs=1.0)  # the child's own record agrees
        assert len(res.settle_s[label]) == 5 and all(0 <= w <= 1.5 for w in res.settle_s[label])
    r = res.ratio("native", "onnxruntime/all")
    assert r.steps == 5 and 0 < r.low <= r.median <= r.high
    assert res.as_dict()["settle_s"] == res.settle_s


_SPIN_THEN_SLEEP = ("import sys, time\n"
                    "t = time.monotonic()\n"
                    "while time.monotonic() - t < 0.3: pass\n"
                    "print('idle', flush=True)\n"
                    "time.sleep(30)\n")


@pytest.mark.skipif(running_threads(os.getpid()) is None, reason="no /proc/PID/task")
def test_the_next_run_waits_until_the_others_stop_spinning() -> None:
    """A child still spinning (a pool after its run) is waited for until it
    sleeps; a sleeping one costs only the check; a process gone costs nothing."""
    assert running_threads(os.getpid()) >= 1  # this thread, reading its own state
    child = subprocess.Popen([sys.executable, "-c", _SPIN_THEN_SLEEP], stdout=subprocess.PIPE,
                             text=True)
    try:
        time.sleep(0.05)  # it spins for 0.3 s from its start
        t0 = time.monotonic()
        waited = wait_until_idle([child.pid])
        assert child.stdout is not None and child.stdout.readline().strip() == "idle"
        assert 0.1 <= waited <= 1.0 and time.monotonic() - t0 >= waited
        assert wait_until_idle([child.pid]) < 0.05  # asleep now
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert running_threads(child.pid) is None and wait_until_idle([child.pid]) < 0.05


def test_a_pool_that_never_stops_spinning_is_stopped_for_the_others() -> None:
    """A native team spinning actively between its runs (omp_wait=active)
    never idles; the others' runs must not wait the second's cap for it, nor
    share the CPUs with it: it is stopped (SIGSTOP) while they run."""
    two = min(2, len(os.sched_getaffinity(0)))
    spinning = Settings(intra_op=two, omp_wait="active")
    res = run_lockstep(FAST, [Contender("native", settings=spinning, name="active"),
                              Contender("native", settings=ONE, name="one")],
                       steps=4, warmup=1, gap_s=0.0)
    assert res.errors == {}
    # The spinning team was stopped before each of the other's runs: no wait near the cap.
    assert all(w < 0.5 for w in res.settle_s["one"]), res.settle_s
    for label in ("active", "one"):
        assert len(res.ns[label]) == 4 and all(v > 0 for v in res.ns[label])


def test_two_native_settings_need_names() -> None:
    two = Settings(intra_op=2)
    with pytest.raises(ValueError, match="contenders must differ"):
        run_lockstep(FAST, [Contender("native", settings=ONE), Contender("native", settings=two)])
    res = run_lockstep(FAST, [Contender("native", settings=ONE, name="1 thread"),
                              Contender("native", settings=two, name="2 threads",
                                        python=sys.executable)],
                       steps=3, warmup=1)
    assert res.errors == {} and res.steps == 3
    assert res.answers["2 threads"].config["settings"]["intra_op"] == 2
    assert res.answers["2 threads"].config["python"] == sys.executable


def test_an_interpreter_that_cannot_start_is_named() -> None:
    res = run_lockstep(FAST, [Contender("native", settings=ONE),
                              Contender("native", settings=ONE, name="elsewhere",
                                        python="/nonexistent/bin/python")],
                       steps=2, warmup=1, timeout=60)
    assert list(res.errors) == ["elsewhere"]
    assert "in /nonexistent/bin/python: cannot start" in res.errors["elsewhere"]
    assert res.steps == 0 and res.answers["native"].ok


@needs_onnx
@pytest.mark.parametrize("hook, timeout, message", [
    ("abort@onnxruntime", 120.0, "died of SIGABRT"),
    ("hang@onnxruntime", 8.0, "not ready before the time limit (killed)"),
])
def test_a_failing_contender_is_named_and_the_others_end(
        monkeypatch: pytest.MonkeyPatch, hook: str, timeout: float, message: str) -> None:
    monkeypatch.setenv(HOOK_ENV, hook)
    res = run_lockstep(FAST, [Contender("native", settings=ONE),
                              Contender("onnxruntime", "all", ONE)],
                       steps=3, warmup=1, timeout=timeout)
    assert set(res.errors) == {"onnxruntime/all"}
    assert message in res.errors["onnxruntime/all"]
    assert res.errors["onnxruntime/all"].startswith("onnxruntime (all) on mlp-512 batch 1")
    assert res.steps == 0 and res.ns == {"native": [], "onnxruntime/all": []}
    assert res.answers["native"].ok  # ended cleanly, not killed


@pytest.mark.parametrize("kwargs, message", [
    ({"contenders": [Contender("native")]}, "at least two contenders, got 1"),
    ({"steps": 0}, "steps must be an integer >= 1, got 0"),
    ({"steps": True}, "steps must be an integer >= 1, got True"),
    ({"gap_s": -1.0}, "gap_s must be >= 0, got -1.0"),
    ({"timeout": 0}, "timeout must be > 0, got 0"),
    ({"contenders": [Contender("native"), Contender("caffe")]}, "unknown framework 'caffe'"),
    ({"contenders": [Contender("native"), Contender("torch", "jit")]}, "jit"),
])
def test_bad_arguments_are_named(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"contenders": [Contender("native", name="a"),
                                              Contender("native", name="b")], **kwargs}
    with pytest.raises(ValueError, match=message):
        run_lockstep(FAST, **args)  # type: ignore[arg-type]
