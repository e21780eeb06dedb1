"""`pyparbench run` as a whole: what it prints and records when a part of it fails.

These run the main job in this process (through the command's entry point),
on the smallest suite, so that a part of it can be replaced by one that fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pyparbench.cli import main

SUITE = ("run", "--quick", "--models", "mlp-512", "--batches", "1", "--repeats", "1",
         "--no-operators")


@pytest.fixture
def ceilings_cached(seed_peak: Callable[[Path], Path], tmp_path: Path) -> None:
    """The jobs here run into ``tmp_path / "r"``: their ceilings are cached there."""
    seed_peak(tmp_path / "r")


def run_main_job(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    try:
        code = main([*SUITE, *args])
    except SystemExit as e:
        code = int(e.code or 0)
    return code, capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.usefixtures("ceilings_cached")
def test_the_main_job_survives_a_failing_recommender(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    def broken(*args: object, **kw: object) -> None:
        raise KeyError("node 'conv1/relu' (conv2d) has no calibrated time")

    monkeypatch.setattr("pyparbench.harness.job.recommend", broken)
    out_dir = tmp_path / "r"
    code, out = run_main_job(capsys, "--no-frameworks", "-o", str(out_dir))
    # Everything else measured; the exit status of a run with a failed configuration.
    assert code == 1, out
    records = [json.loads(x) for x in (out_dir / "results.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["status"] != "ok"]
    assert len(failed) == 1 and failed[0]["config"]["settings"]["name"] == "recommended"
    assert "the recommender failed: KeyError" in failed[0]["error"]
    assert "conv1/relu" in failed[0]["error"]
    assert len(records) >= 4 and all(r["status"] == "ok" for r in records if r not in failed)
    # The terminal, the summary and the report say what failed.
    assert "recommender: no setting for mlp-512 b1: the recommender failed: KeyError" in out
    assert "1 configuration(s) failed" in out
    summary = json.loads((out_dir / "summary.json").read_text())
    assert any("the recommender failed" in f["error"] for f in summary["failures"])
    assert "the recommender failed: KeyError" in (out_dir / "report.html").read_text()
    # Resumed: recorded once, not again.
    code, _ = run_main_job(capsys, "--no-frameworks", "-o", str(out_dir))
    again = (out_dir / "results.jsonl").read_text().splitlines()
    assert code == 1 and len(again) == len(records)


@pytest.mark.slow
@pytest.mark.usefixtures("ceilings_cached")
def test_missing_frameworks_are_named_with_the_extra_to_install(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setattr("pyparbench.harness.job.installed_frameworks", lambda: ())
    code, out = run_main_job(capsys, "--no-recommend", "-o", str(tmp_path / "r"))
    assert code == 0, out
    line = next(ln for ln in out.splitlines() if "frameworks not installed" in ln)
    # As printed, the extra in its brackets (rich would read [frameworks] as markup).
    assert "onnxruntime, openvino, tensorflow, torch (pip install 'pyparbench[frameworks]')" in \
        " ".join(out.split()), line


@pytest.mark.slow
@pytest.mark.usefixtures("ceilings_cached")
def test_a_run_keeps_its_plan_with_estimated_and_measured_seconds(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_dir = tmp_path / "r"
    code, out = run_main_job(capsys, "--no-frameworks", "--no-recommend", "-o", str(out_dir))
    assert code == 0, out
    plan = json.loads((out_dir / "plan.json").read_text())
    records = (out_dir / "results.jsonl").read_text().splitlines()
    assert len(plan["configurations"]) == len(records)
    for item in plan["configurations"]:
        assert item["estimated_s"] > 0 and item["measured_s"] > 0
    assert plan["estimated_s"] == pytest.approx(
        sum(i["estimated_s"] for i in plan["configurations"] + plan["operators"]), abs=0.01)


# -- run --dry-run ---------------------------------------------------------------------

TOPOLOGIES = ("package:1 core:1 pu:1", "package:1 core:2 pu:2", "package:1 core:16 pu:1",
              "package:2 core:14 pu:2", "package:2 core:28 pu:2", "package:8 core:24 pu:2")


def dry_run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    try:
        code = main(["run", "--dry-run", "--json", *args])
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    assert code == 0, out.err
    return dict(json.loads(out.out))


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_a_dry_run_plans_any_machine(capsys: pytest.CaptureFixture[str], topology: str) -> None:
    from pyparbench.threading.topology import topology as load

    plan = dry_run(capsys, "--quick", "--no-recommend", "--topology", topology)
    topo = load(topology)
    assert plan["machine"] == repr(topology) and plan["logical_cpus"] == len(topo.allowed_cpus)
    configs = plan["configurations"]
    assert isinstance(configs, list) and configs
    assert all(c["estimated_s"] > 0 and c["label"] for c in configs)
    # The presets are this topology's: TensorFlow's uses every logical CPU.
    tf = next(c["label"] for c in configs if " tensorflow " in c["label"])
    assert f"x{len(topo.allowed_cpus)} " in tf
    items = configs + plan["operators"]
    total = sum(i["estimated_s"] for i in items)
    # Each figure rounded to the millisecond.
    assert plan["estimated_s"] == pytest.approx(total, abs=0.0005 * (len(items) + 1))
    assert plan["budget_s"] is None or plan["estimated_s"] <= plan["budget_s"] or \
        not any(c for c in configs if " recommended " not in c["label"]
                and not any(f" {p} " in c["label"] for p in ("tensorflow", "intel", "tftuner")))
    assert "assumed, not measured" in str(plan["ceilings"])


def test_a_dry_run_says_what_the_budget_drops_and_the_recommended_setting(
        capsys: pytest.CaptureFixture[str]) -> None:
    plan = dry_run(capsys, "--topology", "package:2 core:28 pu:2")
    labels = [c["label"] for c in plan["configurations"]]
    assert any(" recommended " in x for x in labels)
    assert plan["dropped"] and all("budget" in d["why"] for d in plan["dropped"])
    full = dry_run(capsys, "--full", "--no-recommend", "--topology", "package:2 core:28 pu:2")
    assert full["budget_s"] is None and not full["dropped"]
    assert full["estimated_s"] > plan["estimated_s"]


def test_dry_run_options_are_refused_for_a_measuring_run(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for extra in (("--topology", "package:1 core:2 pu:1"), ("--json",)):
        with pytest.raises(SystemExit) as e:
            main([*SUITE, *extra, "-o", str(tmp_path / "r")])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"{extra[0]} is for --dry-run: a run measures this machine" in err
    assert not (tmp_path / "r").exists()


def test_a_dry_run_lists_what_it_leaves_out_under_each_reason() -> None:
    from io import StringIO

    from rich.console import Console

    from pyparbench.harness.ui import ConsoleUI

    grid = "a grid setting left out to fit the 100 s budget (--full runs it)"
    runs = "a framework run left out to fit the 100 s budget (--full runs it)"
    dropped = [{"label": f"item {i}", "estimated_s": 1.0, "why": why}
               for i, why in enumerate([grid, runs, grid])]
    out = StringIO()
    ConsoleUI(Console(file=out, width=200)).plan(
        {"level": "default", "machine": "m", "cores": 2, "logical_cpus": 2, "shard": None,
         "ceilings": "c", "configurations": [], "operators": [], "dropped": dropped,
         "notes": [], "budget_s": 100.0, "confirm_reserve_s": 0.0, "estimated_s": 0.0})
    lines = [x.strip() for x in out.getvalue().splitlines()]
    at = lines.index(f"left out (2): {grid}:")
    assert lines[at + 1:at + 3] == ["1.0 s  item 0", "1.0 s  item 2"]
    at = lines.index(f"left out (1): {runs}:")
    assert lines[at + 1] == "1.0 s  item 1"
