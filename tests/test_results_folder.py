"""Results folders read back: ``pyparbench report DIR`` on any folder,
``merge`` joining records, operator measurements and every host's ceilings
and writing the report; shards of co-located tasks (one CPU each) that
keep to their CPUs and merge; a shard resumed on another node.

The real main job runs here on a tiny suite, each shard on the one CPU a
co-located Slurm task would get (``os.sched_setaffinity`` before it starts,
as Slurm's task/affinity plugin does).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pyparbench import models
from pyparbench.cli import main
from pyparbench.harness import operators as harness_operators
from pyparbench.harness import suite as harness_suite
from pyparbench.harness.folder import read_folder
from pyparbench.harness.merge import MergeError, merge
from pyparbench.machine import fingerprint as machine_fingerprint_module
from pyparbench.machine import peak as machine_peak
from pyparbench.machine.fingerprint import fingerprint_id

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

SUITE = ["--quick", "--models", "mlp-512", "--batches", "1", "--repeats", "1",
         "--no-frameworks"]
CPUS = sorted(os.sched_getaffinity(0))
two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="co-located one-CPU shards need two CPUs")


def start_job(out: Path, cpu: int, *args: str) -> subprocess.Popen[str]:
    """``pyparbench run`` of the tiny suite on one CPU, as a Slurm task of
    ``--cpus-per-task=1`` gets it."""
    return subprocess.Popen([sys.executable, "-P", "-m", "pyparbench", "run", *SUITE, *args,
                             "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


def finish(job: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        out, err = job.communicate(timeout=900)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    return subprocess.CompletedProcess(job.args, job.returncode, out, err)


def run_job(out: Path, cpu: int, *args: str) -> subprocess.CompletedProcess[str]:
    return finish(start_job(out, cpu, *args))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_records(path: Path, recs: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def copy_with(src: Path, dst: Path, **machine: Any) -> list[dict[str, Any]]:
    """A copy of a results folder whose records say they were measured on
    another machine (``machine``: fingerprint fields replaced, ``cpus``
    fields updated); its records."""
    shutil.copytree(src, dst)
    recs = records(dst / "results.jsonl")
    for r in recs:
        r["machine"]["cpus"].update(machine.pop("cpus", None) or {})
        r["machine"].update(machine)
    write_records(dst / "results.jsonl", recs)
    return recs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two shards of the suite on CPUs of their own, and the suite as one
    shard (``--shard 0/1``), all real."""
    if len(CPUS) < 2:
        pytest.skip("co-located one-CPU shards need two CPUs")
    base = tmp_path_factory.mktemp("runs")
    out = {"shard-0": base / "shard-0", "shard-1": base / "shard-1", "whole": base / "whole"}
    # At once, as the tasks of an array and the unsharded run would be.
    jobs = [start_job(out[name], cpu, "--shard", shard) for name, cpu, shard in
            (("shard-0", CPUS[0], "0/2"), ("shard-1", CPUS[1], "1/2"), ("whole", CPUS[0], "0/1"))]
    for done in [finish(j) for j in jobs]:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return out


@two_cpus
def test_co_located_shards_keep_to_their_cpus(runs: dict[str, Path]) -> None:
    for name, cpu in (("shard-0", CPUS[0]), ("shard-1", CPUS[1])):
        folder = runs[name]
        recs = records(folder / "results.jsonl")
        assert recs
        for r in recs:
            cpus = r["machine"]["cpus"]
            assert cpus["allowed"] == [cpu] and cpus["allowed_layout"] == "1 core x 1 CPU"
            # The measuring child ran on that CPU, and so did every pinned worker.
            assert r["resolved"]["process_cpus"] == [cpu], r["resolved"]
            assert all(w == [cpu] for w in r["resolved"]["worker_cpus"]), r["resolved"]
            # The suite was planned for one CPU: no setting asks for more threads.
            assert r["config"]["settings"]["intra_op"] * r["config"]["settings"]["inter_op"] == 1
        (peak,) = folder.glob("peak-*.json")
        assert all(p["cpus"] == [cpu] for p in json.loads(peak.read_text())["points"])
        for op in records(folder / "operators.jsonl") if name == "shard-0" else []:
            assert all(p["cpus"] == [cpu] for p in op.get("points", [])), op["key"]
            # The decoder's generations too, each in its own pinned child.
            assert all(g["settings"]["process_cpus"] == [cpu]
                       for g in op.get("generation", [])), op["key"]
    assert any(op["task"]["kind"] == "generation"
               for op in records(runs["shard-0"] / "operators.jsonl"))
    # Operator measurements run in shard 0 only.
    assert not (runs["shard-1"] / "operators.jsonl").exists()


@two_cpus
def test_merged_shards_equal_the_suite_run_as_one_shard(runs: dict[str, Path],
                                                        tmp_path: Path) -> None:
    report = merge([runs["shard-1"], runs["shard-0"]], tmp_path / "all")
    assert not report.warnings and not report.forced
    got, want = records(tmp_path / "all" / "results.jsonl"), records(
        runs["whole"] / "results.jsonl")
    # Same rows in the same order, each with the same keys; timings aside.
    assert [r["key"] for r in got] == [r["key"] for r in want]
    assert [sorted(r) for r in got] == [sorted(r) for r in want]
    ops_got = records(tmp_path / "all" / "operators.jsonl")
    ops_want = records(runs["whole"] / "operators.jsonl")
    assert [r["key"] for r in ops_got] == [r["key"] for r in ops_want]
    # Every host's ceilings came along, and the report lists both CPU sets.
    peaks = sorted(p.name for p in (tmp_path / "all").glob("peak-*.json"))
    assert peaks == sorted(p.name for r in ("shard-0", "shard-1")
                           for p in runs[r].glob("peak-*.json"))
    summary = json.loads((tmp_path / "all" / "summary.json").read_text())
    alone = json.loads((runs["whole"] / "summary.json").read_text())

    def shape(s: dict[str, Any]) -> Any:
        return ([(m["model"], m["batch"], sorted(c["key"] for c in m["configs"]))
                 for m in s["models"]], s["counts"],
                [(o["name"], [p["threads"] for p in o["points"]])
                 for o in s["operators"]["scaling"]],
                [(o["model"], len(o["nodes"])) for o in s["operators"]["roofline"]],
                [(o["model"], [(p["framework"], p["threads"]) for p in o["points"]])
                 for o in s["operators"]["generation"]])

    assert shape(summary) == shape(alone)
    assert sorted(h["cpus_allowed"] for h in summary["hosts"]) == [[CPUS[0]], [CPUS[1]]]
    assert all(h["peak"] for h in summary["hosts"])
    page = (tmp_path / "all" / "report.html").read_text()
    assert "measured on 2 hosts" in page
    # Each operator's % of peak is of the ceilings of the CPU set that measured it.
    own = read_folder(runs["shard-0"]).op_records
    assert [p["roofline"] for r in ops_got for p in r.get("points", [])] == \
        [p.roofline.as_dict() for r in own for p in r.points or () if p.roofline is not None]
    info = json.loads((tmp_path / "all" / "merge.json").read_text())
    assert info["records"] == len(want) and info["peaks"] == [p[5:-5] for p in peaks]
    # Merging again into the merge's own folder replaces it.
    assert merge([runs["shard-0"], runs["shard-1"]], tmp_path / "all").records == len(want)


@two_cpus
def test_merge_refuses_other_cpu_counts_unless_forced(runs: dict[str, Path],
                                                      tmp_path: Path) -> None:
    wide = tmp_path / "wide"  # as if this task had been given two cores
    recs = copy_with(runs["shard-1"], wide, cpus={"allowed": [0, 1],
                                                   "allowed_layout": "2 cores x 1 CPU"})
    for p in wide.glob("peak-*.json"):
        p.unlink()
    with pytest.raises(MergeError) as e:
        merge([runs["shard-0"], wide], tmp_path / "out")
    msg = str(e.value)
    assert "different CPU allotments" in msg and "CPUs allowed to the process ('1' vs '2')" in msg
    assert "--cpus-per-task" in msg and "--force" in msg and "\n" not in msg
    assert not (tmp_path / "out" / "results.jsonl").exists()
    # The same count laid out otherwise (SMT siblings) is refused too.
    for r in recs:
        r["machine"]["cpus"].update(allowed=[CPUS[1]], allowed_layout="1 core x 2 CPUs")
    write_records(wide / "results.jsonl", recs)
    with pytest.raises(MergeError, match="layout of the allowed CPUs"):
        merge([runs["shard-0"], wide], tmp_path / "out")
    # --force merges, and says so in merge.json and the report.
    assert main(["merge", str(runs["shard-0"]), str(wide), "-o", str(tmp_path / "out"),
                 "--force"]) == 0
    info = json.loads((tmp_path / "out" / "merge.json").read_text())
    assert info["forced"] and "layout of the allowed CPUs" in info["forced"][0]
    assert "Merged with --force" in (tmp_path / "out" / "report.html").read_text()


@two_cpus
def test_report_rebuilds_any_folder(runs: dict[str, Path], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(runs["whole"], folder)
    before = json.loads((folder / "summary.json").read_text())
    assert all(m["graph"]["nodes"] > 0 for m in before["models"])
    (folder / "report.html").unlink()

    def no_build(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the report rebuilt a model")

    # From the records, the plan's graph figures and the peak files alone:
    # a model that is a file could not be rebuilt by name.
    # Each function, and the modules on the report's path that hold it.
    for module in (models, harness_operators, harness_suite):
        monkeypatch.setattr(module, "build", no_build)
    for module in (machine_fingerprint_module, machine_peak):
        monkeypatch.setattr(module, "machine_fingerprint", no_build)
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "report:" in out and (folder / "report.html").is_file()
    after = json.loads((folder / "summary.json").read_text())
    for k in ("models", "counts", "operators", "machine", "conditions", "peak", "hosts"):
        assert after[k] == before[k], k
    # Interrupted while writing a record: the torn line is skipped, said once.
    lines = (folder / "results.jsonl").read_text().splitlines(keepends=True)
    (folder / "results.jsonl").write_text("".join(lines[:-1]) + lines[-1][:40])
    (folder / "summary.json").write_text('{"models": [')  # and the summary cut short
    assert main(["report", str(folder)]) == 0
    err = capsys.readouterr().err
    assert "not a JSON object skipped" in err and f"results.jsonl:{len(lines)}" in err
    assert json.loads((folder / "summary.json").read_text())["counts"]["configs"] == \
        len(lines) - 1
    # Graph figures that are not numbers cost the report its figures, said once.
    graphs = json.loads((folder / "graphs.json").read_text())
    graphs[0]["depth"] = "deep"
    (folder / "graphs.json").write_text(json.dumps(graphs))
    assert main(["report", str(folder)]) == 0
    assert "depth must be a number >= 0, got 'deep'" in capsys.readouterr().err
    assert all(m["graph"] is None
               for m in json.loads((folder / "summary.json").read_text())["models"])


def test_report_refuses_hostile_files_in_one_line(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from test_shards_merge import MACHINE, fake_record, fake_suite

    folder = tmp_path / "f"
    folder.mkdir()
    write_records(folder / "results.jsonl", [fake_record(c) for c in fake_suite(3)])
    op = {"key": "k", "task": {"kind": "scaling", "threads": [1]}, "status": "ok",
          "machine": MACHINE, "points": [{"threads": 1, "summary": {"median": "fast"}}]}
    write_records(folder / "operators.jsonl", [op])
    peak = folder / f"peak-{fingerprint_id(MACHINE)}.json"
    cases = [
        ("operators.jsonl:1", "task.shape", None),
        ("peak-", "measured_at must be a string", {"isa": "avx2", "points": []}),
    ]
    for where, what, peak_doc in cases:
        if peak_doc is not None:
            (folder / "operators.jsonl").unlink()
            peak.write_text(json.dumps(peak_doc))
        with pytest.raises(SystemExit) as e:
            main(["report", str(folder)])
        err = capsys.readouterr().err
        assert e.value.code == 2 and where in err and what in err, err
        assert err.count("\n") == 1 and "Traceback" not in err
    with pytest.raises(SystemExit) as e:
        main(["report", str(tmp_path / "nowhere")])
    assert e.value.code == 2 and "no such file or folder" in capsys.readouterr().err


@two_cpus
def test_a_shard_resumes_on_another_node_of_its_kind(runs: dict[str, Path],
                                                     tmp_path: Path) -> None:
    folder = tmp_path / "requeued"
    # Measured on node-b until it failed: its last record never got written.
    recs = copy_with(runs["shard-1"], folder, host="node-b")
    write_records(folder / "results.jsonl", recs[:-1])
    (old,) = folder.glob("peak-*.json")
    peak = json.loads(old.read_text())
    peak["fingerprint"]["host"] = "node-b"
    old.unlink()
    (folder / f"peak-{fingerprint_id(peak['fingerprint'])}.json").write_text(json.dumps(peak))
    done = run_job(folder, CPUS[1], "--shard", "1/2")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    again = records(folder / "results.jsonl")
    assert [r["key"] for r in again] == [r["key"] for r in recs]
    # Each record keeps its own host; this node measured its own ceilings.
    assert [r["machine"]["host"] for r in again[:-1]] == ["node-b"] * (len(recs) - 1)
    assert again[-1]["machine"]["host"] == platform.node()
    assert len(list(folder.glob("peak-*.json"))) == 2
    summary = json.loads((folder / "summary.json").read_text())
    assert sorted(h["host"] for h in summary["hosts"]) == sorted(["node-b", platform.node()])
    # Another split into the same folder is refused before anything runs.
    done = run_job(folder, CPUS[1], "--shard", "1/3")
    assert done.returncode == 2 and "holds shard 1/2 and this run is shard 1/3" in done.stderr
