"""The same graphs in TensorFlow, PyTorch and ONNX Runtime: outputs against the
float64 reference, the thread settings each framework reports back, the
per-op profiles, failing children, the settings mapping and the
``overhead`` command.

One child process runs every model for one framework and mode (small
variants of the models, batch 2), so the file stays within a few minutes
on two cores. A framework that is not installed skips its tests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyparbench.frameworks import (
    ChildFailed,
    Job,
    ModelRef,
    build_graph,
    dispatch_graph,
    framework_outputs,
    graph_to_spec,
    heavy_op_graphs,
    map_settings,
    measure_dispatch,
    measure_overhead,
    operator_scaling,
    run_child,
    run_framework,
)
from pyparbench.frameworks.child import HOOK_ENV
from pyparbench.child_process import child_cpus
from pyparbench.frameworks.overhead import entries
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models import MODELS
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

from _support import physical_cores

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def _pyparbench() -> list[str]:
    """The installed console script (as a user runs it), else the module in safe-path mode."""
    script = Path(sys.executable).parent / "pyparbench"
    return [str(script)] if script.exists() else [sys.executable, "-P", "-m", "pyparbench"]

# The CPUs this process may use (os.sched_getaffinity), and the physical
# cores that hold them (a compact placement with smt=False takes one CPU per
# core: a 2-vCPU VM of one SMT core has 2 CPUs and 1 core).
ALLOWED = sorted(os.sched_getaffinity(0))
CPUS = len(ALLOWED)
CORES = physical_cores()
# float32 frameworks against the float64 reference, through up to ~100 layers
# (the native executor's bound in test_executor.py is 2e-4).
RTOL = 1e-4

# Small variants: same structure, fewer pixels, rows, tokens or layers.
SMALL: dict[str, dict[str, Any]] = {
    "googlenet": {"image_size": 64}, "inception-v2": {"image_size": 64},
    "inception-v3": {"image_size": 75}, "resnet50": {"image_size": 64},
    "resnext50": {"image_size": 64}, "squeezenet": {"image_size": 64},
    "mobilenet-v2": {"image_size": 64}, "mlp-4096": {"layers": 2},
    "dlrm": {"rows": 1000, "lookups": 8}, "dlrm-kaggle": {"max_rows": 1000},
    "transformer": {"seq_len": 16}, "ncf": {"num_users": 500, "num_items": 300},
    "wide-deep": {"max_rows": 1000},
    # The decoder's larger shapes, one small layer of each (llama-tiny as it is).
    **{name: {"layers": 1, "hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 96,
              "vocab": 128, "prompt": 8}
       for name in MODELS if name.startswith("llama-") and name != "llama-tiny"}}


def _have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


# Checked without importing: a framework must never be loaded into this
# process, beside pyparbench's own OpenMP and oneDNN.
needs = {fw: pytest.mark.skipif(not _have(fw), reason=f"{fw} is not installed")
         for fw in ("tensorflow", "torch", "onnxruntime")}
# Skipped without onnx and onnxruntime, and marked so that CI runs them again
# against the oldest onnxruntime declared (.ci/oldest onnxruntime: -m onnxruntime).
ONNX_MARKS = (pytest.mark.skipif(not (_have("onnxruntime") and _have("onnx")),
                                 reason="onnxruntime or onnx is not installed"),
              pytest.mark.onnxruntime)


# Marked so that CI runs them again against the oldest openvino declared
# (.ci/oldest openvino: -m openvino); it reads the same ONNX files.
OV_MARKS = (pytest.mark.skipif(not (_have("openvino") and _have("onnx")),
                               reason="openvino or onnx is not installed"),
            pytest.mark.openvino)


def needs_onnx(test: Any) -> Any:
    for mark in ONNX_MARKS:
        test = mark(test)
    return test


def all_ops_graph(batch: int = 2) -> Graph:
    """Every op of the vocabulary, with the attributes frameworks find awkward:
    asymmetric and ceil-mode pooling with and without padding in the count,
    dilated and grouped convolutions, a depthwise one with two outputs per
    channel, softmax and concat over image axes, a broadcast add onto an
    image, reshapes and transposes of images, batch norm on 3-D input and
    below FusedBatchNorm's smallest epsilon, a constant joined to a sequence."""
    b = GraphBuilder("all-ops", seed=3)
    img = b.input("image", (batch, 6, 13, 11))
    ids = b.input("ids", (batch, 3), "int64")
    c1 = b.conv2d(img, 8, 3, stride=2, padding=(0, 1, 1, 0), relu=True)
    c2 = b.conv2d(img, 8, (3, 1), dilation=(2, 1), padding=(2, 0), groups=2, bias=False)
    dw = b.conv2d(img, 12, 3, padding=1, groups=6)
    cat = b.concat([c2, dw], axis=1)
    e = b.eltwise(b.batch_norm(cat, eps=1e-3), "relu6")
    e2 = b.batch_norm(cat, eps=1e-5, scale=False)
    p1 = b.pool2d(e, "max", 3, stride=2, ceil_mode=True)
    p2 = b.pool2d(e, "avg", 3, stride=2, padding=(1, 0, 1, 1), ceil_mode=True,
                  count_include_pad=False)
    p3 = b.pool2d(e2, "avg", 3, stride=1, padding=1, count_include_pad=True)
    p4 = b.pool2d(e, "avg", 2, stride=2, padding=(1, 0, 0, 1), count_include_pad=True)
    p5 = b.pool2d(e2, "max", 3, stride=2, padding=(1, 1, 0, 1))
    s4 = b.softmax(b.eltwise(p3, "swish"), axis=1)
    g0 = b.global_avg_pool(c1)
    gate = b.reshape(b.eltwise(b.linear(g0, 8), "sigmoid"), (batch, 8, 1, 1))
    c2g = b.add(c2, gate, relu=True)
    sq = b.mul(c2g, c2g)
    seq = b.reshape(b.transpose(b.concat([p1, p1], axis=2), (0, 2, 3, 1)), (batch, 12, 100))
    token = b.constant((batch, 1, 100))  # a class token before the sequence
    h = b.eltwise(b.linear(b.layer_norm(b.concat([token, seq], axis=1)), 16), "gelu")
    tri = b.tril_flatten(b.matmul(h, h, trans_b=True))
    emb = b.embedding_bag(ids, 50, 8, mode="mean")
    emb_sum = b.embedding_bag(ids, 40, 8, mode="sum")
    pair = b.matmul(emb, emb_sum, trans_b=True)
    bn3 = b.reshape(b.batch_norm(b.reshape(g0, (batch, 2, 4))), (batch, 8))
    feats = [b.global_avg_pool(x) for x in (p1, p2, s4, p4, p5, sq)]
    act = b.eltwise(b.eltwise(b.eltwise(bn3, "hardswish"), "gelu_tanh"), "tanh")
    z = b.concat([*feats, tri, emb, pair, act], axis=1)
    y = b.linear(b.linear(z, 32, relu=True), 10)
    return b.build([b.softmax(y), b.eltwise(g0, "relu")])


def fused_graph_spec() -> dict[str, Any]:
    """A graph with what the executor's optimisation passes write into nodes:
    a conv2d with a residual second input and an activation, activations
    on linear and matmul, a layout reorder (an identity), and the
    micro-batch pass's slices of the batch (the second ordered after the
    first) joined by a concat."""
    b = GraphBuilder("fused", seed=5)
    x = b.input("x", (2, 4, 6, 6))
    xs = b.input("xs", (1, 4, 6, 6))
    rows0, rows1 = b.eltwise(xs, "relu"), b.eltwise(xs, "relu")  # become slices of x
    a = b.conv2d(b.add(b.add(b.concat([rows1, rows0], axis=0), xs), x), 4, 3, padding=1)
    c = b.conv2d(a, 4, 1)
    e = b.eltwise(c, "relu")
    h = b.linear(b.global_avg_pool(e), 6)
    m = b.matmul(h, h, trans_b=True)
    spec = graph_to_spec(b.build(b.concat([h, m], axis=1)))
    nodes = spec["nodes"]
    nodes[c]["inputs"].append(x)  # the residual
    nodes[c]["attrs"]["activation"] = "relu6"
    nodes[e].update(op="reorder", attrs={"layout": "nhwc"})
    nodes[rows0].update(op="slice", inputs=[x], attrs={"start": 0})
    nodes[rows1].update(op="slice", inputs=[x, rows0], attrs={"start": 1})
    nodes[h]["attrs"]["activation"] = "gelu"
    nodes[m]["attrs"]["activation"] = "sigmoid"
    return spec


def small_graphs() -> list[ModelRef]:
    return [ModelRef(name, 2, kwargs=SMALL.get(name, {})) for name in MODELS]


@cache
def reference(name: str) -> dict[str, np.ndarray]:
    if name == "all-ops":
        g = all_ops_graph()
    elif name == "fused":
        g = build_graph(fused_graph_spec())
    else:
        g = build_graph(ModelRef(name, 2, kwargs=SMALL.get(name, {})).to_spec())
    return reference_forward(g, g.random_inputs(seed=0))


def assert_outputs(got: list[dict[str, np.ndarray]], names: list[str]) -> None:
    bad = []
    for name, out in zip(names, got, strict=True):
        want = reference(name)
        assert out.keys() == want.keys(), name
        for k in want:
            assert out[k].shape == want[k].shape, (name, k, out[k].shape, want[k].shape)
            scale = max(1.0, float(np.abs(want[k]).max()))
            err = float(np.abs(out[k] - want[k]).max()) / scale
            if not err <= RTOL:
                bad.append(f"{name} {k}: relative error {err:.3g}")
    assert not bad, "\n".join(bad)


# Pinned and async with two workers where the machine has two physical cores
# (else unpinned, one worker): forks in TorchScript, ORT's parallel executor,
# TensorFlow's inter-op pool.
OUT_SETTINGS = (Settings(scheduler="async", inter_op=2, affinity="compact") if CORES >= 2
                else Settings())


@pytest.mark.parametrize("framework, mode", [
    pytest.param("tensorflow", "function", marks=needs["tensorflow"]),
    pytest.param("torch", "eager", marks=needs["torch"]),
    pytest.param("torch", "script", marks=needs["torch"]),
    pytest.param("onnxruntime", "all", marks=ONNX_MARKS),
    pytest.param("openvino", "f32", marks=OV_MARKS),
    pytest.param("native", None),
])
def test_every_model_matches_the_reference(framework: str, mode: str | None) -> None:
    graphs: list[Any] = [all_ops_graph(), *small_graphs()]
    names = ["all-ops", *MODELS]
    if framework != "native":  # the executor makes such nodes itself, from the graph as built
        graphs.append(fused_graph_spec())
        names.append("fused")
    got = framework_outputs(graphs, framework, OUT_SETTINGS, mode=mode)
    assert_outputs(got, names)


@pytest.mark.parametrize("framework, mode", [
    pytest.param("tensorflow", "function", marks=needs["tensorflow"]),
    pytest.param("torch", "eager", marks=needs["torch"]),
    pytest.param("torch", "script", marks=needs["torch"]),
    pytest.param("onnxruntime", "all", marks=ONNX_MARKS),
    pytest.param("openvino", "f32", marks=OV_MARKS),
])
def test_the_decoder_matches_the_reference(framework: str, mode: str) -> None:
    # RMSNorm, rotary positions, causal grouped-query attention and SwiGLU in
    # each framework's own ops, at 2 threads.
    names = ["llama-tiny", "llama-3.1-8b"]
    got = framework_outputs([ModelRef(n, 2, kwargs=SMALL.get(n, {})) for n in names],
                            framework, Settings(intra_op=min(2, CPUS)), mode=mode)
    assert_outputs(got, names)


@needs["torch"]
def test_torch_compile_matches_the_reference() -> None:
    names = ["mlp-512", "transformer"]
    got = framework_outputs([ModelRef(n, 2, kwargs=SMALL.get(n, {})) for n in names], "torch",
                            mode="compile")
    assert_outputs(got, names)


@needs["tensorflow"]
def test_tensorflow_xla_and_eigen_match_the_reference() -> None:
    assert_outputs(framework_outputs([all_ops_graph()], "tensorflow", mode="xla"), ["all-ops"])
    eigen = framework_outputs([all_ops_graph()], "tensorflow", Settings(library="eigen"))
    assert_outputs(eigen, ["all-ops"])


# ------------------------------------------------------ reported thread settings

SMALL_MLP = ModelRef("mlp-512", 2, kwargs={"layers": 2})


def _threads() -> Settings:
    n = min(2, CORES)  # compact, smt=False: a thread per physical core
    return Settings(intra_op=n, affinity="compact")


@needs["tensorflow"]
def test_tensorflow_reports_the_requested_threads() -> None:
    s = Settings(scheduler="async", inter_op=2, intra_op=3)
    res = run_framework(SMALL_MLP, "tensorflow", s, repeats=3, profile=2)
    assert res.ok and res.answer is not None, res.error
    assert res.reported["inter_op_parallelism_threads"] == 2
    assert res.reported["intra_op_parallelism_threads"] == 3
    assert res.reported["synchronous_execution"] is False
    assert res.reported["TF_ENABLE_ONEDNN_OPTS"] == "1"
    assert res.answer.core_loaded is False
    assert {k["op"] for k in res.job.figures["kernels"]} >= {"linear"}
    assert {n["knob"] for n in res.not_applicable} == {"pool"}  # openmp: TF has its own


@needs["torch"]
def test_torch_reports_the_requested_threads() -> None:
    s = _threads()
    res = run_framework(SMALL_MLP, "torch", s, mode="script", repeats=3, profile=2)
    assert res.ok and res.answer is not None, res.error
    assert res.reported["num_threads"] == s.intra_op
    assert res.reported["num_interop_threads"] == 1
    assert res.answer.core_loaded is False
    cpus = child_cpus(s)
    assert list(res.answer.process_cpus) == sorted(cpus or ALLOWED)
    assert res.env["GOMP_CPU_AFFINITY"] == " ".join(map(str, cpus or []))
    audit = res.job.figures["proc_audit"]
    assert audit["working"] and set(audit["cpus_allowed"]) <= set(cpus or ALLOWED)
    assert {k["op"] for k in res.job.figures["kernels"]} >= {"linear", "eltwise"}
    async_eager = run_framework(SMALL_MLP, "torch", Settings(scheduler="async", inter_op=2),
                                mode="eager", repeats=2)
    assert async_eager.reported["num_interop_threads"] == 2
    assert [n["knob"] for n in async_eager.not_applicable] == ["scheduler"]


@needs_onnx
def test_onnxruntime_reports_the_requested_threads() -> None:
    s = _threads()
    res = run_framework(SMALL_MLP, "onnxruntime", s, repeats=3, profile=2)
    assert res.ok, res.error
    so = res.reported["session_options"]
    assert so["intra_op_num_threads"] == s.intra_op and so["inter_op_num_threads"] == 1
    assert so["execution_mode"] == "ORT_SEQUENTIAL"
    cpus = child_cpus(s) or []
    want = ";".join(str(c + 1) for c in cpus[1:]) or None  # ORT counts CPUs from 1
    assert so["session.intra_op_thread_affinities"] == want
    assert {k["op"] for k in res.job.figures["kernels"]} == {"linear"}
    # The IR version opset 17 needs (onnx's release table), whatever onnx writes by default.
    assert (res.reported["onnx_ir_version"], res.reported["onnx_opset"]) == (8, 17)
    assert res.job.info["onnx_ir_version"] == 8
    par = run_framework(SMALL_MLP, "onnxruntime", Settings(scheduler="async", inter_op=2,
                                                           intra_op=1), repeats=2)
    so = par.reported["session_options"]
    assert (so["execution_mode"], so["inter_op_num_threads"]) == ("ORT_PARALLEL", 2)


@needs["tensorflow"]
def test_tensorflow_profile_parsers_agree_on_ops() -> None:
    spec = ModelRef("resnet50", 1, kwargs={"image_size": 32})
    res = run_child("tensorflow", [Job(spec, repeats=0, profile=2),
                                   Job(spec, repeats=0, profile=2, profile_parser="xplane")])
    assert res.ok, res.error
    # Bookkeeping kernels ("other") may differ: the protobuf holds a few more events.
    json_ops, xplane_ops = ({k["op"]: k["calls"] for k in j.figures["kernels"]
                             if k["op"] != "other"} for j in res.jobs)
    assert json_ops == xplane_ops
    assert json_ops["conv2d"] == 53  # every convolution, BN / ReLU fused or not
    assert res.jobs[1].info["profile_parser"] == "xplane"


# ---------------------------------------------------------------- failures

FAST = ModelRef("mlp-512", 1, kwargs={"layers": 1})


@pytest.mark.parametrize("hook, timeout, status, message", [
    ("abort", 60.0, "error", "died of SIGABRT"),
    ("hang", 3.0, "timeout", "timed out after 3 s"),
    ("import=pyparbench_no_such_framework",
     60.0, "error", "cannot import pyparbench_no_such_framework: ModuleNotFoundError"),
])
def test_a_failing_child_names_its_configuration(monkeypatch: pytest.MonkeyPatch, hook: str,
                                                 timeout: float, status: str,
                                                 message: str) -> None:
    monkeypatch.setenv(HOOK_ENV, hook)
    s = Settings(intra_op=1)
    res = run_framework(FAST, "torch", s, mode="script", timeout=timeout)
    assert res.status == status
    assert message in res.error
    assert res.error.startswith(f"torch (script) on mlp-512 batch 1 (layers=1) under "
                                f"{s.label()}")
    assert res.config["framework"] == "torch" and res.config["mode"] == "script"
    assert res.answer is None and res.as_dict()["status"] == status
    with pytest.raises(ChildFailed, match=message) as info:
        framework_outputs([FAST], "onnxruntime", timeout=timeout)
    assert info.value.status == status
    assert info.value.error.startswith("onnxruntime (all) on mlp-512 batch 1 (layers=1)")


@needs_onnx
def test_the_parent_goes_on_after_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOOK_ENV, "abort@torch")
    res = measure_overhead("mlp-512", 1, frameworks=["torch", "onnxruntime"],
                           modes={"torch": ["eager"]}, repeats=3, warmup=1, profile=2,
                           kernel_repeats=2, dispatch_nodes=20, model_kwargs={"layers": 2})
    torch_entry, ort = res["frameworks"]
    assert torch_entry["status"] == "error" and "died of SIGABRT" in torch_entry["error"]
    assert "torch (eager) on mlp-512 batch 1 (layers=2)" in torch_entry["error"]
    assert ort["status"] == "ok" and ort["overhead_ratio"] > 0
    assert res["native"]["status"] == "ok" and res["native"]["kernel_sum_ns"] > 0
    for t in res["dispatch"]["threads"]:
        row = res["dispatch"]["by_threads"][str(t)]
        assert row["native"]["us_per_node"] > 0
        assert "died of SIGABRT" in row["frameworks"]["torch/eager"]["error"]
        assert row["frameworks"]["onnxruntime/all"]["us_per_node"] > 0
    json.dumps(res)


def test_a_failing_graph_is_reported_and_the_others_run() -> None:
    bad = {"kind": "model", "model": "mlp-512", "batch": 1, "seed": 0,
           "kwargs": {"no_such_argument": 1}}
    res = run_child("native", [Job(bad, repeats=1), Job(FAST, repeats=1)])
    assert res.ok
    first, second = res.jobs
    assert not first.ok and "no_such_argument" in first.error
    assert first.error.startswith("native on mlp-512 batch 1 (no_such_argument=1)")
    assert res.first_error() == first.error
    assert second.ok and second.latency["median"] > 0


@needs_onnx
def test_a_runtime_that_reads_no_common_version_fails_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # onnxruntime as one too old for IR 8 would answer (1.9 read IR 7 at most).
    (tmp_path / "ppb_old_onnxruntime.py").write_text(
        "from onnxruntime import *  # noqa: F403\n"
        "__version__ = '1.9.0'\n"
        "def InferenceSession(*args, **kwargs):\n"
        "    raise RuntimeError('[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Failed to load '\n"
        "                       'model with error:\\n Unsupported model IR version: 8, max '\n"
        "                       'supported IR version: 7')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv(HOOK_ENV, "import=ppb_old_onnxruntime@onnxruntime")
    res = run_framework(FAST, "onnxruntime", repeats=1)
    assert res.status == "error"
    assert "\n" not in res.error
    assert ("NoCommonVersion: onnxruntime 1.9.0 cannot read ONNX IR version 8 with opset 17"
            in res.error), res.error
    assert res.error.endswith("Unsupported model IR version: 8, max supported IR version: 7")
    assert res.reported["onnx_model_error"] in res.error


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="unknown framework 'tensorfloww'"):
        run_framework(FAST, "tensorfloww")
    with pytest.raises(ValueError, match="unknown torch mode 'jit'"):
        run_framework(FAST, "torch", mode="jit")
    with pytest.raises(ValueError, match="unknown framework 'mxnet'"):
        measure_overhead("mlp-512", 1, frameworks=["mxnet"])
    with pytest.raises(ValueError, match="modes given for frameworks not chosen"):
        entries(["torch"], {"onnxruntime": ["all"]})
    with pytest.raises(ValueError, match="instances=2"):
        measure_overhead("mlp-512", 2, Settings(instances=2))
    with pytest.raises(ValueError, match="unknown model 'resnet51'"):
        measure_overhead("resnet51", 1)
    with pytest.raises(ValueError, match=r"threads must be integers >= 1, got \[0\]"):
        measure_dispatch([0])
    with pytest.raises(ValueError, match="nodes must be >= 1, got 0"):
        measure_dispatch([1], nodes=0)
    with pytest.raises(ValueError, match="repeats must be an integer >= 0, got -1"):
        run_child("native", [Job(FAST, repeats=-1)])
    with pytest.raises(ValueError, match="inline_inner must be an integer >= 1, got 0"):
        run_child("native", [Job(FAST, inline_repeats=2, inline_inner=0)])
    with pytest.raises(TypeError, match="settings must be a pyparbench Settings"):
        map_settings("torch", {"intra_op": 2}, "eager")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected a ModelRef, a Graph or a graph spec"):
        run_child("native", [Job("resnet50")])  # type: ignore[arg-type]


# -------------------------------------------------------- the settings mapping


def test_settings_map_onto_each_framework() -> None:
    eigen = map_settings("tensorflow", Settings(library="eigen", operator="framework",
                                                pool="eigen"))
    assert eigen.env["TF_ENABLE_ONEDNN_OPTS"] == "0" and not eigen.not_applicable
    blas = map_settings("tensorflow", Settings(library="blas", omp_wait="passive"))
    assert {n.knob for n in blas.not_applicable} == {"library", "pool", "omp_wait"}
    t = map_settings("torch", Settings(intra_op=2, library="blas", omp_wait=100), "eager",
                     cpus=[3, 5])
    assert t.knobs["mkldnn"] is False and t.env["GOMP_SPINCOUNT"] == "100"
    assert t.env["GOMP_CPU_AFFINITY"] == "3 5" and t.knobs["cpu_mask"] == [3, 5]
    fork = map_settings("torch", Settings(scheduler="async", inter_op=2), "script")
    assert fork.knobs["fork_branches"] and "GOMP_CPU_AFFINITY" not in fork.env
    o = map_settings("onnxruntime", Settings(intra_op=3, omp_wait="passive",
                                             placement="shared"), "basic", cpus=[4, 5, 6])
    assert o.knobs["session.intra_op_thread_affinities"] == "6;7"
    assert o.knobs["session.intra_op.allow_spinning"] == "0"
    assert o.knobs["graph_optimization_level"] == "ORT_ENABLE_BASIC"
    per = map_settings("onnxruntime", Settings(scheduler="async", inter_op=2,
                                               placement="per-socket", instances=2))
    assert {"instances", "placement", "library"} <= {n.knob for n in per.not_applicable}
    assert json.dumps(per.as_dict())


def test_graph_specs_remake_the_same_graph() -> None:
    g = all_ops_graph()
    again = build_graph(json.loads(json.dumps(graph_to_spec(g))))
    assert again.as_dict() == g.as_dict()
    for a, b in zip(g.nodes, again.nodes, strict=True):
        for k in a.params:
            assert np.array_equal(a.params[k], b.params[k])
    from pyparbench.graph.passes import optimize, pipeline

    b = GraphBuilder("conv-bn")
    folded = optimize(b.build(b.batch_norm(b.conv2d(b.input("x", (1, 3, 8, 8)), 4, 3))),
                      pipeline("bn_fold")).graph
    assert [n.op for n in folded.nodes] == ["input", "conv2d"]
    with pytest.raises(ValueError, match="derived parameters"):
        graph_to_spec(folded)


def test_heavy_ops_and_the_dispatch_chain() -> None:
    g = build_graph(ModelRef("resnet50", 1).to_spec())
    ops = heavy_op_graphs(g)
    assert sum(o["count"] for o in ops) == g.heavy_ops == 54
    assert len(ops) < 30  # repeated bottleneck shapes counted once
    conv1 = next(o for o in ops if o["node"] == "conv1/conv")
    assert conv1["graph"].nodes[-1].shape == (1, 64, 112, 112)
    chain = dispatch_graph(7)
    assert len(chain.nodes) == 8 and chain.op_counts() == {"eltwise": 7, "input": 1}
    assert [n.attrs["kind"] for n in chain.nodes[1:4]] == ["relu", "tanh", "relu"]
    with pytest.raises(ValueError, match="nodes must be >= 1, got 0"):
        dispatch_graph(0)


@pytest.mark.parametrize("framework", [
    pytest.param("tensorflow", marks=needs["tensorflow"]),
    pytest.param("torch", marks=needs["torch"]),
    pytest.param("onnxruntime", marks=ONNX_MARKS),
    pytest.param("openvino", marks=OV_MARKS),
])
def test_a_framework_package_never_stands_in_for_its_framework(framework: str) -> None:
    """pyparbench.frameworks.torch (and .tensorflow, .onnxruntime) import the
    real framework, wherever the import is, in a child as the frameworks run."""
    code = (
        "import importlib, pkgutil, sys\n"
        f"import pyparbench.frameworks.{framework} as pkg\n"
        "for m in pkgutil.iter_modules(pkg.__path__):\n"
        "    importlib.import_module(f'{pkg.__name__}.{m.name}')\n"
        f"import {framework}\n"
        f"real = sys.modules[{framework!r}]\n"
        "print(real.__name__, real.__file__, getattr(real, '__version__', '?'))\n"
        "print(sorted(n for n, v in vars(sys.modules[pkg.__name__ + '.runtime']).items()\n"
        "             if v is real))\n")
    proc = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYPARBENCH_NO_CORE": "1"}, cwd="/",
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    first, names = proc.stdout.strip().splitlines()[-2:]
    name, path, version = first.split()
    assert name == framework and "pyparbench" not in path and version != "?"
    if framework == "torch":  # the only one imported at module level
        assert names == "['torch']"


@needs_onnx
def test_operator_scaling_covers_every_thread_count() -> None:
    res = operator_scaling("mlp-512", 1, frameworks=["onnxruntime"], max_threads=min(2, CPUS),
                           repeats=3, warmup=1, model_kwargs={"layers": 2})
    assert not res["errors"]
    assert res["threads"] == list(range(1, min(2, CPUS) + 1))
    (op,) = res["ops"]  # two layers of one shape
    assert op["count"] == 2 and op["describe"] == "linear (1,512) -> 512"
    for runner in ("native", "onnxruntime/all"):
        assert all(op["ns"][runner][str(t)] > 0 for t in res["threads"])
        assert op["speedup"][runner] > 0


# ---------------------------------------------------------------- the command


@needs_onnx
def test_overhead_command_json(monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    proc = subprocess.run(
        [*_pyparbench(), "overhead", "mlp-512", "--batch", "1", "--framework", "onnxruntime",
         "--json", "--repeats", "5", "--profile", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert {"model", "batch", "settings", "machine", "graph", "native", "frameworks",
            "dispatch"} <= set(res)
    assert (res["model"], res["batch"]) == ("mlp-512", 1)
    nat = res["native"]
    assert nat["latency"]["median"] > 0 and nat["kernel_sum_ns"] > 0
    # The kernel sum of the graph as built and of the executed graph; the
    # native time outside kernels is read against the latter.
    assert nat["executed_kernel_sum_ns"] > 0
    assert nat["outside_kernels_ns"] == pytest.approx(
        nat["latency"]["median"] - nat["executed_kernel_sum_ns"])
    assert nat["per_op"]["linear"]["nodes"] == 8
    # The time outside kernels split: executor, memory / cache, the rest.
    split = nat["split"]
    assert split["missing"] == [] and split["executed_nodes"] == 8
    assert split["outside_kernels_ns"] == pytest.approx(nat["outside_kernels_ns"])
    assert split["outside_kernels_ns"] == pytest.approx(
        split["executor_ns"] + split["memory_cache_ns"] + split["rest_ns"])
    assert split["executor_us_per_node"] == pytest.approx(
        res["dispatch"]["by_threads"]["1"]["native"]["executor_us"])
    assert split["cold_bound_ns"] > 0 and split["chain_flush_bytes"] > 8 * 512 * 512 * 4
    assert nat["beyond_kernels_ns"] == pytest.approx(
        nat["latency"]["median"] - split["kernels_in_chain_ns"])
    (ort,) = res["frameworks"]
    assert (ort["framework"], ort["mode"], ort["status"]) == ("onnxruntime", "all", "ok")
    for key in ("latency", "overhead_ns", "overhead_ratio", "kernel_ns", "outside_kernels_ns",
                "outside_share", "per_op", "reported", "not_applicable", "proc_audit"):
        assert key in ort, key
    assert ort["overhead_ns"] == pytest.approx(
        ort["latency"]["median"] - res["native"]["latency"]["median"])
    assert ort["beyond_kernels_ns"] == pytest.approx(
        ort["latency"]["median"] - split["kernels_in_chain_ns"])
    assert ort["per_op"][0]["op"] == "linear" and ort["per_op"][0]["framework_kernels"] == 8
    # The table labels both kernel sums.
    from pyparbench.cli.overhead import _print
    monkeypatch.setenv("COLUMNS", "240")
    _print(res)
    table = capsys.readouterr().out
    assert "executed, " in table and " as built" in table, table
    assert "native kernels: each plan kernel of the executed (optimised) graph alone" in table
    for label in ("memory / cache effects", "executor cost", "rest (outside kernels",
                  "bound: kernels with every cache flushed", "beyond the kernels as the chain"):
        assert label in table, label
    d = res["dispatch"]
    assert d["nodes"] == 400 and d["graph_opt"] == "none" and d["ops"] == ["relu", "tanh"]
    assert d["threads"] == list(dict.fromkeys([1, CPUS]))
    for t in d["threads"]:
        nat = d["by_threads"][str(t)]["native"]
        assert nat["us_per_node"] > 0 and nat["kernel_alone_us"] > 0
        assert nat["executor_us"] == pytest.approx(nat["us_per_node"] - nat["kernel_alone_us"])
        assert nat["range_us"][0] <= nat["range_us"][1]
        assert d["by_threads"][str(t)]["frameworks"]["onnxruntime/all"]["us_per_node"] > 0
    assert res["machine"]["cpus"]


def test_overhead_command_rejects_an_unknown_framework() -> None:
    proc = subprocess.run(
        [*_pyparbench(), "overhead", "mlp-512", "--framework", "mxnet"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert "invalid choice: 'mxnet'" in proc.stderr


@needs_onnx
def test_a_framework_configuration_runs_in_the_suite_runner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pyparbench run``'s framework rows: a Config with a framework runs in
    that framework's child and is stored like a native result; a crashing
    one is an error record naming it, and the runner goes on."""
    from pyparbench.harness.store import ResultStore
    from pyparbench.harness.runner import Config, run_configs

    s = Settings(intra_op=1)
    configs = [Config("mlp-512", 1, s, repeats=3),
               Config("mlp-512", 1, s, repeats=3, framework="onnxruntime", mode="all"),
               Config("mlp-512", 1, s, repeats=3, framework="onnxruntime", mode="basic")]
    store = ResultStore(tmp_path / "results.jsonl")
    native, ort = list(run_configs(configs[:2], store))
    assert native.status == ort.status == "ok"
    assert ort.config.framework == "onnxruntime" and ort.ns is not None and len(ort.ns) == 3
    assert ort.timing.median > 0 and ort.resolved is not None and ort.resolved["reported"]
    assert ort.key != native.key
    reported = ort.resolved["reported"]
    assert (reported["onnx_ir_version"], reported["onnx_opset"]) == (8, 17)
    monkeypatch.setenv(HOOK_ENV, "abort@onnxruntime")
    *_, bad = list(run_configs(configs, store))
    assert bad.status == "error" and "died of SIGABRT" in (bad.error or "")
    assert "onnxruntime (basic) on mlp-512 batch 1" in (bad.error or "")
    # Resumed: nothing runs again.
    again = list(run_configs(configs, store))
    assert [r.key for r in again] == [r.key for r in (native, ort, bad)]
    assert len(store.records()) == 3


def test_a_framework_configuration_with_a_bad_name_is_refused() -> None:
    from pyparbench.harness.runner import Config

    s = Settings(intra_op=1)
    with pytest.raises(ValueError, match="unknown onnxruntime mode 'no-such-mode'"):
        Config("mlp-512", 1, s, framework="onnxruntime", mode="no-such-mode")
    with pytest.raises(ValueError, match="unknown framework 'caffe'"):
        Config("mlp-512", 1, s, framework="caffe", mode="eager")
    with pytest.raises(ValueError, match="mode 'eager' without a framework"):
        Config("mlp-512", 1, s, mode="eager")
