"""Talking to a child (pyparbench.child_process): a paused child's session
and a one-shot call end in an answer or a typed failure, whatever else the
child prints; the session's users (turns, the policy children, lockstep)
skip a child's stray lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from pyparbench import child_process
from pyparbench.child_process import ChildFailed, Finished, Session, ask_all, outcome
from pyparbench.frameworks import Contender, ModelRef, run_lockstep
from pyparbench.harness.runner import TEST_FAULT_ENV, Config
from pyparbench.harness.turns import measure_in_turns
from pyparbench.machine.fingerprint import machine_fingerprint
from pyparbench.recommender.children import PolicyChildren
from pyparbench.settings import Settings

# A child that answers each request (a JSON object) with {"echo": request},
# each answer printed after stray lines in the same write (so a reader that
# buffers lines must find the answer in its buffer); {"do": "die"} ends it
# with a message on stderr and status 3, "hang" sleeps, "error" answers with
# an error.
ECHO = textwrap.dedent("""
    import json, sys, time
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("do") == "die":
            print("boom: the child's last words", file=sys.stderr, flush=True)
            sys.exit(3)
        if req.get("do") == "hang":
            time.sleep(600)
        answer = {"error": "it went wrong"} if req.get("do") == "error" else {"echo": req}
        sys.stdout.write("a library's log line\\n{not json either\\n" + json.dumps(answer) + "\\n")
        sys.stdout.flush()
    print(json.dumps({"bye": True}), flush=True)
""")


def echo(name: str = "", pause: bool = True) -> Session:
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-c", ECHO], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=err, text=True,
                            start_new_session=True)
    return Session(proc, err, name=name, pause=pause)


def stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped, within a second (a signal is
    delivered a little later)."""
    for _ in range(100):
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        if stat[stat.rfind(")") + 2] == "T":
            return True
        time.sleep(0.01)
    return False


def test_a_session_skips_stray_lines_and_stops_its_child_between_requests() -> None:
    s = echo()
    try:
        assert s.ask({"n": 1}, 30) == {"echo": {"n": 1}}
        assert stopped(s.proc.pid)  # until asked again
        assert s.ask({"n": 2}, 30) == {"echo": {"n": 2}}
        assert s.finish(30) == {"bye": True}
        assert s.proc.returncode == 0
    finally:
        s.end()


def test_several_sessions_are_asked_at_once() -> None:
    kids = {"a": echo(), "b": echo(), "c": echo()}
    try:
        got = ask_all(kids, {"a": {"n": 1}, "c": {"n": 3}}, 30)
        assert got == {"a": {"echo": {"n": 1}}, "c": {"echo": {"n": 3}}}
        assert stopped(kids["a"].proc.pid) and stopped(kids["c"].proc.pid)
    finally:
        for s in kids.values():
            s.end()
    # Each ended as asked (resumed, its stdin closed), none killed.
    assert [s.proc.returncode for s in kids.values()] == [0, 0, 0]


def test_a_child_that_dies_is_a_typed_failure_with_its_stderr_tail() -> None:
    s = echo(name="the echo child")
    try:
        with pytest.raises(ChildFailed) as info:
            s.ask({"do": "die"}, 30)
        e = info.value
        assert e.status == "error"
        assert str(e) == e.error
        assert e.error.startswith("the echo child: the child exited with status 3:")
        assert "boom: the child's last words" in e.error
        assert e.stderr.strip().endswith("boom: the child's last words")
    finally:
        s.end()


def test_an_answer_with_an_error_and_a_hang_are_typed() -> None:
    s = echo()
    try:
        with pytest.raises(ChildFailed, match="^it went wrong$") as info:
            s.ask({"do": "error"}, 30)
        assert info.value.status == "error" and info.value.answer == {"error": "it went wrong"}
        t0 = time.monotonic()
        with pytest.raises(ChildFailed, match="timed out after 1 s") as info:
            s.ask({"do": "hang"}, 1)
        assert info.value.status == "timeout" and time.monotonic() - t0 < 20
        s.proc.wait(timeout=10)
        assert s.proc.returncode == -signal.SIGKILL
    finally:
        s.end()


def test_a_session_that_cannot_start_is_a_typed_failure() -> None:
    with pytest.raises(ChildFailed, match="^x: cannot start the child: ") as info:
        Session.start("json.tool", cpus=None, env={}, python="/nonexistent/bin/python",
                      name="x")
    assert info.value.status == "error"


def test_a_one_shot_child_ends_in_an_answer_or_a_typed_failure() -> None:
    assert outcome(Finished(0, 'log line\n{"ns": [1]}\n', ""), 5) == {"ns": [1]}
    cases = [(Finished(-9, "", "", timed_out=True), "timeout", "timed out after 5 s (killed)"),
             (Finished(-11, "", "a\nsegv\n"), "error", "the child died of SIGSEGV:\na\nsegv"),
             (Finished(0, "only a log line\n", ""), "error", "without a result line"),
             (Finished(0, '{"error": "no such model"}\n', ""), "error", "no such model")]
    for done, status, text in cases:
        with pytest.raises(ChildFailed) as info:
            outcome(done, 5)
        assert info.value.status == status and text in info.value.error
    # A child that dies: its stderr's end comes with the failure.
    with pytest.raises(ChildFailed) as info:
        child_process.call("json.tool", {"a": 1}, cpus=None, env={}, timeout=60,
                           python="/nonexistent/bin/python")
    assert info.value.status == "error" and "cannot start the child" in info.value.error
    with pytest.raises(ChildFailed) as info:
        child_process.call("pyparbench.no_such_module", {}, cpus=None,
                           env=child_process.child_env(Settings()), timeout=60)
    assert info.value.status == "error"
    assert info.value.error.startswith("the child exited with status 1:")
    assert "No module named pyparbench.no_such_module" in info.value.stderr


# ------------------------------------------- the session's users, for real

# Installed in a child's path (sitecustomize runs at its start): every
# answer line it prints (a JSON object, or a lockstep step line) comes
# after two stray lines in the same write, as a library logging on stdout
# would print them.
NOISY = textwrap.dedent("""
    import sys

    class _Noisy:
        def __init__(self, out):
            self._out = out

        def write(self, text):
            if text.startswith(("{", "@pyparbench-step ")):
                self._out.write("a library's log line\\n{not json either\\n")
            return self._out.write(text)

        def __getattr__(self, name):
            return getattr(self._out, name)

    sys.stdout = _Noisy(sys.stdout)
""")


@pytest.fixture
def noisy_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NOISY)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), *sys.path]))
    monkeypatch.delenv(TEST_FAULT_ENV, raising=False)


@pytest.mark.usefixtures("noisy_children")
def test_turns_skip_a_childs_stray_lines() -> None:
    configs = [Config("mlp-512", 1, Settings(), repeats=2, warmup=0),
               Config("mlp-512", 1, Settings(omp_wait="passive"), repeats=2, warmup=0)]
    got = measure_in_turns(configs, turns=2, timeout=60, machine=machine_fingerprint())
    assert [r.status for r in got] == ["ok", "ok"], [r.error for r in got]
    assert all(r.resolved is not None and len(r.resolved["turns"]) == 2 for r in got)


@pytest.mark.usefixtures("noisy_children")
def test_the_policy_children_skip_a_childs_stray_lines() -> None:
    with PolicyChildren([None, "passive"], timeout_s=60) as kids:
        env = kids.ask_all({"default": {"do": "env"}, "passive": {"do": "env"}})
        assert env["passive"].env == {"OMP_WAIT_POLICY": "passive"}
        # An error answer after stray lines is still the typed failure.
        with pytest.raises(ChildFailed, match="omp_wait=passive: unknown request 'dance'"):
            kids.ask("passive", {"do": "dance"})


@pytest.mark.usefixtures("noisy_children")
def test_lockstep_skips_a_childs_stray_lines() -> None:
    fast = ModelRef("mlp-512", 1, kwargs={"layers": 1})
    res = run_lockstep(fast, [Contender("native", settings=Settings(), name="a"),
                              Contender("native", settings=Settings(intra_op=2), name="b")],
                       steps=3, warmup=1, timeout=120)
    assert res.errors == {} and res.steps == 3
    assert res.answers["a"].ok and res.answers["a"].job.ok
