"""The README's Slurm job array, run for real on a one-node Slurm started here.

munged, slurmctld and slurmd start as child processes with a generated
slurm.conf (this machine's CPUs; ``tests/_slurm.py``); the job-array script
is read from README.md and submitted as printed (``bash shards.sh`` with
sbatch options for two co-located tasks of one CPU each, and a tiny suite
in ``PYPARBENCH_RUN_ARGS``); the test waits for the array and the merge
job, then checks the merged folder against the ``--shard 0/1`` run of the
same suite on one CPU. The daemons are stopped by their process ids
whatever happens.

Marked ``slurm``: left out of the default run (``pytest -m slurm`` runs
it; ``.ci/slurm`` installs the packages first). Where Slurm cannot start
(not root, not installed) it skips, saying why, except in CI (``CI=true``),
where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _slurm import SlurmCluster, SlurmUnavailable, start_cluster

pytestmark = pytest.mark.slurm

README = Path(__file__).resolve().parents[1] / "README.md"
# The suite every run of this test measures (the README's tiny suite).
SUITE = "--quick --models mlp-512 --batches 1 --repeats 1 --no-frameworks"
ARRAY_TIMEOUT_S = 240.0
MERGE_TIMEOUT_S = 90.0


def readme_script() -> str:
    """The job-array script as README.md prints it (the bash block holding
    ``#SBATCH --array``)."""
    text = README.read_text()
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        if "#SBATCH --array" in block:
            return str(block)
    raise AssertionError("README.md prints no job-array script (#SBATCH --array)")


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    try:
        c = start_cluster()
    except SlurmUnavailable as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Slurm cannot start in CI: {e}")
        pytest.skip(f"Slurm cannot start here: {e}")
    try:
        yield c
    finally:
        c.stop()
        assert not c.running(), f"Slurm daemons still running: {c.running()}"


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _one_cpu_run(out: Path, cpu: int) -> subprocess.Popen[str]:
    """The same suite as one shard (``--shard 0/1``) on one CPU, as a task
    of the array gets it."""
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "pyparbench", "run", *SUITE.split(), "--shard", "0/1",
         "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


def test_the_readme_job_array_runs_and_merges(cluster: SlurmCluster, tmp_path: Path) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip(f"two co-located one-CPU tasks need two CPUs; this process has {cpus}")
    started = time.monotonic()
    work = tmp_path / "work"
    work.mkdir()
    # What the script runs from (a checkout's .venv): this interpreter's environment.
    (work / ".venv").symlink_to(Path(sys.prefix))
    (work / "shards.sh").write_text(readme_script())
    env = {**cluster.env, "PYPARBENCH_RUN_ARGS": SUITE}
    submit = subprocess.run(
        ["bash", "shards.sh", "--array=0-1", "--oversubscribe", "--cpus-per-task=1"],
        cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert submit.returncode == 0, submit.stderr
    m = re.search(r"array job (\d+), merge job (\d+)", submit.stdout)
    assert m, submit.stdout
    array, merge_job = m.groups()
    assert (work / "logs").is_dir()  # made by the script, before sbatch
    # Meanwhile, the unsharded run of the same suite on one CPU.
    whole = _one_cpu_run(tmp_path / "whole", cpus[0])
    try:
        cluster.wait([array], ARRAY_TIMEOUT_S)
        cluster.wait([merge_job], MERGE_TIMEOUT_S)
        out, _ = whole.communicate(timeout=ARRAY_TIMEOUT_S)
    finally:
        if whole.poll() is None:
            whole.kill()
            whole.wait()
    assert whole.returncode == 0, out[-3000:]
    logs = {p.name: p.read_text() for p in sorted((work / "logs").iterdir())}
    # Where the README says the logs go.
    assert sorted(logs) == ["merge.out", "shard-0.out", "shard-1.out"], sorted(logs)
    assert "report:" in logs["merge.out"], logs["merge.out"][-2000:]
    tasks = cluster.tasks(array)
    assert [t["JobState"] for t in tasks] == ["COMPLETED", "COMPLETED"], (tasks, logs)
    # Co-located: both tasks ran on the node at the same time.
    assert max(t["StartTime"] for t in tasks) < min(t["EndTime"] for t in tasks), tasks
    assert cluster.job_state(merge_job)["JobState"] == "COMPLETED", logs

    # The two tasks shared the node, each on the one CPU Slurm gave it: their
    # records say which, and everything they pinned stayed on it.
    given = []
    for k in (0, 1):
        shard = work / "results" / f"shard-{k}"
        recs = _records(shard / "results.jsonl")
        allowed = {tuple(r["machine"]["cpus"]["allowed"]) for r in recs}
        assert len(allowed) == 1, allowed
        (mine,) = allowed
        assert len(mine) == 1 and recs[0]["machine"]["cpus"]["allowed_layout"] == \
            "1 core x 1 CPU"
        given.append(mine[0])
        for r in recs:
            resolved = r["resolved"]
            assert resolved["process_cpus"] == list(mine), (r["key"], resolved)
            assert all(set(w) <= set(mine) for w in resolved.get("worker_cpus", [])), resolved
        for peak in shard.glob("peak-*.json"):
            assert all(set(p["cpus"]) <= set(mine) for p in json.loads(peak.read_text())
                       ["points"])
    assert len(set(given)) == 2, given  # two CPUs, one each
    print(f"\nco-located tasks' CPUs: shard 0 on {given[0]}, shard 1 on {given[1]}")

    # The merge job's folder: the same rows as the unsharded run, and its report.
    merged = work / "results" / "all"
    got = _records(merged / "results.jsonl")
    want = _records(tmp_path / "whole" / "results.jsonl")
    assert [r["key"] for r in got] == [r["key"] for r in want]
    assert all(r["status"] == "ok" for r in got), [r.get("error") for r in got]
    assert sorted(got[0]) == sorted(want[0])
    summary = json.loads((merged / "summary.json").read_text())
    alone = json.loads((tmp_path / "whole" / "summary.json").read_text())
    # The same settings per model (listed fastest first: timings aside).
    assert [(m["model"], m["batch"], sorted(c["key"] for c in m["configs"]))
            for m in summary["models"]] == [
        (m["model"], m["batch"], sorted(c["key"] for c in m["configs"])) for m in alone["models"]]
    assert summary["counts"] == alone["counts"]
    hosts = summary["hosts"]
    assert sorted(h["cpus_allowed"][0] for h in hosts) == sorted(given), hosts
    assert all(h["peak"] is not None for h in hosts)
    page = (merged / "report.html").read_text()
    assert "measured on 2 hosts" in page
    merge_info = json.loads((merged / "merge.json").read_text())
    assert merge_info["records"] == len(want) and not merge_info["forced"]
    print(f"merged rows {len(got)}, unsharded rows {len(want)}; "
          f"{time.monotonic() - started:.0f} s from submission")
