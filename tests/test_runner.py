"""Fresh-process runs, the JSONL store, resume, and the summary against presets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyparbench.report.summary import summarize_run
from pyparbench.harness.runner import MIN_MEASURE_S, Config, run_configs
from pyparbench.harness.store import ResultStore
from pyparbench.resultfiles import Result
from pyparbench.settings import Settings
from pyparbench.timing import Summary
from pyparbench.harness.levels import resolve_level
from pyparbench.harness.suite import default_suite


def test_results_are_appended_and_resumed(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.jsonl")
    configs = [Config("mlp-512", 2, Settings(), repeats=2),
               Config("mlp-512", 2, Settings(intra_op=2, omp_wait="passive"), repeats=2)]
    first = list(run_configs(configs, store))
    assert [r.status for r in first] == ["ok", "ok"]
    # At least the repeats asked for, and more of these short runs: the child
    # times runs for at least MIN_MEASURE_S.
    assert all(r.ns is not None and len(r.ns) > 2 and r.timing.median > 0
               and sum(r.ns) >= 0.5 * MIN_MEASURE_S * 1e9 for r in first)
    assert first[1].resolved is not None and first[1].resolved["intra_op"] == 2
    assert first[0].machine["onednn"]["cpu_runtime"] == "OpenMP"
    lines = store.path.read_text().splitlines()
    assert len(lines) == 2
    seen = []
    again = list(run_configs(configs, store, on_result=lambda c, r: seen.append(r)))
    assert seen == [None, None]  # both skipped: finished results are kept, not redone
    assert [r.key for r in again] == [c.key for c in configs]
    assert len(store.path.read_text().splitlines()) == 2


def test_a_failing_configuration_is_recorded_and_the_rest_still_runs(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.jsonl")
    configs = [Config("no-such-model", 1, Settings(), repeats=1),
               Config("mlp-512", 1, Settings(), repeats=1)]
    records = list(run_configs(configs, store))
    assert records[0].status == "error" and "unknown model" in (records[0].error or "")
    assert records[1].status == "ok"
    # Not retried unless asked.
    assert [r is None for r in _results(configs, store, retry=False)] == [True, True]
    assert [r is None for r in _results(configs, store, retry=True)] == [False, True]


def _results(configs: list[Config], store: ResultStore, retry: bool) -> list[object]:
    seen: list[object] = []
    list(run_configs(configs, store, retry_failed=retry, on_result=lambda c, r: seen.append(r)))
    return seen


def test_a_line_cut_short_by_a_crash_does_not_lose_the_others(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    store = ResultStore(tmp_path / "r.jsonl")
    store.append({"key": "a", "status": "ok"})
    with store.path.open("a") as fh:
        fh.write('{"key": "b", "sta')  # the process died mid-write
    assert [r["key"] for r in store.records()] == ["a"]
    assert "not complete JSON" in capsys.readouterr().err
    # The next record after the crash is on a line of its own, and kept.
    store.append({"key": "c", "status": "ok"})
    assert [r["key"] for r in store.records()] == ["a", "c"]


def test_summary_compares_the_best_with_each_preset() -> None:
    def rec(name: str, ms: float) -> Result:
        # A distinct setting each (one setting under two names counts once).
        c = Config("m", 1, Settings(intra_op=1 + len(name), name=name))
        ns = ms * 1e6
        return Result(f"{name}-{ms}", c, "ok", 0.0, summary=Summary(ns, ns, ns, ns, ns, 1))

    summary = summarize_run([rec("tensorflow", 4.0), rec("tftuner", 2.0), rec("", 1.0),
                             Result("x", Config("m", 1, Settings()), "error", 0.0,
                                    error="boom")],
                            fingerprint={"host": "h"})
    (r,) = summary["models"]
    assert r["best"]["median_ms"] == 1.0
    assert r["speedup"] == pytest.approx({"tensorflow": 4.0, "tftuner": 2.0})
    assert r["regret"] == {"tftuner": 1.0}  # twice as slow as the best; no Intel run
    assert "intel" not in r["presets"] and r["failed"] == 1 and r["status"] == "partial"


def test_default_suite_has_presets_then_a_sweep_without_oversubscription() -> None:
    configs = default_suite(resolve_level("default", models=["mlp-512"], batches=[1],
                                          repeats=2), cores=2)
    names = [c.settings.name for c in configs]
    assert names[:3] == ["tensorflow", "intel", "tftuner"]
    for level in ("quick", "default", "full"):
        for s in resolve_level(level).sweep(2):
            assert s.threads <= 2
    assert json.loads(configs[0].key)["model"] == "mlp-512"


def test_resume_refuses_another_machines_results(tmp_path: Path) -> None:
    from pyparbench.machine.fingerprint import machine_fingerprint

    store = ResultStore(tmp_path / "r.jsonl")
    theirs = dict(machine_fingerprint(), cpu_model="Some Other CPU")
    store.append({"key": "k", "config": {}, "status": "ok", "schema": 1, "machine": theirs})
    configs = [Config("mlp-512", 1, Settings(), repeats=1)]
    with pytest.raises(ValueError, match='another machine .*cpu_model: "Some Other CPU"'):
        list(run_configs(configs, store))
    # Without resume nothing is read back, so nothing is refused.
    assert [r.status for r in run_configs(configs, store, resume=False)] == ["ok"]


def test_resume_refuses_another_schema(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.jsonl")
    store.append({"key": "k", "config": {}, "status": "ok", "schema": 0})
    with pytest.raises(ValueError, match="schema 0"):
        list(run_configs([Config("mlp-512", 1, Settings(), repeats=1)], store))


def test_a_setting_the_machine_cannot_hold_is_skipped(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.jsonl")
    too_many = Settings(intra_op=4096, affinity="compact")
    (record,) = run_configs([Config("mlp-512", 1, too_many, repeats=1)], store)
    assert record.status == "skipped" and record.error
    assert record.schema == 1 and record.machine["cpus"]["logical"] >= 1


def test_result_records_check_their_status() -> None:
    from pyparbench.resultfiles import Result

    with pytest.raises(ValueError, match="status must be one of"):
        Result("k", {}, "finished", 0.0)
    with pytest.raises(ValueError, match="needs its timings"):
        Result("k", {}, "ok", 0.0)
    with pytest.raises(ValueError, match="lacks"):
        Result.from_dict({"key": "k"})


def test_settings_grid_crosses_and_filters() -> None:
    from pyparbench.harness.grid import ALL, Grid

    got = [s.label() for s in Grid({"inter_op": ALL, "affinity": ("compact",)}).expand(4)]
    assert got == ["sync 1x4 library/onednn/openmp compact",
                   "async 2x2 library/onednn/openmp compact",
                   "async 4x1 library/onednn/openmp compact"]
    loose = Grid({"inter_op": (1, 2), "intra_op": (1, 2, 3)}, fill=False).expand(4)
    assert sorted((s.inter_op, s.intra_op) for s in loose) == [(1, 1), (1, 2), (1, 3), (2, 1),
                                                               (2, 2)]
    with pytest.raises(ValueError, match="unknown knob"):
        Grid({"threads": (1,)})
    with pytest.raises(ValueError, match="thread axes"):
        Grid({"library": ALL})


def test_native_name_lists_match_the_python_ones() -> None:
    from pyparbench import _core, choices
    from pyparbench.threading import KINDS

    assert tuple(_core.ops.LIBRARIES) == choices.LIBRARIES
    assert KINDS == choices.POOLS
