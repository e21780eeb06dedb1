"""Shards (`pyparbench run --shard K/N`, Slurm arrays) and `pyparbench merge`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pyparbench.cli import main
from pyparbench.harness.merge import MergeError, merge
from pyparbench.resultfiles import ResultFileError
from pyparbench.harness.store import ResultStore
from pyparbench.harness.runner import Config
from pyparbench.settings import Settings
from pyparbench.harness.shards import (
    Shard,
    apply_shard,
    manifest_path,
    parse_shard,
    resolve_shard,
    shard_from_env,
)

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow


def fake_suite(n: int = 23) -> list[Config]:
    """n distinct configurations (the list order is what shards split)."""
    models = ["mlp-512", "googlenet", "dlrm-kaggle"]
    return [Config(models[i % 3], 1 + i // 3, Settings(intra_op=1 + i % 2), repeats=3)
            for i in range(n)]


MACHINE: dict[str, Any] = {
    "host": "node-1", "cpu_model": "Test CPU 9000", "governor": "performance",
    "onednn": {"version": "3.4.1", "hash": "x", "cpu_runtime": "OpenMP", "isa": "avx2",
               "api_major": 3},
    "openmp": {"library": "/usr/lib/libgomp.so.1", "spec": 201511, "max_threads": 8,
               "num_procs": 8},
    "cpus": {"logical": 8, "physical_cores": 8, "sockets": 1, "numa_nodes": 1,
             "allowed": list(range(8)), "os_cpu_count": 8},
    "pyparbench": "0.1.0", "python": "3.11.7"}


def fake_record(c: Config, *, status: str = "ok", started: float = 1.0,
                machine: dict[str, Any] | None = None, ms: float = 1.0) -> dict[str, Any]:
    rec: dict[str, Any] = {"key": c.key, "config": c.as_dict(), "status": status,
                           "started": started}
    if status != "ok":
        rec["error"] = "exit status 1: boom"
        return rec
    ns = [ms * 1e6, ms * 1.1e6, ms * 0.9e6]
    rec.update({"ns": ns, "summary": {"median": ms * 1e6, "q1": 0, "q3": 0, "min": ns[2],
                                      "max": ns[1], "n": 3},
                "resolved": {}, "per_instance": [], "machine": machine or MACHINE})
    return rec


def test_parse_shard() -> None:
    assert parse_shard("0/1") == Shard(0, 1)
    assert parse_shard(" 3 / 8 ") == Shard(3, 8)
    for text, msg in (("8/8", "K counts from 0, so it must be below N=8"),
                      ("1/0", "N must be from 1"),
                      ("-1/4", "must be K/N"), ("a/b", "must be K/N"), ("3", "must be K/N"),
                      ("1/2/3", "must be K/N"), ("1" * 5000 + "/2", "must be K/N")):
        with pytest.raises(ValueError, match=msg) as e:
            parse_shard(text)
        assert text[:20] in str(e.value)


def test_the_manifest_goes_beside_the_results(tmp_path: Path) -> None:
    assert manifest_path(tmp_path / "r.jsonl") == tmp_path / "r.shard.json"
    # A results folder (run -o DIR): inside it, where merge looks for it.
    assert manifest_path(tmp_path / "out") == tmp_path / "out" / "results.shard.json"
    assert manifest_path(tmp_path / "out") == manifest_path(tmp_path / "out" / "results.jsonl")


def test_shard_from_slurm_variables() -> None:
    assert shard_from_env({}) is None
    env = {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "8"}
    assert shard_from_env(env) == Shard(3, 8)
    # --array=1-8: ids from 1; --array=0-14:2: every other id.
    assert shard_from_env({**env, "SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1"}
                          ) == Shard(3, 8)
    assert shard_from_env({**env, "SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_MIN": "0",
                           "SLURM_ARRAY_TASK_STEP": "2"}) == Shard(3, 8)
    for bad, msg in (({"SLURM_ARRAY_TASK_ID": "3"}, "SLURM_ARRAY_TASK_COUNT is not set"),
                     ({**env, "SLURM_ARRAY_TASK_ID": "9"},
                      "SLURM_ARRAY_TASK_ID=9, SLURM_ARRAY_TASK_COUNT=8, .* give shard 9/8"),
                     ({**env, "SLURM_ARRAY_TASK_ID": "x"},
                      "SLURM_ARRAY_TASK_ID='x' is not a non-negative integer"),
                     ({**env, "SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_STEP": "2"},
                      "do not make a shard"),
                     # --array=3,5 (failed shards re-run): ids that are no range.
                     ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "2",
                       "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_MAX": "5",
                       "SLURM_ARRAY_TASK_STEP": "1"}, "not one range of ids")):
        with pytest.raises(ValueError, match=msg):
            shard_from_env(bad)
    # A whole range with its MAX, as Slurm sets them (--array=0-7).
    assert shard_from_env({**env, "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "7",
                           "SLURM_ARRAY_TASK_STEP": "1"}) == Shard(3, 8)
    # --shard wins over the environment.
    assert resolve_shard("1/2", env) == Shard(1, 2)
    assert resolve_shard(None, env) == Shard(3, 8)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 23, 30])
def test_shards_cover_each_configuration_exactly_once(n: int) -> None:
    suite = fake_suite()
    parts = [Shard(k, n).select(suite) for k in range(n)]
    keys = [c.key for part in parts for c in part]
    assert sorted(keys) == sorted(c.key for c in suite)  # each once, none lost
    assert len(set(keys)) == len(keys)
    assert max(map(len, parts)) - min(map(len, parts)) <= 1  # balanced
    # Deterministic: the same list gives the same parts.
    assert [Shard(k, n).select(suite) for k in range(n)] == parts


def test_shards_of_the_default_suite() -> None:
    from pyparbench.harness.levels import resolve_level
    from pyparbench.harness.suite import default_suite

    level = resolve_level("default", models=["mlp-512", "dlrm-kaggle"], batches=[1, 8],
                          repeats=2)
    suite = default_suite(level, cores=2)
    parts = [Shard(k, 3).select(suite) for k in range(3)]
    assert sorted(c.key for p in parts for c in p) == sorted(c.key for c in suite)
    again = default_suite(level, cores=2)
    assert [c.key for c in Shard(1, 3).select(again)] == [c.key for c in parts[1]]


def _run_shards(tmp_path: Path, suite: list[Config], n: int) -> list[Path]:
    """Each shard as its job would: select by the Slurm variables, write the
    manifest, append (fake) results."""
    dirs = []
    for k in range(n):
        d = tmp_path / f"shard-{k}"
        store = ResultStore(d / "results.jsonl")
        env = {"SLURM_ARRAY_TASK_ID": str(k), "SLURM_ARRAY_TASK_COUNT": str(n)}
        for c in apply_shard(suite, None, store.path, env=env, log=lambda _: None):
            store.append(fake_record(c, machine={**MACHINE, "host": f"node-{k}"}))
        dirs.append(d)
    return dirs


def test_merged_shards_equal_the_unsharded_results(tmp_path: Path) -> None:
    suite = fake_suite()
    whole = [fake_record(c) for c in suite]
    dirs = _run_shards(tmp_path, suite, 4)
    assert json.loads(manifest_path(dirs[1] / "results.jsonl").read_text())["shard"] == "1/4"
    report = merge(dirs[::-1], tmp_path / "all")  # any input order
    assert report.records == len(suite) and report.duplicates == 0 and not report.warnings
    merged = ResultStore(tmp_path / "all" / "results.jsonl").records()
    strip = [{k: v for k, v in r.items() if k != "machine"} for r in merged]
    assert strip == [{k: v for k, v in r.items() if k != "machine"} for r in whole]
    # Shards ran on several nodes of one kind: host names do not block the merge.
    assert {r["machine"]["host"] for r in merged} == {f"node-{k}" for k in range(4)}


def test_missing_shards_and_configurations_are_reported(tmp_path: Path) -> None:
    suite = fake_suite(10)
    dirs = _run_shards(tmp_path, suite, 3)
    lines = (dirs[0] / "results.jsonl").read_text().splitlines()
    (dirs[0] / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # killed job
    report = merge(dirs[:2], tmp_path / "out")
    assert report.records == 10 - 3 - 1  # shard 2/3 (3 configurations) and one of 0/3 lost
    assert any("shard(s) 2/3 missing" in w for w in report.warnings)
    assert any("1 of its 4 configurations have no result" in w for w in report.warnings)


def test_shards_of_different_suites_are_refused(tmp_path: Path) -> None:
    a = _run_shards(tmp_path / "a", fake_suite(10), 2)
    b = _run_shards(tmp_path / "b", fake_suite(12), 2)
    with pytest.raises(MergeError, match="shards of different suites: .*of 10.*of 12"):
        merge([a[0], b[1]], tmp_path / "out")


def test_different_machines_are_refused(tmp_path: Path) -> None:
    suite = fake_suite(4)
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    ResultStore(one).append(fake_record(suite[0]))
    ResultStore(two).append(fake_record(suite[1]))
    ResultStore(two).append(fake_record(suite[2], machine={
        **MACHINE, "cpu_model": "Other CPU", "cpus": {**MACHINE["cpus"], "physical_cores": 4}}))
    with pytest.raises(MergeError) as e:
        merge([one, two], tmp_path / "out")
    msg = str(e.value)
    assert f"{one}:1 and {two}:2 differ in CPU model ('Test CPU 9000' vs 'Other CPU')" in msg
    assert "physical cores ('8' vs '4')" in msg and "\n" not in msg
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_duplicates_keep_the_finished_then_the_latest(tmp_path: Path) -> None:
    suite = fake_suite(3)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    for r in (fake_record(suite[0], ms=1.0, started=10.0),
              fake_record(suite[1], status="error", started=10.0),
              fake_record(suite[2], ms=3.0, started=10.0)):
        ResultStore(first).append(r)
    for r in (fake_record(suite[0], status="error", started=20.0),  # a failed retry
              fake_record(suite[1], ms=2.0, started=5.0),  # finished, though earlier
              fake_record(suite[2], ms=4.0, started=30.0)):  # a newer measurement
        ResultStore(second).append(r)
    report = merge([first, second], tmp_path / "out")
    assert report.duplicates == 3
    got = {r["key"]: r for r in ResultStore(tmp_path / "out" / "results.jsonl").records()}
    assert [got[c.key]["status"] for c in suite] == ["ok", "ok", "ok"]
    assert [got[c.key]["summary"]["median"] for c in suite] == [1e6, 2e6, 4e6]


def test_an_existing_output_is_not_overwritten(tmp_path: Path) -> None:
    dirs = _run_shards(tmp_path, fake_suite(4), 2)
    with pytest.raises(MergeError, match="exists; name it as an input"):
        merge([dirs[0]], dirs[1])
    merge([dirs[0], dirs[1]], dirs[1])  # merging into one of the inputs is fine
    assert len(ResultStore(dirs[1] / "results.jsonl").records()) == 4


def test_merge_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dirs = _run_shards(tmp_path, fake_suite(6), 2)
    assert main(["merge", *map(str, dirs), "-o", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "6 results and 0 operator measurements from 2 input(s)" in out
    assert f"report: {tmp_path / 'm' / 'report.html'}" in out
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "results.jsonl").write_bytes(b'{"key": "k", "config": []}\n')
    with pytest.raises(SystemExit) as e:
        main(["merge", str(dirs[0]), str(junk), "-o", str(tmp_path / "m2")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == (f"pyparbench merge: error: {junk / 'results.jsonl'}:1: "
                   "config must be an object, got a JSON array\n")


def test_merge_reads_records_strictly(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"config": {"model": "m", "batch": 1, "settings": {}},
                             "status": "error"}) + "\n")
    with pytest.raises(ResultFileError, match="r.jsonl:1: no configuration key"):
        merge([f], tmp_path / "out")


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "pyparbench", *args], capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})}, cwd=cwd)


def test_run_rejects_a_bad_shard_before_running(tmp_path: Path) -> None:
    out = _cli("run", "--models", "mlp-512", "--batches", "1", "--shard", "2/2",
               "-o", str(tmp_path / "r.jsonl"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--shard 2/2: K counts from 0, so it must be below N=2" in out.stderr
    out = _cli("run", "--models", "mlp-512", "--batches", "1", "-o", str(tmp_path / "r.jsonl"),
               env={"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4"})
    assert out.returncode == 2 and "SLURM_ARRAY_TASK_ID=4" in out.stderr
    assert not (tmp_path / "r.jsonl").exists()


def test_a_real_sharded_run_merges_to_the_whole_suite(tmp_path: Path) -> None:
    from pyparbench.harness.suite import default_suite

    for k in range(2):
        out = _cli("run", "--models", "mlp-512", "--batches", "1", "--repeats", "1",
                   "-o", str(tmp_path / f"shard-{k}" / "results.jsonl"),
                   env={"SLURM_ARRAY_TASK_ID": str(k), "SLURM_ARRAY_TASK_COUNT": "2"})
        assert out.returncode == 0, out.stderr
        assert f"shard {k}/2 (from the Slurm array task)" in out.stdout
    report = merge([tmp_path / "shard-0", tmp_path / "shard-1"], tmp_path / "all")
    assert not report.warnings
    merged = ResultStore(tmp_path / "all" / "results.jsonl").records()
    # A sharded run's recommended setting comes from the analytic model, so
    # that every shard builds the same list.
    from pyparbench.models import build
    from pyparbench.recommender import recommend
    from pyparbench.harness.suite import FRAMEWORK_RUNS, installed_frameworks

    rec = recommend(build("mlp-512", 1), calibrate=False)
    have = installed_frameworks()
    from pyparbench.harness.levels import resolve_level

    # No --precision: fp32, and every other precision the CPU runs natively.
    suite = default_suite(resolve_level("default", models=["mlp-512"], batches=[1], repeats=1,
                                        precision=None),
                          recommended={("mlp-512", 1): (rec.settings, rec.predicted.latency_ns)},
                          frameworks=[(f, m) for f, m in FRAMEWORK_RUNS if f in have])
    assert [r["key"] for r in merged] == [c.key for c in suite]
    assert all(r["status"] == "ok" for r in merged)


def test_a_folder_keeps_one_shard_of_one_split(tmp_path: Path) -> None:
    suite = fake_suite(6)
    log: list[str] = []
    apply_shard(suite, "1/3", tmp_path, log=log.append)
    apply_shard(suite, "1/3", tmp_path, log=log.append)  # a re-run resumes the same shard
    for arg, msg in (("1/2", "holds shard 1/3 and this run is shard 1/2"),
                     ("0/3", "holds shard 1/3 and this run is shard 0/3")):
        with pytest.raises(ValueError, match=msg):
            apply_shard(suite, arg, tmp_path, log=log.append)
    with pytest.raises(ValueError, match="shard 1/3 of another suite .6 configurations, "
                                         "this run plans 5"):
        apply_shard(suite[:5], "1/3", tmp_path, log=log.append)
    manifest_path(tmp_path).write_text("{")
    with pytest.raises(ValueError, match="not a shard manifest"):
        apply_shard(suite, "1/3", tmp_path, log=log.append)


def test_resume_across_nodes_of_one_kind() -> None:
    from pyparbench.machine.fingerprint import resume_conflicts

    here = {**MACHINE, "cpus": {**MACHINE["cpus"], "allowed_layout": "8 cores x 1 CPU"}}
    # Another host of the same kind: resumed (each record keeps its host).
    assert resume_conflicts({**here, "host": "node-9"}, here) == []
    # A record written before the layout was recorded: unknown, not a difference.
    assert resume_conflicts(MACHINE, here) == []
    other = {**here, "cpus": {**here["cpus"], "allowed_layout": "4 cores x 2 CPUs"}}
    assert [d.field.path for d in resume_conflicts(other, here)] == ["cpus.allowed_layout"]
    assert [d.field.path for d in resume_conflicts({**here, "cpu_model": "X"}, here)] == [
        "cpu_model"]


@pytest.mark.parametrize("synthetic, want", [
    ("package:1 core:2 pu:1", "2 cores x 1 CPU"),
    ("package:2 core:2 pu:2", "2 cores x 2 CPUs | 2 cores x 2 CPUs"),
    ("package:1 core:4 pu:2", "4 cores x 2 CPUs"),
])
def test_the_layout_of_the_allowed_cpus(synthetic: str, want: str) -> None:
    from pyparbench.settings import allowed_layout
    from pyparbench.threading.topology import topology

    assert allowed_layout(topology(synthetic)) == want


def test_busy_cpu_time_counts_this_process_cpus_only() -> None:
    from pyparbench.machine.cpuload import cpu_seconds

    hz = os.sysconf("SC_CLK_TCK")
    stat = ("cpu  30 0 30 100 10 0 0 0 0 0\n"
            "cpu0 10 0 10 50 5 0 0 0 0 0\n"
            "cpu1 20 0 20 50 5 0 0 0 0 0\n"
            "intr 12345\n")
    assert cpu_seconds(stat, {0}) == 20 / hz  # user + system; idle and iowait left out
    assert cpu_seconds(stat, {1}) == 40 / hz
    assert cpu_seconds(stat, {0, 1}) == 60 / hz
    assert cpu_seconds(stat, {2}) is None  # a CPU /proc/stat does not list
    assert cpu_seconds("cpu0 x y\n", {0}) is None


def test_fp32_and_bf16_runs_of_one_setting_merge_apart(tmp_path: Path) -> None:
    fp32 = Config("mlp-512", 1, Settings(intra_op=2), repeats=3)
    bf16 = Config("mlp-512", 1, Settings(intra_op=2, precision="bf16"), repeats=3)
    # An fp32 key is the one written before the precision knob existed.
    assert "precision" not in fp32.key and '"precision": "bf16"' in bf16.key
    first, second = tmp_path / "fp32.jsonl", tmp_path / "bf16.jsonl"
    ResultStore(first).append(fake_record(fp32, ms=2.0))
    ResultStore(second).append(fake_record(bf16, ms=1.0))
    report = merge([first, second], tmp_path / "out")
    assert report.records == 2 and report.duplicates == 0
    got = {r["key"]: r for r in ResultStore(tmp_path / "out" / "results.jsonl").records()}
    assert got[fp32.key]["summary"]["median"] == 2e6
    assert got[bf16.key]["summary"]["median"] == 1e6
    assert got[bf16.key]["config"]["settings"]["precision"] == "bf16"
