"""The main job as a report: results.jsonl, summary.json and report.html
hold the measured numbers; the terminal summary fits 80 columns; a failed
configuration is reported and the rest still are; the suite levels fit
their time budgets."""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest
from rich.console import Console

from pyparbench.choices import PRESETS
from pyparbench.report import write_report
from pyparbench.report.html import model_anchor, render_html
from pyparbench.report.legend import SettingsLegend
from pyparbench.report.plots import effects_png
from pyparbench.report.summary import summarize_run
from pyparbench.report.terminal import MAX_WIDTH, print_summary
from pyparbench.harness.store import ResultStore
from pyparbench.harness.runner import Config, run_configs
from pyparbench.resultfiles import Result, RunConfig
from pyparbench.settings import Settings
from pyparbench.timing import Summary
from pyparbench.harness.levels import BUDGET_S, DEFAULT_MODELS, resolve_level
from pyparbench.harness.job import _plan_line
from pyparbench.harness.suite import (
    FRAMEWORK_PRESETS,
    FRAMEWORK_RUNS,
    KEPT_FRAMEWORK_RUNS,
    busy_slowdown,
    framework_settings,
    plan_suite,
)

REPO = Path(__file__).resolve().parents[1]
TINY = ("--quick", "--models", "mlp-512", "--batches", "1", "--repeats", "2")
PNG = b"\x89PNG\r\n\x1a\n"
VOID = {"meta", "img", "br", "hr", "link", "input"}


def _pyparbench() -> list[str]:
    script = Path(sys.executable).parent / "pyparbench"
    return [str(script)] if script.exists() else [sys.executable, "-P", "-m", "pyparbench"]


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_pyparbench(), "run", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, check=False)


class _Page(HTMLParser):
    """Checks nesting (every non-void tag closed, in order) and collects
    ids and images."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.ids: set[str] = set()
        self.images: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "img":
            self.images.append((str(a.get("alt")), str(a.get("src"))))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()


def _check_page(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    page.close()
    assert not page.errors and not page.stack, (page.errors, page.stack)
    assert "http://" not in text and "https://" not in text  # nothing fetched
    for alt, src in page.images:
        assert src.startswith("data:image/png;base64,"), alt
        try:
            data = base64.b64decode(src.split(",", 1)[1], validate=True)
        except binascii.Error as e:
            raise AssertionError(f"{alt}: not base64 ({e})") from None
        assert data.startswith(PNG) and b"IHDR" in data[:32], alt
    return page


def _medians(records: list[dict[str, Any]]
             ) -> dict[tuple[str, int, str], list[dict[str, Any]]]:
    """The native executor's ok records per model, batch and precision."""
    out: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["status"] == "ok" and not r["config"].get("framework"):
            c = r["config"]
            out[(c["model"], c["batch"], c["settings"].get("precision", "fp32"))].append(r)
    return out


def _identity(r: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in r["config"]["settings"].items() if k != "name"},
                      sort_keys=True)


def _check_frameworks(records: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """Every framework run is paired with the native run of the same setting."""
    runs = [r for r in records if r["config"].get("framework")
            and "preset" not in (r.get("resolved") or {})]
    items = summary["framework_overhead"] or []
    assert len(items) == len(runs)
    # A framework under its own presets (OpenVINO's hints), against itself
    # under the shared setting.
    hints = [r for r in records if "preset" in (r.get("resolved") or {})]
    assert [(i["model"], i["preset"], i["ms"]) for i in summary["framework_presets"] or []] \
        == [(r["config"]["model"], r["config"]["settings"]["name"], r["summary"]["median"] / 1e6)
            for r in hints]
    native = {(r["config"]["model"], r["config"]["batch"],
               json.dumps(r["config"]["settings"], sort_keys=True)): r["summary"]["median"]
              for r in records if not r["config"].get("framework")}
    for r, item in zip(runs, items, strict=True):
        c = r["config"]
        assert (item["framework"], item["mode"]) == (c["framework"], c["mode"])
        assert item["framework_ms"] == r["summary"]["median"] / 1e6
        key = (c["model"], c["batch"], json.dumps(c["settings"], sort_keys=True))
        assert item["native_ms"] == native[key] / 1e6
        assert item["ratio"] == pytest.approx(item["framework_ms"] / item["native_ms"])


def _check_run_folder(out: Path) -> dict[str, Any]:
    """The three files are there and hold the measured numbers."""
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    page = _check_page((out / "report.html").read_text())
    assert records and all(r["status"] == "ok" for r in records), records
    assert all(r["machine"]["cpu_model"] == summary["machine"]["cpu_model"] for r in records)
    # Confirmation rounds measure a row's settings in turns, the suite one by one.
    for r in records:
        assert ("turns" in (r.get("resolved") or {})) == bool(r["config"].get("round")), r
    by_model = _medians(records)
    assert {(m["model"], m["batch"], m["precision"]) for m in summary["models"]} == \
        set(by_model)
    for m in summary["models"]:
        rs = by_model[(m["model"], m["batch"], m["precision"])]
        # The summary's latencies are the JSONL medians: per setting (its
        # name aside), the median over rounds of each round's median of the
        # processes that measured it.
        per: dict[str, list[float]] = defaultdict(list)
        rounds: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in rs:
            per[_identity(r)].append(r["summary"]["median"])
            rounds[_identity(r)][r["config"].get("round", 0)].append(r["summary"]["median"])
        figure = {k: statistics.median(statistics.median(x) for x in v.values())
                  for k, v in rounds.items()}
        assert m["best"]["median_ns"] == min(figure.values())

        def named(name: str, rs: list[dict[str, Any]] = rs) -> float:
            return figure[_identity(next(r for r in rs
                                         if r["config"]["settings"]["name"] == name))]
        best_id = min(figure, key=lambda k: figure[k])

        def paired(name: str, rs: list[dict[str, Any]] = rs) -> float:
            # preset / best read in pairs of rounds (the figures' ratio without one).
            ident = _identity(next(r for r in rs if r["config"]["settings"]["name"] == name))
            a, b = rounds[best_id], rounds[ident]
            shared = sorted(set(a) & set(b))
            if ident == best_id:
                return 1.0
            if not shared:
                return figure[ident] / figure[best_id]
            return math.exp(statistics.median(
                math.log(statistics.median(b[k]) / statistics.median(a[k])) for k in shared))
        for name, p in m["presets"].items():
            assert p["median_ns"] == named(name)
            assert m["speedup"][name] == pytest.approx(paired(name))
        assert set(m["presets"]) == set(PRESETS)
        assert m["regret"]["tftuner"] >= 0.0
        if m["precision"] != "fp32":
            # Another precision the CPU runs natively: its presets alone.
            assert {r["config"]["settings"]["name"] for r in rs} == set(PRESETS)
            continue
        # The recommender's setting ran under its own name, with its prediction.
        rec = next(r for r in rs if r["config"]["settings"]["name"] == "recommended")
        assert m["chosen"]["recommended"]["median_ns"] == named("recommended")
        assert m["chosen"]["recommended"]["processes"] == len(per[_identity(rec)])
        # Its regret is read in pairs: the median over the rounds that
        # measured it and the best of the ratio of their round medians.
        best_id = next(k for k, v in figure.items() if v == m["best"]["median_ns"])
        ours, theirs = rounds[_identity(rec)], rounds[best_id]
        ratios = [statistics.median(ours[k]) / statistics.median(theirs[k])
                  for k in ours if k in theirs]
        paired = math.exp(statistics.median(math.log(x) for x in ratios))
        assert m["regret"]["recommended"] == pytest.approx(
            0.0 if best_id == _identity(rec) else max(0.0, paired - 1.0))
        pred = m["prediction"]
        assert pred["predicted_ms"] == rec["config"]["predicted_ns"] / 1e6 > 0
        assert pred["error"] == pytest.approx(pred["predicted_ms"] / pred["measured_ms"] - 1)
        assert {"scheduler", "operator", "library_eigen", "library_blas"} <= set(m["effects"])
        assert sorted(c["median_ns"] for c in m["configs"]) == sorted(figure.values())
        # Each model's section and its plots are on the page.
        anchor = model_anchor(m["model"], m["batch"])
        assert anchor in page.ids
        alts = [alt for alt, _ in page.images
                if alt.startswith(f"{m['model']} batch {m['batch']}:")]
        assert len(alts) == 3, alts  # heatmap, speed-up bars, layer effects
    alts = {alt for alt, _ in page.images}
    assert {"operator scaling curves", "roofline",
            "scheduler, operator and library effects"} <= alts
    ops = summary["operators"]
    assert {s["kind"] for s in ops["scaling"]} == {"gemm", "conv", "embedding"}
    for s in ops["scaling"]:
        for p in s["points"]:
            assert p["bound"] in ("compute", "memory", "gather") and p["percent"] > 0
            assert p["intensity"] == pytest.approx(p["flops"] / p["bytes"])
    (roof,) = ops["roofline"]
    assert roof["nodes"] and all(n["op"] in ("linear", "matmul", "conv2d", "embedding_bag")
                                 for n in roof["nodes"])
    assert summary["peak"]["points"]
    _check_frameworks(records, summary)
    return summary


@pytest.mark.slow
def test_quick_run_from_the_repository_root(tmp_path: Path,
                                           seed_peak: Callable[[Path], Path]) -> None:
    # The source folder is right there, and must not shadow the installed package.
    assert (REPO / "pyparbench" / "__init__.py").exists()
    out = tmp_path / "results"
    seed_peak(out)  # the next test measures the ceilings and caches them
    proc = _run(REPO, *TINY, "-o", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _check_run_folder(out)
    lines = proc.stdout.rstrip().splitlines()
    assert lines[-1] == f"report: {out / 'report.html'}"
    # The tables: their rules and their rows.
    table = [x for x in lines if "─" in x or x.lstrip().startswith("mlp-512")]
    assert len(table) >= 2 and max(len(x) for x in table) <= MAX_WIDTH
    assert "mlp-512" in proc.stdout and "xtuner" in proc.stdout


@pytest.mark.slow
def test_quick_run_from_another_folder_with_a_relative_path_then_resume(tmp_path: Path
                                                                       ) -> None:
    proc = _run(tmp_path, *TINY, "-o", "rel")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "rel"
    first = _check_run_folder(out)
    n = len((out / "results.jsonl").read_text().splitlines())
    again = _run(tmp_path, *TINY, "-o", "rel")
    assert again.returncode == 0, again.stderr
    assert "(cached)" in again.stdout  # the ceilings are measured once per machine
    assert len((out / "results.jsonl").read_text().splitlines()) == n
    second = _check_run_folder(out)
    assert [m["best"]["median_ns"] for m in second["models"]] == \
        [m["best"]["median_ns"] for m in first["models"]]


@pytest.mark.slow
def test_a_resumed_run_with_a_smaller_plan_still_reports_every_finished_result(
        tmp_path: Path) -> None:
    """A resumed run fitted to its budget under more load plans fewer
    configurations than the run it resumes: the folder's summary keeps the
    results its plan left out."""
    small = ("--quick", "--batches", "1", "--repeats", "2", "--no-operators", "--no-recommend",
             "--no-frameworks", "-o", "out")
    first = _run(tmp_path, *small, "--models", "mlp-512", "dlrm-kaggle")
    assert first.returncode == 0, first.stdout + first.stderr
    out = tmp_path / "out"
    lines = len((out / "results.jsonl").read_text().splitlines())
    again = _run(tmp_path, *small, "--models", "mlp-512")
    assert again.returncode == 0, again.stdout + again.stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == lines  # nothing measured
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["configs"] == lines
    assert {m["model"] for m in summary["models"]} == {"mlp-512", "dlrm-kaggle"}


def test_a_failed_configuration_is_reported_and_the_rest_still_are(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results.jsonl")
    configs = [Config("mlp-512", 1, Settings(intra_op=1), repeats=2),
               Config("no-such-model", 1, Settings(), repeats=1),
               Config("mlp-512", 1, Settings(intra_op=1, library="eigen"), repeats=2)]
    records = list(run_configs(configs, store))
    assert [r.status for r in records] == ["ok", "error", "ok"]
    # One more of mlp-512's settings failing, as a crash would record it.
    crashed = replace(records[2], status="error", error="exit status -11: Segmentation fault",
                      key="crashed", summary=None)
    summary, page = write_report(tmp_path, [*records, crashed])
    assert summary["counts"] == {"configs": 4, "ok": 2, "failed": 2, "skipped": 0,
                                 "operator_tasks": 0, "operator_failed": 0}
    assert {f["model"] for f in summary["failures"]} == {"no-such-model", "mlp-512"}
    assert "unknown model" in next(f["error"] for f in summary["failures"]
                                   if f["model"] == "no-such-model")
    by_name = {m["model"]: m for m in summary["models"]}
    mlp = by_name["mlp-512"]
    assert mlp["status"] == "partial" and mlp["failed"] == 1 and mlp["ok"] == 2
    assert mlp["total"] == 3 and len(mlp["configs"]) == 2
    assert mlp["best"]["median_ns"] == min(r.timing.median for r in records if r.ok)
    assert by_name["no-such-model"]["status"] == "failed"
    assert by_name["no-such-model"]["best"] is None
    text = page.read_text()
    _check_page(text)
    assert "1 of 3 configurations failed" in text
    assert "Failed configurations" in text and "Segmentation fault" in text
    assert "Every configuration of this model failed" in text
    buf = io.StringIO()
    print_summary(summary, Console(file=buf, width=120))
    said = " ".join(buf.getvalue().split())
    assert "2 configuration(s) failed" in said
    row = next(x for x in buf.getvalue().splitlines() if "no-such-model" in x)
    assert "failed" in row and "x" not in row.replace("no-such-model", "")


def _synthetic_summary(n_models: int) -> dict[str, Any]:
    """A summary of long names and labels, to test the terminal width."""
    recs: list[Result] = []
    for i in range(n_models):
        for k, (name, ms) in enumerate((("tensorflow", 9.0), ("intel", 7.0), ("tftuner", 5.5),
                                        ("recommended", 5.15), ("", 5.0))):
            # Five distinct settings (one setting under two names would count once).
            s = Settings(scheduler="async", inter_op=2, intra_op=10 + k, operator="framework",
                         library="eigen", pool="eigen", affinity="compact", omp_wait="passive",
                         name=name)
            recs.append(_result(f"{i}{name}", RunConfig(f"inception-v3-long-name-{i}", 1024, s),
                                ms * 1e9))
        for fw, mode, ms in (("tensorflow", "function", 6.0), ("torch", "eager", 7.5),
                             ("torch", "script", 5.5), ("onnxruntime", "all", 4.5)):
            recs.append(_result(f"{i}{fw}{mode}",
                                replace(recs[-1].config, framework=fw, mode=mode), ms * 1e9))
    return summarize_run(recs, fingerprint={"host": "h"})


def _result(key: str, config: RunConfig, ns: float) -> Result:
    """An ok result of one process whose runs all took ``ns``."""
    return Result(key, config, "ok", 0.0, summary=Summary(ns, ns, ns, ns, ns, 3))


@pytest.mark.parametrize("width", [80, 200])
def test_the_terminal_summary_fits_80_columns(width: int) -> None:
    buf = io.StringIO()
    print_summary(_synthetic_summary(3), Console(file=buf, width=width), report="/x/report.html")
    lines = buf.getvalue().splitlines()
    assert max(len(x) for x in lines) <= MAX_WIDTH, "\n".join(lines)
    assert any("x1.80" in x for x in lines)  # the tensorflow speed-up: 9.0 / 5.0
    assert any("10%" in x and "3%" in x for x in lines)  # regrets: 5.5 / 5 - 1, 5.15 / 5 - 1
    # Each framework run over the native one of the same setting: 7.5 / 5.0, 4.5 / 5.0.
    assert any("x1.50" in x and "x0.90" in x for x in lines)
    assert any("(script)" in x for x in lines)


def test_framework_overhead_is_paired_with_the_native_run() -> None:
    def rec(framework: str | None, ms: float) -> Result:
        return _result(f"{framework}", RunConfig("mlp-512", 1, Settings(intra_op=2),
                                                 framework=framework), ms * 1e6)

    summary = summarize_run([rec(None, 2.0), rec("torch", 3.0)], fingerprint={"host": "h"})
    (o,) = summary["framework_overhead"]
    assert (o["framework"], o["native_ms"], o["framework_ms"]) == ("torch", 2.0, 3.0)
    assert o["overhead_ms"] == pytest.approx(1.0)
    assert o["overhead_pct"] == pytest.approx(100 / 3)
    # The framework run is not one of the native settings compared.
    assert [c["median_ms"] for c in summary["models"][0]["configs"]] == [2.0]
    page = _check_page(render_html(summary))
    assert "framework overhead" in {alt for alt, _ in page.images}


def test_every_framework_column_is_shown_whole_in_80_columns() -> None:
    runs = [("tensorflow", "function"), ("torch", "eager"), ("torch", "script"),
            ("onnxruntime", "all"), ("openvino", "f32")]
    records = [_result("native", RunConfig("dlrm-kaggle", 1, Settings(intra_op=2)), 2.0e6)]
    records += [_result(f"{f}-{m}", RunConfig("dlrm-kaggle", 1, Settings(intra_op=2),
                                              framework=f, mode=m), (3.0 + i) * 1e6)
                for i, (f, m) in enumerate(runs)]
    summary = summarize_run(records, fingerprint={"host": "h"})
    buf = io.StringIO()
    print_summary(summary, Console(file=buf, width=80))
    lines = buf.getvalue().splitlines()
    assert max(len(x) for x in lines) <= 80, "\n".join(lines)
    assert not any("\u2026" in x for x in lines), "\n".join(lines)  # nothing clipped
    head = next(i for i, x in enumerate(lines) if "native ms" in x)
    for _, m in runs:
        assert f"({m})" in lines[head], lines[head]
    # Each run's ratio over the native executor's 2.0 ms, in the order run.
    row = next(x for x in lines[head:] if x.split()[:1] == ["dlrm-kaggle"])
    assert row.split()[3:] == ["x1.50", "x2.00", "x2.50", "x3.00", "x3.50"], row
    assert any("ort: ONNX Runtime" in x for x in lines)


def test_framework_runs_at_bf16_have_their_own_table() -> None:
    """A framework's bf16 run is read against the native bf16 run, in a table
    of its own: it neither replaces its fp32 run's ratio nor widens the table."""
    runs = [("tensorflow", "function", "function"), ("torch", "script", "script"),
            ("openvino", "f32", "bf16")]
    records = []
    for precision, native_ms in (("fp32", 2.0), ("bf16", 1.0)):
        s = Settings(intra_op=2, precision=precision)
        records.append(_result(f"native-{precision}", RunConfig("dlrm-kaggle", 1, s),
                               native_ms * 1e6))
        records += [_result(f"{f}-{precision}",
                            RunConfig("dlrm-kaggle", 1, s, framework=f,
                                      mode=m if precision == "fp32" else at_bf16),
                            (3.0 + i) * 1e6)
                    for i, (f, m, at_bf16) in enumerate(runs)]
    summary = summarize_run(records, fingerprint={"host": "h"})
    assert {i["precision"] for i in summary["framework_overhead"]} == {"fp32", "bf16"}
    buf = io.StringIO()
    print_summary(summary, Console(file=buf, width=80))
    lines = buf.getvalue().splitlines()
    assert max(len(x) for x in lines) <= 80, "\n".join(lines)
    heads = [i for i, x in enumerate(lines) if "native ms" in x]
    assert len(heads) == 2, "\n".join(lines)
    assert any("at bf16" in x for x in lines[heads[0]:heads[1]]), "\n".join(lines)
    assert "(bf16)" in lines[heads[1]], lines[heads[1]]
    for head, native_ms in zip(heads, (2.0, 1.0)):
        row = next(x for x in lines[head:] if x.split()[:1] == ["dlrm-kaggle"])
        assert row.split()[3:] == [f"x{ms / native_ms:.2f}" for ms in (3.0, 4.0, 5.0)], row


def test_a_preset_name_of_several_settings_has_a_line_per_setting() -> None:
    """'intel' at fp32, bf16 and int8 is three settings: a legend line each,
    so an 80-column terminal never splits one across two lines."""
    legend = SettingsLegend()
    for precision in ("", " bf16", " int8"):
        legend.key(f"sync 1x2 lib/onednn compact wait=20000{precision}", "intel",
                   f"dlrm-kaggle b1{precision}")
    lines = legend.lines()
    assert lines == [f"intel: sync 1x2 lib/onednn compact wait=20000{p} (dlrm-kaggle b1{p})"
                     for p in ("", " bf16", " int8")]


def test_quick_plan_fits_its_budget_and_keeps_every_preset() -> None:
    plan = plan_suite(resolve_level("quick"), cores=2)
    budget = BUDGET_S["quick"]
    assert budget is not None and plan.estimate_s <= budget <= 120
    assert {(c.model, c.batch) for c in plan.configs} == {(m, 1) for m in DEFAULT_MODELS}
    for m in DEFAULT_MODELS:
        names = [c.settings.name for c in plan.configs if c.model == m]
        assert names[:3] == list(PRESETS)
        assert len(names) > 3  # and the grids
    assert all(c.repeats == 3 for c in plan.configs)
    kinds = {t.kind for t in plan.tasks}
    # On 2 cores llama-tiny's generation is cheap enough for the quick level.
    assert kinds == {"nodes", "scaling", "generation"}
    default = plan_suite(resolve_level("default"), cores=2)
    full = plan_suite(resolve_level("full"), cores=2)
    assert len(plan.configs) < len(default.configs) < len(full.configs)
    assert len(plan.tasks) < len(default.tasks) < len(full.tasks)
    assert default.estimate_s <= (BUDGET_S["default"] or 0) <= 300 and full.budget_s is None


def test_an_over_budget_plan_drops_grid_settings_never_presets() -> None:
    whole = plan_suite(resolve_level("default", budget=False), cores=2)
    tight = plan_suite(replace(resolve_level("default"), budget_s=whole.estimate_s / 2),
                       cores=2)
    assert tight.dropped and tight.estimate_s < whole.estimate_s
    assert len(tight.configs) + len(tight.dropped) == len(whole.configs)
    assert not any(c.settings.name for c in tight.dropped)
    assert [c for c in whole.configs if c.settings.name] == \
        [c for c in tight.configs if c.settings.name]
    # Dropped by rank: the last grid setting of every model goes first.
    last = {(c.model, c.batch): c for c in whole.configs}
    assert set(last.values()) <= set(tight.dropped)
    # A budget below the presets alone keeps the presets all the same.
    bare = plan_suite(replace(resolve_level("quick"), budget_s=0.0), cores=2)
    assert {c.settings.name for c in bare.configs} == set(PRESETS)


def test_the_plan_adds_the_recommended_setting_and_the_framework_runs() -> None:
    rec = Settings(scheduler="async", inter_op=2, intra_op=1, affinity="compact")
    recommended = {(m, b): (rec, 1e6 * (i + 1))
                   for i, (m, b) in enumerate([("mlp-512", 1), ("mlp-512", 8)])}
    runs = FRAMEWORK_RUNS
    plan = plan_suite(resolve_level("default", models=["mlp-512"], budget=False), cores=2,
                      operators=False,
                      recommended=recommended, frameworks=runs)
    for b in (1, 8):
        names = [c.settings.name for c in plan.configs if c.batch == b and not c.framework]
        assert names[:4] == [*PRESETS, "recommended"]
        (r,) = [c for c in plan.configs if c.batch == b and c.settings.name == "recommended"]
        assert r.settings.with_(name="") == rec and r.predicted_ns == recommended[("mlp-512", b)][1]
        # The prediction is kept with the result but is not part of its identity.
        assert "predicted_ns" not in r.key and r.as_dict()["predicted_ns"] == r.predicted_ns
    # Framework runs at the first batch only, under the native setting they
    # are compared with, which the plan runs too.
    fw = [c for c in plan.configs if c.framework]
    hints = list(FRAMEWORK_PRESETS["openvino"])
    assert [(c.framework, c.mode, c.settings.name if c.settings.name in hints else "")
            for c in fw] == [*[(f, m, "") for f, m in runs],
                             *[("openvino", "f32", h) for h in hints]]
    assert {c.batch for c in fw} == {1}
    native = [c for c in plan.configs if not c.framework and c.batch == 1
              and c.settings == fw[0].settings]
    assert len(native) == 1 and native[0].settings.with_(name="") == framework_settings(2)
    assert len({c.key for c in plan.configs}) == len(plan.configs)
    assert Config.from_dict(fw[0].as_dict()) == fw[0]
    # A tight budget drops grid settings and then framework runs, never the
    # presets, the recommended setting, the native run frameworks compare
    # with, or the fastest framework's run (ONNX Runtime's, else the next of
    # KEPT_FRAMEWORK_RUNS the plan has).
    tight = plan_suite(replace(resolve_level("default", models=["mlp-512"]), budget_s=0.0),
                       cores=2, operators=False,
                       recommended=recommended, frameworks=runs)
    assert {c.settings.name for c in tight.configs} - {""} == {*PRESETS, "recommended"}
    assert [(c.framework, c.mode) for c in tight.configs if c.framework] == \
        [("onnxruntime", "all")]
    assert native[0] in tight.configs
    assert all(c == native[0] or c.framework for c in tight.configs if not c.settings.name)
    # Each left-out item says what it is: the framework runs are not grid settings.
    whys = {d["label"]: d["why"] for d in tight.as_dict()["dropped"]}
    assert all(whys[c.what].startswith("a framework run left out" if c.framework else
                                       "a grid setting left out") for c in tight.dropped)
    grid, frameworks = tight.dropped_counts
    assert frameworks == len(runs) - 1 + len(hints) and grid == len(tight.dropped) - frameworks > 0
    # At any budget a framework's own preset (OpenVINO's hints) is kept only
    # beside that framework's run under the shared setting it is read against.
    full = plan_suite(resolve_level("default", models=["mlp-512"], budget=False), cores=2,
                      operators=False, recommended=recommended, frameworks=runs).estimate_s
    for share in (0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 1.0):
        fitted = plan_suite(replace(resolve_level("default", models=["mlp-512"]),
                                    budget_s=share * full),
                            cores=2, operators=False, recommended=recommended, frameworks=runs)
        ov = [c for c in fitted.configs if c.framework == "openvino"]
        if any(c.settings.name in hints for c in ov):
            assert any(c.settings.name not in hints for c in ov), (share, ov)
        # ... and the hints of one model (the one model here) go only after
        # every other framework run and before any grid setting.
        grid_kept = [c for c in fitted.configs if not c.framework and not c.settings.name
                     and c != native[0]]
        if grid_kept:
            assert {c.settings.name for c in ov} >= set(hints), (share, ov)
        if any(c.framework not in (None, "openvino", "onnxruntime") for c in fitted.configs):
            assert {c.settings.name for c in ov} >= set(hints), (share, ov)
    assert (f"; {grid} grid settings and {frameworks} framework runs left out to fit the 0 s "
            "budget (--full runs them)") in _plan_line(tight)
    no_ort = plan_suite(replace(resolve_level("default", models=["mlp-512"]), budget_s=0.0),
                       cores=2, operators=False,
                        frameworks=[r for r in runs if r[0] != "onnxruntime"])
    assert [(c.framework, c.mode) for c in no_ort.configs if c.framework] == \
        [KEPT_FRAMEWORK_RUNS[1]]


def test_a_busy_machine_plans_less_to_keep_the_budget() -> None:
    idle = plan_suite(resolve_level("quick"), cores=2)
    busy = plan_suite(resolve_level("quick"), cores=2, slowdown=busy_slowdown(8.0, 2, 2))
    assert busy_slowdown(0.0, 2, 2) == 1.0 and busy_slowdown(8.0, 2, 2) == 5.0
    assert busy.slowdown == 5.0 and busy.dropped and not idle.dropped
    assert busy.estimate_s < 5.0 * idle.estimate_s
    # Within the budget, or down to what is never left out (presets, operators).
    assert busy.estimate_s <= (BUDGET_S["quick"] or 0) or \
        all(c.settings.name in PRESETS for c in busy.configs)
    assert {c.settings.name for c in busy.configs} >= set(PRESETS)
    with pytest.raises(ValueError, match="slowdown must be >= 1"):
        plan_suite(resolve_level("quick"), cores=2, slowdown=0.5)


def test_a_bad_level_or_model_is_refused() -> None:
    with pytest.raises(ValueError, match="level must be one of"):
        resolve_level("medium")
    out = subprocess.run([*_pyparbench(), "run", "--quick", "--full"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 2 and "not allowed with argument" in out.stderr
    assert re.search(r"--quick.*--full|--full.*--quick", out.stderr)


@pytest.mark.parametrize("library", [{}, {"library_blas": {"ratio": 1.4}}])
def test_the_effects_plot_draws_a_panel_without_any_library_run(library: dict[str, Any]) -> None:
    effects = {"scheduler": {"ratio": 1.2}, "operator": {"ratio": 0.9}, **library}
    png = effects_png([{"model": "resnet50", "batch": 1, "effects": effects},
                       {"model": "mlp-512", "batch": 8, "effects": {"scheduler": {"ratio": 2.0}}}])
    assert png is not None and png.startswith(b"\x89PNG")


def test_fp32_and_bf16_runs_of_a_model_are_separate_entries() -> None:
    def rec(name: str, precision: str, ms: float) -> Result:
        # The preset on one thread, the other setting on two: two settings.
        s = Settings(intra_op=1 if name else 2, name=name, precision=precision)
        return _result(f"{name} {precision}", RunConfig("mlp-512", 1, s), ms * 1e6)

    summary = summarize_run([rec("intel", "fp32", 4.0), rec("", "fp32", 3.0),
                             rec("intel", "bf16", 2.0), rec("", "bf16", 1.5)],
                            fingerprint={"host": "h"})
    entries = {m["precision"]: m for m in summary["models"]}
    assert set(entries) == {"fp32", "bf16"}
    # Each precision's best and presets are its own.
    assert entries["fp32"]["best"]["median_ms"] == 3.0
    assert entries["bf16"]["best"]["median_ms"] == 1.5
    assert entries["fp32"]["presets"]["intel"]["median_ms"] == 4.0
    assert entries["bf16"]["presets"]["intel"]["median_ms"] == 2.0
    assert entries["bf16"]["best"]["label"].endswith(" bf16")
    assert "bf16" not in entries["fp32"]["best"]["label"]
    page = render_html(summary)
    assert f"id='{model_anchor('mlp-512', 1, 'bf16')}'" in page
    assert f"id='{model_anchor('mlp-512', 1)}'" in page and "mlp-512 batch 1 bf16" in page
    buf = io.StringIO()
    print_summary(summary, Console(file=buf, width=120), report="/x/report.html")
    assert "mlp-512 bf16" in buf.getvalue()
