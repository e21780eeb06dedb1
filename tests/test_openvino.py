"""OpenVINO as a framework: a built-in model and a user's ONNX file at f32
against the native executor, its knobs both ways, its presets, and its
absence or failure as an answer, never a crash; OpenVINO is loaded only in
its own child process."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyparbench.frameworks import (
    ModelRef,
    framework_outputs,
    map_settings,
    run_framework,
)
from pyparbench.frameworks.child import HOOK_ENV
from pyparbench.frameworks.mapping import OPENVINO_PRESETS, default_knobs, preset_knobs
from pyparbench.frameworks.precision import cpu_bf16
from pyparbench.reference import output_error
from pyparbench.settings import Settings

HAVE = importlib.util.find_spec("openvino") is not None and \
    importlib.util.find_spec("onnx") is not None
# Marked so that CI runs them again against the oldest openvino declared
# (.ci/oldest openvino: -m openvino).
NEEDS_OPENVINO = (pytest.mark.skipif(not HAVE, reason="openvino or onnx is not installed"),
                  pytest.mark.openvino)
TWO = Settings(intra_op=min(2, os.cpu_count() or 1), affinity="compact")


def small_file(path: Path) -> Path:
    """A convolution, a ReLU, a global pool and a Gemm, with a batch of any size."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(rng.standard_normal(a.shape).astype(np.float32) * a.scale,
                                     a.name)
             for a in (_Init("w", (8, 3, 3, 3), 0.3), _Init("b", (8,), 0.1),
                       _Init("fw", (5, 8), 0.3), _Init("fb", (5,), 0.1))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], pads=[1, 1, 1, 1], name="c"),
             helper.make_node("Relu", ["conv"], ["relu"], name="r"),
             helper.make_node("GlobalAveragePool", ["relu"], ["pool"], name="p"),
             helper.make_node("Flatten", ["pool"], ["flat"], axis=1, name="f"),
             helper.make_node("Gemm", ["flat", "fw", "fb"], ["y"], transB=1, name="g")]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 9, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))
    return path


class _Init:
    def __init__(self, name: str, shape: tuple[int, ...], scale: float) -> None:
        self.name, self.shape, self.scale = name, shape, scale


def test_settings_map_onto_openvino_properties_and_back() -> None:
    cfg = map_settings("openvino", Settings(intra_op=2, instances=2, smt=True), cpus=[0, 1, 2, 3])
    assert {k: cfg.knobs[k] for k in ("NUM_STREAMS", "INFERENCE_NUM_THREADS",
                                      "ENABLE_CPU_PINNING", "ENABLE_HYPER_THREADING",
                                      "INFERENCE_PRECISION_HINT")} == \
        {"NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 4, "ENABLE_CPU_PINNING": True,
         "ENABLE_HYPER_THREADING": True, "INFERENCE_PRECISION_HINT": "f32"}
    # Streams are instances: not the 'one copy' line the other frameworks get.
    knobs = {n.knob for n in cfg.not_applicable}
    assert "instances" not in knobs and "pool" in knobs
    # No hint beside explicit streams and threads (benchmark_app -hint none).
    assert "PERFORMANCE_HINT" not in cfg.knobs
    odd = map_settings("openvino", Settings(scheduler="async", inter_op=2, omp_wait="passive",
                                            library="eigen"), mode="bf16")
    assert odd.knobs["INFERENCE_PRECISION_HINT"] == "bf16"
    assert odd.knobs["ENABLE_CPU_PINNING"] is False
    assert {"inter_op", "omp_wait", "library"} <= {n.knob for n in odd.not_applicable}
    with pytest.raises(ValueError, match="unknown openvino mode 'int4'"):
        map_settings("openvino", Settings(), mode="int4")


def test_mode_auto_pins_the_threads_and_leaves_the_precision_to_openvino() -> None:
    cfg = map_settings("openvino", Settings(intra_op=2, affinity="compact"), "auto",
                       cpus=[0, 1])
    assert "INFERENCE_PRECISION_HINT" not in cfg.knobs
    assert {k: cfg.knobs[k] for k in ("NUM_STREAMS", "INFERENCE_NUM_THREADS",
                                      "ENABLE_CPU_PINNING")} == \
        {"NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 2, "ENABLE_CPU_PINNING": True}
    assert default_knobs("openvino", "auto") == {}
    assert preset_knobs("openvino-latency", "auto") == {"PERFORMANCE_HINT": "LATENCY"}
    with pytest.raises(ValueError, match="mode 'auto' leaves the precision to OpenVINO"):
        map_settings("openvino", Settings(precision="bf16"), "auto")


def test_openvinos_presets_set_its_hint_and_the_precision_or_nothing() -> None:
    assert default_knobs("openvino", "f16") == {"INFERENCE_PRECISION_HINT": "f16"}
    assert preset_knobs("openvino-latency") == {"INFERENCE_PRECISION_HINT": "f32",
                                                "PERFORMANCE_HINT": "LATENCY"}
    assert preset_knobs("openvino-throughput", "bf16")["PERFORMANCE_HINT"] == "THROUGHPUT"
    assert preset_knobs("openvino-defaults") == {}
    assert set(OPENVINO_PRESETS) == {"openvino-latency", "openvino-throughput",
                                     "openvino-defaults"}
    with pytest.raises(ValueError, match="unknown OpenVINO preset 'fast'"):
        preset_knobs("fast")


def needs(test: Any) -> Any:
    for mark in NEEDS_OPENVINO:
        test = mark(test)
    return test


@needs
def test_a_built_in_model_at_f32_matches_the_native_executor() -> None:
    refs = [ModelRef("mlp-512", 2), ModelRef("transformer", 2, kwargs={"seq_len": 16})]
    got = framework_outputs(refs, "openvino", TWO)
    want = framework_outputs(refs, "native", TWO)
    for g, w in zip(got, want, strict=True):
        assert sorted(g) == sorted(w)
        assert output_error(w, g) <= 1e-4
    res = run_framework(refs[0], "openvino", TWO, repeats=3, profile=2)
    assert res.ok, res.error
    held = res.reported["compiled_properties"]
    # The precision asked for, not OpenVINO's pick (bf16 where the CPU has it).
    assert held["INFERENCE_PRECISION_HINT"] in ("f32", "float32")
    assert held["INFERENCE_NUM_THREADS"] == TWO.intra_op and held["NUM_STREAMS"] == 1
    assert res.answer is not None
    assert len(res.job.ns) == 3 and res.answer.core_loaded is False
    # Every fully connected layer charged to the graph's linear nodes.
    linear = [k for k in res.job.figures["kernels"] if k["op"] == "linear"]
    assert linear and sum(k["calls"] for k in linear) == 8


@needs
def test_mode_auto_runs_at_openvinos_own_pick_and_records_it() -> None:
    res = run_framework(ModelRef("mlp-512", 1), "openvino", Settings(intra_op=1,
                        affinity="compact"), mode="auto", repeats=1)
    assert res.ok, res.error
    held = res.reported["compiled_properties"]
    assert held["INFERENCE_NUM_THREADS"] == 1 and held["ENABLE_CPU_PINNING"] is True
    picked = res.job.info["framework_precision"]
    assert picked["how"] == "OpenVINO's own pick"
    # OpenVINO's CPU plugin picks bf16 where the CPU has bf16 dot products (x86).
    x86_bf16 = bool({"avx512_bf16", "amx_bf16"} & set(cpu_bf16()))
    assert held["INFERENCE_PRECISION_HINT"] == picked["inference_precision_hint"]
    if x86_bf16:
        assert picked["precision"] == "bf16"


@needs
def test_a_users_file_runs_itself_and_matches_the_native_executor(tmp_path: Path) -> None:
    from pyparbench.models import resolve

    name = resolve(str(small_file(tmp_path / "small.onnx")))
    res = run_framework(ModelRef(name, 3), "openvino", TWO, repeats=2, outputs=True, profile=2)
    assert res.ok, res.error
    assert res.job.info["onnx_file"] == str(tmp_path / "small.onnx")
    assert res.job.outputs()["y"].shape == (3, 5)  # the file's batch fixed to the run's
    native = framework_outputs([ModelRef(name, 3)], "native", TWO)[0]
    assert output_error(native, res.job.outputs()) <= 1e-5
    ops = {k["op"] for k in res.job.figures["kernels"]}
    assert "conv2d" in ops and "linear" in ops


def test_openvino_missing_is_an_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyparbench.harness import suite
    from pyparbench.recommender import framework_check

    monkeypatch.setenv(HOOK_ENV, "import=pyparbench_no_such_module@openvino")
    res = run_framework(ModelRef("mlp-512", 1), "openvino", repeats=1)
    assert res.status == "error"
    assert res.error.startswith("openvino (f32) on mlp-512 batch 1 under ")
    assert "cannot import pyparbench_no_such_module" in res.error
    real = importlib.util.find_spec

    def lacking(name: str, *args: Any) -> Any:
        return None if name == "openvino" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", lacking)
    monkeypatch.setattr(suite, "find_spec", lacking)
    assert "openvino" not in suite.installed_frameworks()
    with pytest.raises(ValueError, match=r"openvino is not installed: pip install openvino"):
        framework_check.check_installed("openvino")


@needs
def test_openvino_is_loaded_only_in_its_own_child() -> None:
    """The parent maps, plans and runs OpenVINO without loading it: its TBB
    threads never share a process with the native core's OpenMP."""
    code = (
        "import sys\n"
        "from pyparbench.frameworks import ModelRef, deployment, map_settings, run_framework\n"
        "from pyparbench.frameworks.openvino import knobs\n"
        "from pyparbench.settings import Settings\n"
        "import pyparbench._core\n"
        "map_settings('openvino', Settings(intra_op=1))\n"
        "knobs.code({'NUM_STREAMS': 1})\n"
        "res = run_framework(ModelRef('mlp-512', 1), 'openvino', repeats=1)\n"
        "assert res.ok, res.error\n"
        "assert res.answer is not None and res.answer.core_loaded is False\n"
        "print(sorted(m for m in sys.modules if m == 'openvino' or m.startswith('openvino.')))\n")
    proc = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                          cwd="/", timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


@needs
def test_overhead_charges_openvinos_counters_and_checks_a_files_outputs(tmp_path: Path
                                                                         ) -> None:
    from pyparbench.frameworks import measure_overhead
    from pyparbench.models import resolve

    name = resolve(str(small_file(tmp_path / "small.onnx")))
    for model, batch, op in (("mlp-512", 1, "linear"), (name, 2, "conv2d")):
        res = measure_overhead(model, batch, TWO, frameworks=["openvino"], repeats=3, warmup=1,
                               profile=3, kernel_repeats=2, dispatch=False)
        (ov,) = res["frameworks"]
        assert ov["status"] == "ok", ov.get("error")
        assert ov["overhead_ratio"] > 0 and ov["kernel_ns"] > 0
        assert op in {row["op"] for row in ov["per_op"] if row["framework_ns"] > 0}
        # A file is run as it is, and the native outputs are checked against it.
        assert (ov.get("output_error") is not None) == (model == name)
        if model == name:
            assert ov["output_error"] <= 1e-5


@needs
def test_the_emitted_code_and_benchmark_app_line_take_the_setting(tmp_path: Path) -> None:
    """``recommend --for openvino --emit python|shell``: the config dict
    compiles a model to the setting's streams and threads, and the
    benchmark_app line runs with the same flags."""
    from pyparbench.frameworks import deployment
    from pyparbench.frameworks.openvino.knobs import benchmark_app_command
    from pyparbench.settings import instance_cpus
    from pyparbench.threading.topology import topology

    path = small_file(tmp_path / "small.onnx")
    topo = topology()
    dep = deployment(TWO, instance_cpus(TWO, topo), topo, batch=1, targets=("openvino",))
    code = dep.python("openvino").replace("model.onnx", str(path))
    code += ("print(compiled.get_property('INFERENCE_NUM_THREADS'), "
             "compiled.get_property('NUM_STREAMS'))\n")
    proc = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                          cwd="/", timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-2:] == [str(TWO.intra_op), "1"]
    assert "benchmark_app -m model.onnx -d CPU -hint none -nstreams 1" in dep.shell("openvino")
    knobs = dep.as_dict()["frameworks"]["openvino"]["knobs"][0]
    args = benchmark_app_command(knobs, str(path))
    bench = Path(sys.executable).with_name("benchmark_app")
    run = subprocess.run([str(bench), *args[1:], "-shape", "[1,3,9,9]", "-niter", "4"],
                         capture_output=True, text=True, cwd="/", timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Median:" in run.stdout


@needs
def test_the_main_job_runs_openvinos_hints_beside_the_shared_setting() -> None:
    import io

    from rich.console import Console

    from pyparbench.harness.levels import resolve_level
    from pyparbench.harness.runner import run_config
    from pyparbench.harness.suite import FRAMEWORK_PRESETS, default_suite, framework_settings
    from pyparbench.report.html import render_html
    from pyparbench.report.summary import summarize_run
    from pyparbench.report.terminal import print_summary

    level = resolve_level("quick")
    configs = [c for c in default_suite(level, cores=2, frameworks=[("openvino", "f32")])
               if c.model == "mlp-512" and c.batch == 1]
    ov = [c for c in configs if c.framework == "openvino"]
    # The shared setting (the native run's), then each hint with nothing else set.
    assert ov[0].settings.with_(name="") == framework_settings(2)
    assert [c.settings.name for c in ov[1:]] == list(FRAMEWORK_PRESETS["openvino"])
    assert all(c.settings.with_(name="") == Settings() for c in ov[1:])
    shared = next(c for c in configs if c.framework is None
                  and c.settings.with_(name="") == ov[0].settings.with_(name=""))
    records = [run_config(c.__class__(c.model, c.batch, c.settings, repeats=5, warmup=1,
                                      framework=c.framework, mode=c.mode), timeout=300)
               for c in (shared, *ov)]
    assert all(r.status == "ok" for r in records), [r.error for r in records]
    for r in records[2:]:
        assert r.resolved is not None and r.resolved["preset"] == r.config.settings.name
        compiled = r.resolved["compiled"]
        # What OpenVINO's tuner chose under the hint, at the precision set.
        assert compiled["PERFORMANCE_HINT"] == OPENVINO_PRESETS[r.config.settings.name]
        assert compiled["INFERENCE_PRECISION_HINT"] == "f32"
        assert compiled["NUM_STREAMS"] >= 1 and compiled["INFERENCE_NUM_THREADS"] >= 1
    summary = summarize_run(records, fingerprint={"host": "h"})
    # The hint runs pair with OpenVINO's run under the shared setting, not the native one.
    assert [i["framework"] for i in summary["framework_overhead"]] == ["openvino"]
    items = summary["framework_presets"]
    assert [i["preset"] for i in items] == list(FRAMEWORK_PRESETS["openvino"])
    shared_ms = records[1].timing.median / 1e6
    for i, r in zip(items, records[2:]):
        assert i["setting_ms"] == shared_ms and i["ms"] == r.timing.median / 1e6
        assert i["ratio"] == pytest.approx(i["ms"] / shared_ms)
    buf = io.StringIO()
    print_summary(summary, Console(file=buf, width=80))
    lines = buf.getvalue().splitlines()
    assert max(len(x) for x in lines) <= 80
    row = next(x for x in lines if x.split()[:3] == ["mlp-512", "1", "ov"])
    compiled = items[0]["compiled"]
    per_stream = max(1, compiled["INFERENCE_NUM_THREADS"] // compiled["NUM_STREAMS"])
    assert f"x{items[0]['ratio']:.2f} {compiled['NUM_STREAMS']}s{per_stream}t" in row, row
    page = render_html(summary)
    assert "A framework's own tuner" in page and f"x{items[1]['ratio']:.2f}" in page
