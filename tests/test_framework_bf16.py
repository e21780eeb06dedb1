"""The frameworks at Settings(precision="bf16"): each runs its own bf16 mode
(PyTorch's autocast, TensorFlow's grappler oneDNN rewrite, OpenVINO's bf16
hint), agrees with the fp32 reference within the bf16 model bound, differs
from its own fp32 run (it ran bf16 at all) and records how; ONNX Runtime
(and TensorFlow's XLA mode) refuse bf16 by name; `overhead --precision bf16`
runs a framework at bf16 end to end."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyparbench import models
from pyparbench.frameworks.answer import FrameworkRun
from pyparbench.frameworks.launch import Job, plan_child, run_child, run_framework
from pyparbench.frameworks.mapping import default_knobs, map_settings, preset_knobs
from pyparbench.frameworks.precision import cpu_bf16, unsupported
from pyparbench.frameworks.spec import ModelRef
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
# The README's bound of a whole model at bf16 against fp32: the largest
# output difference over max(1, max |fp32|) (tests/test_bf16_graphs.py).
BF16_MODEL_RTOL = 5e-2
# A run at bf16 differs from the same framework's fp32 run by more than
# fp32's own rounding (measured 2e-3 to 7e-3 on these models).
RAN_BF16 = 1e-6
# One matrix model and one convolution model, small.
GRAPHS = (ModelRef("mlp-512", 2), ModelRef("resnet50", 1, kwargs={"image_size": 32}))
# Each framework's bf16 mode, as a bf16 run records it (info["framework_precision"]["how"]).
HOW = {"torch": "torch.autocast('cpu', dtype=torch.bfloat16)",
       "tensorflow": "grappler auto_mixed_precision_onednn_bfloat16",
       "openvino": "INFERENCE_PRECISION_HINT=bf16"}

needs_native_bf16 = pytest.mark.skipif(
    not cpu_bf16(), reason="this CPU has no avx512_bf16, amx_bf16 or bf16 flag: the frameworks "
    "would emulate bf16 (or refuse it)")


def _have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))


@cache
def reference(i: int) -> np.ndarray:
    ref = GRAPHS[i]
    g = models.build(ref.model, ref.batch, **dict(ref.kwargs))
    (out,) = reference_forward(g, g.random_inputs(seed=0)).values()
    return out


def outputs(framework: str, precision: str) -> FrameworkRun:
    res = run_child(framework, [Job(g, repeats=0, warmup=0, outputs=True) for g in GRAPHS],
                    Settings(precision=precision), timeout=300)
    assert res.ok, res.error + res.stderr
    for job in res.jobs:
        assert job.ok, job.error
    return res


@needs_native_bf16
@pytest.mark.parametrize("framework", ["torch", "tensorflow", "openvino"])
def test_a_framework_at_bf16(framework: str) -> None:
    if not _have(framework):
        pytest.skip(f"{framework} is not installed")
    fp32, bf16 = outputs(framework, "fp32"), outputs(framework, "bf16")
    for i, (j32, j16) in enumerate(zip(fp32.jobs, bf16.jobs, strict=True)):
        (o32,), (o16,) = j32.outputs().values(), j16.outputs().values()
        assert o16.dtype == np.float32
        assert relative_error(o32, reference(i)) < 1e-4, (framework, GRAPHS[i])
        assert relative_error(o16, reference(i)) < BF16_MODEL_RTOL, (framework, GRAPHS[i])
        assert relative_error(o16, o32) > RAN_BF16, (framework, GRAPHS[i])
        how = j16.info["framework_precision"]
        assert how["precision"] == "bf16" and how["how"] == HOW[framework]
        assert how["native_bf16"] is True and how["cpu_bf16"]
        assert j32.info["framework_precision"]["precision"] == "fp32"
    record = bf16.as_dict()
    assert record["config"]["settings"]["precision"] == "bf16"
    if framework == "openvino":  # the hint read back from the compiled model
        assert bf16.jobs[0].info["compiled_properties"]["INFERENCE_PRECISION_HINT"] == "bf16"
        assert fp32.jobs[0].info["compiled_properties"]["INFERENCE_PRECISION_HINT"] == "f32"
        assert record["config"]["mode"] == "bf16"
    if framework == "tensorflow":
        assert bf16.reported["auto_mixed_precision_onednn_bfloat16"] is True


@pytest.mark.skipif(not _have("onnxruntime"), reason="onnxruntime is not installed")
def test_onnx_runtime_refuses_bf16() -> None:
    res = run_framework(GRAPHS[0], "onnxruntime", Settings(precision="bf16"), outputs=True)
    assert res.status == "not_applicable" and res.answer is None
    assert "unsupported at bf16: ONNX Runtime's CPU execution provider has no bf16 kernels" \
        in res.error
    assert unsupported("onnxruntime", "fp32") is None
    assert "XLA-compiled" in str(unsupported("tensorflow", "bf16", "xla"))
    assert unsupported("tensorflow", "bf16", "function") is None


def test_the_mapping_at_bf16() -> None:
    bf16 = Settings(precision="bf16")
    # OpenVINO's hint always follows the settings; its own f16 mode is not bf16.
    assert map_settings("openvino", Settings()).knobs["INFERENCE_PRECISION_HINT"] == "f32"
    ov = map_settings("openvino", bf16)
    assert (ov.mode, ov.knobs["INFERENCE_PRECISION_HINT"]) == ("bf16", "bf16")
    with pytest.raises(ValueError, match="OpenVINO mode 'f16' is an inference precision"):
        map_settings("openvino", bf16, "f16")
    assert preset_knobs("openvino-defaults") == {} and default_knobs("openvino") == {
        "INFERENCE_PRECISION_HINT": "f32"}
    assert map_settings("torch", bf16).knobs["bf16_mode"] == "autocast"
    assert "bf16_mode" not in map_settings("torch", Settings()).knobs
    tf = map_settings("tensorflow", bf16).knobs
    assert tf["auto_mixed_precision_onednn_bfloat16"] is True
    assert "auto_mixed_precision_onednn_bfloat16" not in map_settings(
        "tensorflow", Settings()).knobs
    # A framework left to its own defaults is fp32: no bf16 label on it.
    with pytest.raises(ValueError, match="torch under its own defaults runs fp32"):
        plan_child("torch", [Job(GRAPHS[0])], bf16, defaults=True)


def test_the_cpus_bf16_flags() -> None:
    x86 = "processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 amx_tile\n"
    assert cpu_bf16(x86) == ["avx512_bf16"]
    assert cpu_bf16("flags\t\t: fpu avx2 fma\n") == []
    assert cpu_bf16("Features\t: fp asimd bf16 i8mm\n") == ["bf16"]


@needs_native_bf16
@pytest.mark.skipif(not _have("torch"), reason="torch is not installed")
def test_overhead_at_bf16_in_torch() -> None:
    script = Path(sys.executable).parent / "pyparbench"
    cmd = [str(script)] if script.exists() else [sys.executable, "-P", "-m", "pyparbench"]
    proc = subprocess.run(
        [*cmd, "overhead", "mlp-512", "--batch", "1", "--framework", "torch", "--mode",
         "torch=eager", "--precision", "bf16", "--json", "--repeats", "5", "--profile", "3",
         "--no-dispatch"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "the frameworks run fp32" not in proc.stderr
    res: dict[str, Any] = json.loads(proc.stdout)
    assert res["settings"]["precision"] == "bf16"
    (torch,) = res["frameworks"]
    assert (torch["framework"], torch["mode"], torch["status"]) == ("torch", "eager", "ok")
    assert torch["info"]["framework_precision"]["how"] == HOW["torch"]
    assert torch["knobs"]["bf16_mode"] == "autocast"
    # The time split per op type as at fp32: the linear layers' kernels found.
    linear = next(r for r in torch["per_op"] if r["op"] == "linear")
    assert linear["framework_kernels"] >= 8
