"""Faults in long runs: a sweep killed with SIGKILL at random points, a
configuration that crashes or hangs, a disk that fills up while results are
written. Crashes and hangs are made by the runner's test hook
(``PYPARBENCH_TEST_FAULT``, see ``pyparbench.harness.runner``)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _fuzz import FIGURES
from pyparbench.frameworks.child import HOOK_ENV
from pyparbench.harness.store import ResultStore
from pyparbench.harness.runner import TEST_FAULT_ENV, Config, run_config, run_configs
from pyparbench.settings import Settings

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

# A tiny configuration: a fresh process runs it in about a second.
FAST = {"model": "mlp-512", "batch": 1, "repeats": 1, "warmup": 0}
TRIALS = int(os.environ.get("PPB_KILL_TRIALS", "4"))


def configs(n: int) -> list[Config]:
    return [Config(FAST["model"], FAST["batch"], Settings(intra_op=1 + i % 2, omp_wait=i),
                   repeats=1, warmup=0) for i in range(n)]  # type: ignore[arg-type]


@pytest.fixture
def no_fault(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.delenv(TEST_FAULT_ENV, raising=False)
    yield monkeypatch


# --------------------------------------------------- crashes and hangs


def test_a_crashing_and_a_hanging_configuration_are_recorded_and_the_run_completes(
        tmp_path: Path, no_fault: pytest.MonkeyPatch) -> None:
    store = ResultStore(tmp_path / "results.jsonl")
    cs = [Config("mlp-512", 1, Settings(), repeats=1, warmup=0),
          Config("ncf", 1, Settings(), repeats=1, warmup=0),
          Config("dlrm", 1, Settings(), repeats=1, warmup=0)]
    # ncf's child crashes; then dlrm's hangs, stopped by the timeout.
    no_fault.setenv(TEST_FAULT_ENV, "segv:ncf")
    first = list(run_configs(cs[:2], store, timeout=120))
    no_fault.setenv(TEST_FAULT_ENV, "hang:dlrm")
    t0 = time.monotonic()
    last = list(run_configs(cs, store, timeout=3))
    assert time.monotonic() - t0 < 60
    assert [r.status for r in first] == ["ok", "error"]
    assert (first[1].error or "").startswith("the child died of SIGSEGV")
    assert [r.status for r in last] == ["ok", "error", "timeout"]
    assert "timed out after 3 s" in (last[2].error or "")
    # All three are in the file, each once; the failed ones are not retried.
    keys = [r["key"] for r in store.records()]
    assert sorted(keys) == sorted(c.key for c in cs) and len(keys) == 3


def test_a_hanging_framework_child_is_recorded_as_a_timeout_as_a_native_one_is(
        no_fault: pytest.MonkeyPatch) -> None:
    no_fault.setenv(HOOK_ENV, "hang")  # the framework's child sleeps before it imports
    no_fault.setenv(TEST_FAULT_ENV, "hang")  # the native child, before it measures
    got = [run_config(Config("mlp-512", 1, Settings(), repeats=1, warmup=0, framework=fw),
                      timeout=3) for fw in ("onnxruntime", None)]
    assert [r.status for r in got] == ["timeout", "timeout"], [r.error for r in got]
    assert all("timed out after 3 s" in (r.error or "") for r in got)


def test_a_child_with_no_result_line_is_an_error(tmp_path: Path,
                                                 no_fault: pytest.MonkeyPatch) -> None:
    # A child that exits 0 having printed nothing usable (say, something in
    # its environment swallowed the output) fails that configuration only.
    sitedir = tmp_path / "site"
    sitedir.mkdir()
    (sitedir / "sitecustomize.py").write_text("import os, sys\n"
                                              "sys.stdout = open(os.devnull, 'w')\n")
    no_fault.setenv("PYTHONPATH", os.pathsep.join([str(sitedir), *sys.path]))
    r = run_config(Config("mlp-512", 1, Settings(), repeats=1, warmup=0))
    assert r.status == "error" and "without a result line" in (r.error or "")


def test_the_hook_refuses_an_unknown_fault(no_fault: pytest.MonkeyPatch) -> None:
    no_fault.setenv(TEST_FAULT_ENV, "explode")
    r = run_config(Config("mlp-512", 1, Settings(), repeats=1, warmup=0))
    assert r.status == "error" and TEST_FAULT_ENV in (r.error or "")


# ------------------------------------------------------ SIGKILL and resume

SWEEP = textwrap.dedent("""
    import json, sys
    from pyparbench.harness.runner import Config, run_configs
    from pyparbench.harness.store import ResultStore
    configs = [Config.from_dict(c) for c in json.loads(sys.argv[2])]
    for _ in run_configs(configs, ResultStore(sys.argv[1]), timeout=120):
        pass
""")


def _sweep(path: Path, cs: list[Config]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-P", "-c", SWEEP, str(path),
                             json.dumps([c.as_dict() for c in cs])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _whole_lines(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    data = path.read_bytes()
    return data.split(b"\n")[:-1]  # what follows the last newline is cut short


def test_a_sweep_killed_at_random_points_loses_nothing_and_resumes_to_the_same_set(
        tmp_path: Path, no_fault: pytest.MonkeyPatch) -> None:
    cs = configs(3)
    want = sorted(c.key for c in cs)
    rng = random.Random(int(os.environ.get("PPB_KILL_SEED", "13")))
    seen = []
    for trial in range(TRIALS):
        # A sweep killed twice (it and its current child, at random moments
        # over its few seconds), restarted each time, then resumed to the end.
        path = tmp_path / f"results-{trial}.jsonl"
        steps = []
        for _ in range(2):
            proc = _sweep(path, cs)
            time.sleep(rng.uniform(0.1, 4.0))
            before = _whole_lines(path)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            after = _whole_lines(path)
            assert after[:len(before)] == before, f"trial {trial}: finished results changed"
            records = ResultStore(path).records()
            assert len({r["key"] for r in records}) == len(records), "a configuration ran twice"
            cut = path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n")
            steps.append(f"{len(records)}{'+cut line' if cut else ''}")
        final = list(run_configs(cs, ResultStore(path), timeout=120))
        assert sorted(r.key for r in final) == want
        assert all(r.status == "ok" for r in final)
        records = ResultStore(path).records()
        assert sorted(r["key"] for r in records) == want, f"trial {trial}"
        seen.append("/".join(steps))
    FIGURES["SIGKILL trials"] = (
        f"{TRIALS} sweeps of {len(cs)} configurations, each killed twice (finished "
        f"configurations at each kill: {', '.join(seen)}); every sweep resumed to all "
        f"{len(cs)}, each once, none lost")


# --------------------------------------------------------------- full disk

APPEND = textwrap.dedent("""
    import resource, signal, sys
    from pyparbench.harness.store import ResultStore
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
    store = ResultStore(sys.argv[1])
    limit = int(sys.argv[2])
    if limit:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        for i in range(100):
            store.append({"key": f"k{i}", "status": "ok", "pad": "x" * 50})
    except OSError as e:
        print(e)
        sys.exit(3)
""")


def _fill(path: Path, limit: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-c", APPEND, str(path), str(limit)],
                          capture_output=True, text=True, timeout=120)


def _check_after_full_disk(path: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 3, proc.stderr
    assert f"cannot append a result to {path}" in proc.stdout
    assert "results written before are kept" in proc.stdout
    records = ResultStore(path).records()  # up to the last whole line
    assert records and [r["key"] for r in records] == [f"k{i}" for i in range(len(records))]


def test_a_full_disk_gives_a_clear_error_and_keeps_every_whole_line(tmp_path: Path) -> None:
    # The file may not grow past 1000 bytes: the write that crosses it is
    # cut short, as on a full disk.
    path = tmp_path / "results.jsonl"
    _check_after_full_disk(path, _fill(path, 1000))
    assert path.stat().st_size == 1000 and not path.read_bytes().endswith(b"\n")
    # With room again, the next record starts a line of its own.
    store = ResultStore(path)
    n = len(store.records())
    store.append({"key": "after", "status": "ok"})
    assert [r["key"] for r in store.records()][n:] == ["after"]


def test_writing_to_dev_full(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    path = tmp_path / "results.jsonl"
    path.symlink_to("/dev/full")
    with pytest.raises(OSError, match="No space left on device") as e:
        ResultStore(path).append({"key": "k", "status": "ok"})
    assert str(path) in str(e.value)


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_tmpfs(tiny_tmpfs: Path) -> None:
    path = tiny_tmpfs / "results.jsonl"
    _check_after_full_disk(path, _fill(path, 0))
    assert "No space left on device" in _fill(path, 0).stdout


def test_cli_reports_a_full_disk_in_one_line(tmp_path: Path,
                                             seed_peak: Callable[[Path], Path]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    seed_peak(tmp_path)
    out = tmp_path / "results.jsonl"
    out.symlink_to("/dev/full")
    proc = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "run", "--models",
                           "mlp-512", "--batches", "1", "--repeats", "1", "--no-resume",
                           "-o", str(out)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, TEST_FAULT_ENV: ""})
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("pyparbench run: error:") and "cannot append a result to" in last
    assert "No space left on device" in last



def test_child_failures_are_described() -> None:
    from pyparbench.child_process import answer, crash_text, timeout_text

    assert crash_text(-signal.SIGSEGV, "") == "the child died of SIGSEGV"
    assert crash_text(3, "a\nb\nboom\n") == "the child exited with status 3:\na\nb\nboom"
    assert crash_text(1, "\n".join(map(str, range(10)))).endswith(":\n4\n5\n6\n7\n8\n9")
    assert timeout_text(3.0) == "timed out after 3 s (killed)"
    assert answer('noise\n{"ns": [1]}\n') == {"ns": [1]}
    for out in ("", "\n", "not json", "[1, 2]"):
        with pytest.raises(ValueError, match="without a result line"):
            answer(out)
