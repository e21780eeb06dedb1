"""The typed result record (pyparbench.resultfiles.Result): written exactly as
results.jsonl has always held it, read back through resultfiles' checks,
and the one HTML page scaffolding of the report and of compare."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pyparbench.harness.runner import Config
from pyparbench.harness.store import ResultStore
from pyparbench.machine.fingerprint import machine_fingerprint
from pyparbench.report.summary import summarize_run
from pyparbench.resultfiles import Result, ResultFileError, RunConfig, read_result
from pyparbench.settings import Settings
from pyparbench.timing import Summary

DATA = Path(__file__).resolve().parent / "data" / "compare"
PACKAGE = Path(__file__).resolve().parents[1] / "pyparbench"


def _today() -> Result:
    c = Config("mlp-512", 1, Settings(intra_op=2, affinity="compact", name="recommended"),
               repeats=3, predicted_ns=1.5e6, round=1)
    return Result(c.key, c, "ok", 1796000000.0, machine_fingerprint(), ns=[1e6, 2e6, 3e6],
                  summary=Summary(2e6, 1.5e6, 2.5e6, 1e6, 3e6, 3), resolved={"intra_op": 2},
                  per_instance=[[1e6, 2e6, 3e6]])


def test_a_record_is_written_as_results_jsonl_always_held_it() -> None:
    r = _today()
    d = r.as_dict()
    assert list(d) == ["key", "config", "status", "started", "machine", "ns", "summary",
                       "resolved", "per_instance", "schema"]
    assert list(d["config"]) == ["model", "batch", "settings", "repeats", "warmup",
                                 "predicted_ns", "round"]
    assert d["summary"] == {"median": 2e6, "q1": 1.5e6, "q3": 2.5e6, "min": 1e6, "max": 3e6,
                            "n": 3}
    assert d["config"]["settings"] == r.config.settings.as_dict() and d["schema"] == 1
    line = json.dumps(d)
    back = read_result("line 1", json.loads(line))
    assert json.dumps(back.as_dict()) == line
    assert (back.config.key, back.summary, back.ns) == (r.config.key, r.summary, r.ns)
    # A failed one has no timings, and says so when asked for them.
    failed = Result(r.key, r.config, "error", 0.0, error="boom")
    assert "summary" not in failed.as_dict() and "ns" not in failed.as_dict()
    with pytest.raises(ValueError, match="a 'error' result has no timings"):
        failed.timing


@pytest.mark.parametrize("machine", ["machine_a", "machine_b"])
def test_the_stored_fixtures_read_back_typed(machine: str) -> None:
    # machine_a's records predate the schema field and graph_opt: both read.
    lines = (DATA / machine / "results.jsonl").read_text().splitlines()
    results = [read_result(f"{machine}:{i}", json.loads(x)) for i, x in enumerate(lines, 1)]
    assert [r.config.model for r in results][:2] == ["mlp-512", "mlp-512"]
    ok = [r for r in results if r.ok]
    assert all(isinstance(r.summary, Summary) and r.timing.median > 0 for r in ok)
    assert ok[0].config.name == "tensorflow" and ok[0].config.settings.inter_op > 1
    failed = [r for r in results if not r.ok]
    assert all(r.summary is None and r.error for r in failed)
    json.dumps(summarize_run(results, fingerprint={"host": "h"}), allow_nan=False)


def _good() -> dict[str, Any]:
    return json.loads(json.dumps(_today().as_dict()))


@pytest.mark.parametrize("change,message", [
    (lambda d: d.pop("key"), re.escape("result record lacks ['key']")),
    (lambda d: d["summary"].update(q1="fast"), 'summary.q1 must be a finite number, got "fast"'),
    (lambda d: d["summary"].pop("max"), "summary.max must be a finite number, got null"),
    (lambda d: d["summary"].update(n=0), "summary.n must be a count of runs >= 1, got 0"),
    (lambda d: d["config"].update(repeats=0), "config.repeats must be an integer >= 1, got 0"),
    (lambda d: d["config"].update(round=True), "config.round must be an integer >= 0"),
    (lambda d: d["config"].update(predicted_ns=-1), "config.predicted_ns = -1"),
    (lambda d: d["config"].update(framework=3), "config.framework must be a name, got 3"),
    (lambda d: d["config"]["settings"].update(turbo=True), "config.settings: .*turbo"),
    (lambda d: d["config"]["settings"].update(scheduler="warp"),
     "config.settings: scheduler must be one of"),
    (lambda d: d.update(started="now"), 'started must be a time, got "now"'),
    (lambda d: d.update(resolved=[1]), "resolved must be a JSON object"),
    (lambda d: d.update(ns=[1.0, float("1e300")]), r"ns\[1\] = 1e\+300 is not a plausible"),
])
def test_a_bad_record_is_refused_naming_the_field(change: Any, message: str) -> None:
    d = _good()
    change(d)
    with pytest.raises(ResultFileError, match=message) as e:
        read_result("results.jsonl:7", d)
    assert str(e.value).startswith("results.jsonl:7: ")


def test_the_store_reads_its_results_back_typed(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results.jsonl")
    r = _today()
    store.append(r)
    store.append({"key": "op", "task": {"kind": "nodes"}, "status": "ok", "schema": 1,
                  "machine": r.machine})
    with pytest.raises(ValueError, match="record 2: result record lacks"):
        store.resumable(r.machine, read_result)
    (tmp_path / "results.jsonl").write_text(json.dumps(r.as_dict()) + "\n")
    ((key, back),) = store.resumable(r.machine, read_result)
    assert key == r.key and back.as_dict() == r.as_dict()


def test_a_run_config_is_the_record_config_and_the_runner_config() -> None:
    c = Config("mlp-512", 1, Settings(), framework="torch")
    assert isinstance(c, RunConfig) and c.mode  # the framework's default mode, resolved
    plain = RunConfig.from_dict(c.as_dict())
    assert plain.key == c.key and plain.setting_key == c.setting_key
    assert RunConfig.from_dict({**c.as_dict(), "round": 2}).setting_key == c.setting_key
    named = RunConfig("m", 1, Settings(name="intel"))
    assert named.setting_key == RunConfig("m", 1, Settings()).setting_key != named.key


def test_one_html_page_scaffolding() -> None:
    # The report's page and compare's are built by pyparbench/report/page.py
    # alone: the document head, the styles, and embedded figures.
    found: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        for what, pattern in (("doctype", r"<!DOCTYPE"), ("style", r"<style>"),
                              ("png", r"data:image/png"), ("savefig", r"\.savefig\(")):
            if re.search(pattern, text):
                found.setdefault(what, []).append(path.relative_to(PACKAGE).as_posix())
    assert found == {k: ["report/page.py"] for k in ("doctype", "style", "png", "savefig")}


def test_one_jsonl_reader_skips_what_is_not_an_object_and_keeps_the_rest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The store on resume, a folder read back and a merge read JSONL alike:
    # a torn line (the last one of a killed run, or one in the middle once a
    # resumed run went on after it) and any line that is not one JSON object
    # are skipped and said; every whole record is kept.
    from pyparbench.harness.folder import read_checked
    from pyparbench.resultfiles import read_jsonl

    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"key": "a"}\n{"key": "b", "sta\n{"key": "c"}\n[1]\n\n{"key": "d", "x": [1,')
    read = read_jsonl(path, 1 << 20)
    assert [(w, r["key"]) for w, r in read.records] == [(f"{path}:1", "a"), (f"{path}:3", "c")]
    assert [s.split(" (")[0] for s in read.skipped] == [f"{path}:2", f"{path}:4", f"{path}:6"]
    warning = read.warning()
    assert warning is not None and warning.startswith("3 line(s) that are not a JSON object")
    assert [r["key"] for r in ResultStore(path).records()] == ["a", "c"]
    assert capsys.readouterr().err == f"warning: {warning}\n"
    warnings: list[str] = []
    assert [r["key"] for _, r in read_checked(path, lambda w, r: None, 1 << 20, warnings)] \
        == ["a", "c"]
    assert warnings == [warning]
    path.write_bytes(b'{"key": "a"}\n')
    assert read_jsonl(path, 1 << 20).warning() is None
    with pytest.raises(ResultFileError, match="byte limit"):
        read_jsonl(path, 5)


def test_an_operator_record_reads_back_to_the_line_it_was() -> None:
    # OpResult.as_dict writes the line the main job writes (as annotate
    # places each point): read back, it is the same record and the same line.
    import json

    from pyparbench.harness.operators import OpShape, OpTask, annotate
    from pyparbench.machine.peak import Ceiling
    from pyparbench.resultfiles import OpResult, ResultFileError
    from pyparbench.settings import Settings
    from pyparbench.timing import summarize

    class Roof:
        def ceiling(self, op: str, flops: float, nbytes: float, s: float,
                    threads: int) -> Ceiling:
            return Ceiling(flops / nbytes, flops / s / 1e9, nbytes / s / 1e9, "compute",
                           100.0, "GFLOP/s", 12.5)

    shape = OpShape("gemm", "gemm 1x2x3", "src", {"m": 1, "n": 2, "k": 3}, "quick")
    ns = [1000.0, 1200.0, 1100.0]
    tasks: list[tuple[OpTask, dict[str, Any]]] = [(OpTask("scaling", (1, 2), shape, repeats=3),
              {"points": [{"threads": t, "cpus": list(range(t)), "ns": ns,
                           "summary": summarize(ns).as_dict(), "flops": 12, "bytes": 24}
                          for t in (1, 2)]}),
             (OpTask("nodes", (4,), model="mlp", batch=8),
              {"settings": Settings(intra_op=4).as_dict(), "threads": 4,
               "nodes": [{"id": 3, "name": "fc", "op": "linear", "flops": 100, "bytes": 40,
                          "shape": [8, 16], "ns": [100, 120], "median_ns": 110.0}],
               "graph_ns": summarize([500.0, 600.0]).as_dict()})]
    for task, out in tasks:
        base = {"key": task.key, "task": task.as_dict(), "started": 1.5, "schema": 1,
                "machine": {"host": "h"}, "peak_id": "0123456789ab", "status": "ok"}
        roof: Any = Roof()
        placed = annotate(OpResult.from_dict({**base, **out}, placed=False), roof)
        line = json.dumps(placed.as_dict())
        assert OpResult.from_dict(json.loads(line)) == placed
        assert "roofline" in line and json.loads(line)["task"] == task.as_dict()
        with pytest.raises(ResultFileError, match="roofline"):
            OpResult.from_dict({**base, **out}, "operators.jsonl:1")
    failed = {"key": "k", "task": {"kind": "nodes", "threads": [1], "repeats": 5},
              "status": "timeout",
              "error": "ran past 600 s", "machine": {}}
    assert OpResult.from_dict(failed).as_dict() == {**failed, "started": 0.0, "schema": 1}
    with pytest.raises(ResultFileError, match=r"x:1: points\[0\].flops"):
        OpResult.from_dict({**failed, "task": tasks[0][0].as_dict(), "status": "ok",
                            "points": [{"threads": 1, "summary": summarize(ns).as_dict(),
                                        "flops": "many", "bytes": 1}]}, "x:1")
