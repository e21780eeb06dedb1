"""The recommendation checked in a framework (`recommend --framework`,
pyparbench/recommender/framework_check.py): real runs on this machine, in lockstep
with few steps, of the best candidates against the framework's own defaults
and Intel's preset; a framework that is not installed; an ONNX file.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _support import cli_main
from pyparbench.cli import main
from pyparbench.frameworks.mapping import map_settings
from pyparbench.frameworks.spec import NO_MODULE
from pyparbench.models import build, files
from pyparbench.recommender import framework_check, recommend
from pyparbench.recommender.framework_check import contenders_for
from pyparbench.recommender.decision import CONSISTENT, SWITCH
from pyparbench.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
HAVE = {m: importlib.util.find_spec(m) is not None
        for m in ("torch", "onnxruntime", "onnx", "openvino")}
STEPS = 6


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "pyparbench", *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return cli_main(capsys, *argv)


def _settings(d: dict[str, Any]) -> Settings:
    d = dict(d)
    if isinstance(d.get("affinity"), list):
        d["affinity"] = tuple(tuple(c) for c in d["affinity"])
    return Settings(**d)


def _check(framework: str, model: str = "mlp-512") -> dict[str, Any]:
    """``recommend MODEL --batch 1 --framework F --json`` run for real; the
    checks every framework's answer must pass."""
    r = cli("recommend", model, "--batch", "1", "--framework", framework,
            "--steps", str(STEPS), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    fc = doc["framework_check"]
    assert fc["framework"] == framework and fc["steps"] == STEPS and not fc["errors"]
    by = {c["label"]: c for c in fc["contenders"]}
    # The framework as it comes, Intel's preset and the recommended setting were measured.
    assert {"defaults", "intel", "recommended"} <= set(by)
    assert fc["fastest"] in by and by[fc["fastest"]]["vs_fastest"]["median"] == 1.0
    # The fastest's regret interval against every other one, read in pairs;
    # none ran clearly faster than it (as the recommender's verification switches).
    assert set(fc["regret"]) == set(by) - {fc["fastest"]}
    for label, r_ in fc["regret"].items():
        assert 0 < r_["low"] <= r_["median"] <= r_["high"], (label, r_)
        assert r_["steps"] == STEPS
        slower_in = STEPS - r_["fastest_faster_in"]
        assert not (r_["median"] > 1 + SWITCH and slower_in >= CONSISTENT * STEPS), label
        if fc["fastest"] != "recommended" and label == "recommended":
            assert r_["median"] < 1 / (1 + SWITCH) + 1e-9  # a switch needs a gain
        other = by[label]["vs_fastest"]
        assert other["median"] == pytest.approx(1 / r_["median"])
    # The defaults contender set nothing and kept every CPU.
    assert by["defaults"]["env"] == {} and by["defaults"]["cpus"] is None
    assert by["defaults"]["settings"] is None
    # Each candidate ran exactly what the mapping gives (one source of truth).
    for label, c in by.items():
        if c["settings"] is None:  # the defaults, or one of OpenVINO's presets
            continue
        cfg = map_settings(framework, _settings(c["settings"]), None, c["cpus"])
        assert c["knobs"] == json.loads(json.dumps(cfg.knobs)), label
        assert c["env"] == cfg.env, label
    # The JSON deploys the fastest (or says there is nothing to set).
    if by[fc["fastest"]]["settings"] is None:
        assert doc["deploy"] is None
    else:
        assert framework in doc["deploy"]["frameworks"]
    return fc


@pytest.mark.skipif(not HAVE["onnxruntime"], reason="onnxruntime is not installed")
def test_onnxruntime_check_measures_candidates_defaults_and_intel() -> None:
    fc = _check("onnxruntime")
    by = {c["label"]: c for c in fc["contenders"]}
    # ONNX Runtime's session reports what was set: nothing under its defaults
    # (0: its own thread count), the setting's counts otherwise.
    assert by["defaults"]["reported"]["session_options"]["intra_op_num_threads"] == 0
    rec = _settings(by["recommended"]["settings"])
    assert by["recommended"]["reported"]["session_options"]["intra_op_num_threads"] == \
        rec.intra_op


@pytest.mark.openvino
@pytest.mark.skipif(not (HAVE["openvino"] and HAVE["onnx"]), reason="openvino is not installed")
def test_openvino_check_measures_its_hints_beside_the_candidates() -> None:
    fc = _check("openvino")
    by = {c["label"]: c for c in fc["contenders"]}
    # Its own tuner under each hint, and left entirely to itself, are presets to beat.
    assert {"openvino-latency", "openvino-throughput", "openvino-defaults"} <= set(by)
    held = {k: c["reported"]["compiled_properties"] for k, c in by.items()}
    assert held["openvino-latency"]["PERFORMANCE_HINT"] == "LATENCY"
    assert held["openvino-throughput"]["PERFORMANCE_HINT"] == "THROUGHPUT"
    assert by["openvino-defaults"]["knobs"] == {}
    # The precision is set wherever pyparbench sets anything.
    for label in ("recommended", "intel", "defaults", "openvino-latency"):
        assert held[label]["INFERENCE_PRECISION_HINT"] in ("f32", "float32"), label
    rec = _settings(by["recommended"]["settings"])
    assert held["recommended"]["INFERENCE_NUM_THREADS"] == rec.intra_op


@pytest.mark.slow  # five PyTorch processes on two loaded cores: about 45 s
@pytest.mark.skipif(not HAVE["torch"], reason="torch is not installed")
def test_torch_check_measures_candidates_defaults_and_intel() -> None:
    fc = _check("torch")
    by = {c["label"]: c for c in fc["contenders"]}
    assert by["recommended"]["reported"]["num_threads"] == \
        _settings(by["recommended"]["settings"]).intra_op
    assert "OMP_NUM_THREADS" in by["intel"]["env"]


def test_not_installed_names_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # A framework whose module cannot be found, said before any recommending.
    monkeypatch.setitem(framework_check.PACKAGES, "torch",
                        (("pyparbench_no_such_module", "no-such-framework"),))

    def never(*a: object, **k: object) -> None:
        raise AssertionError("the recommender ran for a framework that is not installed")

    monkeypatch.setattr("pyparbench.cli.recommend.recommend", never)
    code, out, err = _main(capsys, "recommend", "mlp-512", "--batch", "1",
                           "--framework", "torch")
    assert code == 2 and out == ""
    assert err == ("pyparbench recommend: error: torch is not installed: pip install "
                   "no-such-framework (or pip install 'pyparbench[frameworks]')\n")
    with pytest.raises(ValueError, match="not installed: pip install no-such-framework"):
        framework_check.check_installed("torch")


def test_framework_with_topology_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, "recommend", "mlp-512", "--framework", "onnxruntime",
                         "--topology", "package:1 core:4 pu:1")
    assert code == 2 and "--framework measures on this machine" in err


def _onnx_file(path: Path) -> Path:
    """A two-layer perceptron written with onnx.helper, batch 1."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((64, 128)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(128).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((128, 10)).astype(np.float32), "w2")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
                           helper.make_node("Relu", ["h"], ["r"], name="relu"),
                           helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")],
                          "mlp", [x], [y], [w1, b1, w2])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.skipif(not (HAVE["onnxruntime"] and HAVE["onnx"]), reason="needs onnxruntime, onnx")
def test_an_onnx_file_runs_itself_in_onnxruntime(tmp_path: Path) -> None:
    path = _onnx_file(tmp_path / "my.onnx")
    fc = _check("onnxruntime", str(path))
    assert files.is_file_key(fc["model"]) and fc["model"].startswith("my.onnx@")
    for c in fc["contenders"]:  # the file itself, not a translation
        assert c["reported"]["onnx_file"] == str(path.resolve()), c["label"]


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
@pytest.mark.skipif(not HAVE["onnx"], reason="onnx is not installed")
def test_a_file_is_not_applicable_in_torch_or_tensorflow(
        tmp_path: Path, framework: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(files.FILES_ENV, raising=False)
    # As if installed.
    monkeypatch.setitem(framework_check.PACKAGES, framework, (("json", "json"),))
    path = _onnx_file(tmp_path / "my.onnx")
    code, out, err = _main(capsys, "recommend", str(path), "--framework", framework)
    assert code == 2 and out == ""
    assert err == f"pyparbench recommend: error: {NO_MODULE}\n"


@pytest.mark.skipif(not HAVE["onnxruntime"], reason="onnxruntime is not installed")
def test_when_no_contender_runs_the_check_says_why_for_each(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import pyparbench as ppb
    from pyparbench.frameworks.child import HOOK_ENV
    from pyparbench.models import build

    rec = ppb.recommend(build("mlp-512", 1), calibrate=False, verify=0)
    # Every ONNX Runtime child imports a module that is not there.
    monkeypatch.setenv(HOOK_ENV, "import=pyparbench_no_such_module@onnxruntime")
    with pytest.raises(ValueError) as got:
        framework_check.check_in_framework(rec, "mlp-512", "onnxruntime", steps=2, timeout=120)
    msg = str(got.value)
    assert msg.startswith("nothing measured in onnxruntime: ") and "\n" not in msg
    for label in ("recommended", "intel", "defaults"):
        assert f"{label}: onnxruntime (all) on mlp-512 batch 1 under " in msg, label
    assert "under its own defaults: cannot import pyparbench_no_such_module" in msg


def test_a_bf16_recommendation_meets_intel_at_both_precisions() -> None:
    """A bf16 recommendation is measured against Intel's preset at fp32 (what
    a user runs) and at bf16 (the setting's own gain); the defaults stay
    fp32 (the frameworks' own)."""
    rec = recommend(build("mlp-512", 1), topology="package:1 core:2 pu:1", calibrate=False,
                    verify=0, precision="bf16")
    contenders, settings, _ = contenders_for(rec, "onnxruntime" if HAVE["onnxruntime"]
                                             else "torch")
    by = {c.label: c for c in contenders}
    assert settings["intel"].precision == "fp32"
    assert settings["intel bf16"] == settings["intel"].with_(precision="bf16")
    assert settings["recommended"].precision == "bf16"
    assert by["defaults"].defaults and by["defaults"].settings.precision == "fp32"
    fp32 = recommend(build("mlp-512", 1), topology="package:1 core:2 pu:1", calibrate=False,
                     verify=0)
    assert "intel bf16" not in contenders_for(fp32, "torch")[1]
