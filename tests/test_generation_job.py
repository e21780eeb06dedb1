"""The main job's decoder row: llama-tiny's generation planned at every
level that can afford it, measured for real at 1 (and 2) threads natively
and in llama.cpp and PyTorch where installed (PyTorch past the quick
level), stored as a checked record, resumed, and
shown in the summary, the terminal (80 columns) and the HTML report, and
left out by compare."""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from pyparbench.cli import main
from pyparbench.harness import operators
from pyparbench.harness.folder import read_folder, write_folder_report
from pyparbench.harness.levels import resolve_level
from pyparbench.harness.operators import (
    GENERATION_MODEL,
    GENERATION_NEW,
    generation_frameworks,
    generation_models,
    generation_task,
    run_op_tasks,
)
from pyparbench.harness.store import ResultStore
from pyparbench.harness.suite import AssumedCeilings, estimate_task_s, plan_suite
from pyparbench.machine.fingerprint import fingerprint_id, machine_fingerprint
from pyparbench.machine.peak import Clock, Peak, PeakPoint
from pyparbench.models import build
from pyparbench.models.llama import LLAMA_SIZES
from pyparbench.report.html import render_html
from pyparbench.report.summary import summarize_run
from pyparbench.report.terminal import MAX_WIDTH, print_summary
from pyparbench.resultfiles import OpResult, ResultFileError

THREADS = (1, 2) if len(os.sched_getaffinity(0)) >= 2 else (1,)


def _peak() -> Peak:
    """Ceilings of this machine's fingerprint (a generation is not placed on
    them; the record names them)."""
    point = PeakPoint(threads=1, cpus=(0,), fma_gflops=100.0, fma_gflops_median=90.0,
                      theoretical_gflops=128.0, triad_gbs=10.0, triad_gbs_median=9.0,
                      gather_gbs=5.0, gather_gbs_median=4.0)
    return Peak(isa="avx2", lanes=8, fused=True, chains=12, fma_pipes=2,
                clock=Clock(4000.0, "x", {"x": 4000.0}), measured_clock_mhz=4000.0,
                points=(point,), triad_array_bytes=1, gather_table_bytes=1, gather_dim=64,
                gather_bag=100, llc_bytes=1, fingerprint=machine_fingerprint(),
                measured_at="", seconds=0.0)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, OpResult]]:
    """The generation task run for real into a store (one record)."""
    folder = tmp_path_factory.mktemp("generation")
    task = generation_task(GENERATION_MODEL, THREADS)
    (record,) = run_op_tasks([task], ResultStore(folder / "operators.jsonl"), _peak())
    assert record.ok, record.error
    yield folder, record


def test_every_level_plans_the_decoders_generation_with_an_estimate() -> None:
    for name in ("quick", "default"):
        plan = plan_suite(resolve_level(name, models=["mlp-512"], batches=[1]), cores=2,
                          topo=None, peak=AssumedCeilings.analytic(2))
        (task,) = [t for t in plan.tasks if t.kind == "generation"]
        est = plan.task_s[plan.tasks.index(task)]
        assert (task.model, task.batch, task.threads) == (GENERATION_MODEL, 1, (1, 2))
        assert (task.prompt, task.new) == (LLAMA_SIZES[GENERATION_MODEL].prompt,
                                           GENERATION_NEW)
        # PyTorch's child takes seconds to start: the quick level leaves it out.
        assert task.frameworks == generation_frameworks(torch=name != "quick")
        assert "onnxruntime" not in task.frameworks
        # A child's start and two generations per runtime and thread count:
        # 0.45 s natively and in llama.cpp, 5.5 s in PyTorch.
        starts = sum(5.5 if f == "torch" else 0.45 for f in task.frameworks)
        assert starts * len(task.threads) < est < starts * len(task.threads) + 1.0, est
        if name == "quick":
            assert est < 5.0
        label = next(i for i in plan.as_dict()["operators"] if "generation" in i["label"])
        assert label["estimated_s"] == pytest.approx(est, abs=1e-3)
    # A decoder named among the models gets a generation task of its own.
    plan = plan_suite(resolve_level("quick", models=["llama-bandwidth"], batches=[1]),
                      cores=2, peak=AssumedCeilings.analytic(2))
    assert [t.model for t in plan.tasks if t.kind == "generation"] == [GENERATION_MODEL,
                                                                       "llama-bandwidth"]
    # Without operators, none.
    plan = plan_suite(resolve_level("default", models=["mlp-512"], batches=[1]), cores=2,
                      operators=False, peak=AssumedCeilings.analytic(2))
    assert not plan.tasks


def test_the_estimate_grows_with_threads_and_tokens() -> None:
    graph = build(GENERATION_MODEL, 1)
    peak = AssumedCeilings.analytic(2)
    one = estimate_task_s(generation_task(GENERATION_MODEL, (1,)), graph, peak)
    two = estimate_task_s(generation_task(GENERATION_MODEL, (1, 2)), graph, peak)
    assert 0 < one < two and math.isfinite(two)


def test_a_real_generation_gives_consistent_positive_figures(
        measured: tuple[Path, OpResult]) -> None:
    _, record = measured
    points = record.generation or ()
    frameworks = generation_frameworks()
    assert record.task.frameworks == frameworks
    assert [(g.framework, g.threads) for g in points] == [(f, t) for f in frameworks
                                                          for t in THREADS]
    for g in points:
        for v in (g.ttft_ms, g.tpot_ms, g.tokens_per_s, g.prefill_tokens_per_s,
                  g.bytes_per_token, g.decode_gbs):
            assert v > 0 and math.isfinite(v), g
        assert abs(g.tokens_per_s * g.tpot_ms / 1000 - record.task.batch) < 1e-6
        assert g.prefill_tokens_per_s == pytest.approx(
            record.task.batch * record.task.prompt / (g.ttft_ms / 1000))
        assert len(g.settings["process_cpus"]) == g.threads


def test_the_record_round_trips_and_a_corrupted_one_is_refused_by_name(
        measured: tuple[Path, OpResult]) -> None:
    folder, record = measured
    (line,) = (folder / "operators.jsonl").read_text().splitlines()
    stored = json.loads(line)
    assert OpResult.from_dict(stored) == record
    assert OpResult.from_dict(json.loads(json.dumps(record.as_dict()))) == record

    def corrupt(change: Any) -> dict[str, Any]:
        bad = json.loads(line)
        change(bad)
        return bad

    cases = [
        (lambda r: r["generation"][0].update(tpot_ms=-1.0),
         r"generation\[0\].tpot_ms must be a positive number"),
        (lambda r: r["generation"][0].pop("prefill_tokens_per_s"),
         r"generation\[0\].prefill_tokens_per_s must be a positive number"),
        (lambda r: r["generation"][0].update(threads="2"),
         r"generation\[0\].threads must be an integer"),
        (lambda r: r["generation"][0].update(tokens_per_s=r["generation"][0]["tokens_per_s"] * 2),
         r"generation\[0\].tokens_per_s must be the batch"),
        (lambda r: r["generation"][0].update(settings=[1]),
         r"generation\[0\].settings must be"),
        (lambda r: r.pop("generation"), "generation must be a non-empty list"),
        (lambda r: r["task"].update(new=1), "task.new must be a count from 2"),
        (lambda r: r["task"].pop("model"), "a generation task needs its model"),
        (lambda r: r["task"].update(frameworks="torch"),
         "task.frameworks must be a list of runtime names"),
    ]
    for change, message in cases:
        with pytest.raises(ResultFileError, match=f"operators.jsonl:1: {message}"):
            OpResult.from_dict(corrupt(change), "operators.jsonl:1")


def test_an_interrupted_job_does_not_redo_a_finished_generation(
        measured: tuple[Path, OpResult], monkeypatch: pytest.MonkeyPatch) -> None:
    folder, record = measured

    def no_run(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a finished generation was measured again")

    monkeypatch.setattr(operators, "run_generation", no_run)
    seen: list[Any] = []
    again = list(run_op_tasks([record.task], ResultStore(folder / "operators.jsonl"), _peak(),
                              on_result=lambda task, rec: seen.append(rec)))
    assert again == [record] and seen == [None]  # None: done before


def test_summary_terminal_and_html_show_the_generation_rows(
        measured: tuple[Path, OpResult]) -> None:
    _, record = measured
    summary = summarize_run([], [record], None, fingerprint=record.machine)
    (entry,) = summary["operators"]["generation"]
    assert (entry["model"], entry["prompt"], entry["new"]) == (GENERATION_MODEL, 32, 16)
    assert entry["frameworks"] == list(generation_frameworks())
    for p, g in zip(entry["points"], record.generation or (), strict=True):
        assert p["decode_gbs"] == pytest.approx(g.bytes_per_token / (g.tpot_ms / 1e3) / 1e9)
        assert p["tokens_per_s"] == g.tokens_per_s
    buf = io.StringIO()
    print_summary(summary, Console(file=buf, width=200))
    lines = buf.getvalue().splitlines()
    assert max(len(x) for x in lines) <= MAX_WIDTH, "\n".join(lines)
    text = buf.getvalue()
    assert f"Generation ({GENERATION_MODEL}, prompt 32 + 16 new)" in text
    assert "prefill tok/s" in text and "decode tok/s" in text
    for framework, name in (("llamacpp", "llama.cpp"), ("torch", "PyTorch")):
        assert (name in text) == (framework in entry["frameworks"]), name
    first = entry["points"][0]
    assert f"{first['tokens_per_s']:.0f}" in text
    page = render_html(summary)
    assert "id='generation'" in page and "tokens/s against threads" in page
    assert f"{first['tokens_per_s']:.1f}" in page and "decode GB/s" in page


def test_many_thread_counts_and_every_runtime_fit_80_columns() -> None:
    runtimes = ("native", "llamacpp", "torch", "onnxruntime")
    points = [{"framework": f, "threads": t, "prefill_tokens_per_s": 1234567.0,
               "tokens_per_s": 123456.0, "ttft_ms": 1234.5, "tpot_ms": 0.1,
               "bytes_per_token": 1e6, "decode_gbs": 10.0}
              for f in runtimes for t in (1, 2, 4, 8, 12, 18, 27, 40, 56)]
    summary = {"models": [], "counts": {"skipped": 0}, "operators": {"generation": [
        {"model": "llama-bandwidth", "batch": 1, "prompt": 128, "new": 16,
         "frameworks": list(runtimes), "points": points}]}}
    buf = io.StringIO()
    print_summary(summary, Console(file=buf, width=80))
    lines = buf.getvalue().splitlines()
    assert max(len(x) for x in lines) <= MAX_WIDTH, "\n".join(lines)
    rows = [x for x in lines if "123456" in x]
    assert len(rows) == 4 * 9
    assert sum(1 for x in rows if "ONNX Runtime" in x) == 9


def test_report_dir_rebuilds_the_generation_section(measured: tuple[Path, OpResult],
                                                    tmp_path: Path) -> None:
    folder, record = measured
    (tmp_path / "results.jsonl").write_text("")
    (tmp_path / "operators.jsonl").write_text((folder / "operators.jsonl").read_text())
    read = read_folder(tmp_path)
    assert read.op_records == [record]
    summary, page = write_folder_report(read)
    assert summary["operators"]["generation"][0]["points"][0]["tokens_per_s"] == \
        (record.generation or ())[0].tokens_per_s
    assert "id='generation'" in page.read_text()
    assert record.peak_id == fingerprint_id(machine_fingerprint())


def test_compare_leaves_the_generation_rows_out(measured: tuple[Path, OpResult], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _, record = measured
    generation = summarize_run([], [record], None,
                               fingerprint=record.machine)["operators"]["generation"]
    paths = []
    for name, ns in (("a", 5000), ("b", 6000)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"models": [], "operators": {
            "scaling": [{"name": "g", "points": [{"threads": 1, "median_ns": ns}]}],
            "generation": generation}}))
        paths.append(str(path))
    assert main(["compare", *paths, "--json"]) == 0
    (comparison,) = json.loads(capsys.readouterr().out)["comparisons"]
    assert [r["label"] for r in comparison["rows"]] == ["op g t1"]


def test_a_server_sized_decoder_is_left_to_generate() -> None:
    """The level measures the small decoder and the named ones that read at
    most GENERATION_MAX_BYTES a token; an 8B model's 32 GB are not planned."""
    assert generation_models(["llama-3.1-8b", "llama-bandwidth", "resnet50"]) == (
        "llama-tiny", "llama-bandwidth")
