"""The `pyparbench` subcommands, run as a user would (fresh processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from _support import needs_onednn_bf16


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "pyparbench", *args], capture_output=True,
                          text=True, timeout=300)


def test_models_json_lists_every_model() -> None:
    from pyparbench.models import MODELS

    out = cli("models", "--batch", "1", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["model"] for r in rows] == list(MODELS)
    by_name = {r["model"]: r for r in rows}
    assert by_name["resnet50"]["params"] == 25_636_712
    assert by_name["googlenet"]["avg_width"] > 2  # Inception blocks are wide


def test_trace_writes_chrome_json(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    # The graph as built: 40 nodes, enough for both workers to get some.
    out = cli("trace", "squeezenet", "--batch", "1", "--inter-op", "2", "--repeats", "1",
              "--graph-opt", "none", "-o", str(path))
    assert out.returncode == 0, out.stderr
    assert "2 worker(s)" in out.stdout and "graph_opt=none" in out.stdout
    events = json.loads(path.read_text())["traceEvents"]
    assert {e["tid"] for e in events if e["ph"] == "X"} <= {0, 1}
    # Every convolution names the kernel that computed it; another node names
    # one only when a direct kernel computed it (a small node run alone).
    convs = [e for e in events if e.get("cat") == "conv2d"]
    assert convs and all(e["args"]["kernel"] for e in convs)
    others = [e["args"]["kernel"] for e in events
              if e.get("cat") not in (None, "conv2d") and "kernel" in e["args"]]
    assert all(k.startswith("direct:") for k in others), others
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("convolution kernels: "))
    assert sum(int(part.rsplit(" x", 1)[1]) for part in line.split(": ", 1)[1].split(", ")) \
        == len(convs)


def test_trace_with_a_preset(tmp_path: Path) -> None:
    out = cli("trace", "mlp-512", "--batch", "4", "--preset", "tftuner", "--repeats", "1",
              "-o", str(tmp_path / "t.json"))
    assert out.returncode == 0, out.stderr
    assert "tftuner sync 1x" in out.stdout


@pytest.mark.slow
def test_bad_arguments_are_reported_without_a_traceback() -> None:
    for args, msg in ((("trace", "alexnet"), "unknown model 'alexnet'"),
                      (("trace", "mlp-512", "--affinity", "0,x"), "--affinity must be"),
                      (("trace", "mlp-512", "--batch", "0"), "--batch must be >= 1, got 0"),
                      (("run", "--repeats", "0"), "--repeats must be >= 1, got 0"),
                      (("trace", "mlp-512", "--inter-op", "x"), "--inter-op must be an integer"),
                      (("models", "--batch", "-3"), "batch must be >= 1")):
        out = cli(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert msg in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
def test_out_of_range_options_and_bad_outputs_are_refused_before_any_work(
        tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for args, msg in (
            (("run", "--confirm", "-1"), "--confirm must be >= 0, got -1"),
            (("run", "-o", str(a_file)), f"-o {a_file}: a file, not a folder"),
            (("run", "-o", str(a_file / "sub")), "cannot make the folder"),
            (("overhead", "mlp-512", "--timeout", "-5"), "--timeout must be a number > 0"),
            (("overhead", "mlp-512", "--timeout", "nan"), "--timeout must be a number > 0"),
            (("overhead", "mlp-512", "--seed", "-1"), "--seed must be >= 0, got -1"),
            (("overhead", "mlp-512", "--warmup", "-2"), "--warmup must be >= 0, got -2"),
            (("trace", "mlp-512", "--warmup", "-1"), "--warmup must be >= 0, got -1"),
            (("trace", "mlp-512", "-o", "/nonexistent/dir/t.json"),
             "-o /nonexistent/dir/t.json: no folder /nonexistent/dir"),
            (("trace", "mlp-512", "-o", str(tmp_path)), "a folder, not a file"),
            (("peak", "--remeasure"), "it needs -o DIR"),
            (("peak", "--isa", ""), "invalid choice: ''"),
            (("merge", str(tmp_path), "-o", str(a_file)), "a file, not a folder"),
            (("compare", str(tmp_path), str(tmp_path), "--html", "/nonexistent/x.html"),
             "--html /nonexistent/x.html: no folder /nonexistent")):
        out = cli(*args)
        assert out.returncode == 2, (args, out.stderr)
        # One line naming the option (after argparse's usage for its own checks).
        assert msg in out.stderr.strip().splitlines()[-1], (args, out.stderr)
        assert "Traceback" not in out.stderr
    # --isa lists no empty choice.
    assert "{avx512,avx2,generic}" in cli("peak", "--help").stdout


@pytest.mark.slow
def test_run_a_small_suite_then_resume(tmp_path: Path,
                                       seed_peak: Callable[[Path], Path]) -> None:
    out_dir = tmp_path / "results"
    seed_peak(out_dir)
    args = ("run", "--models", "mlp-512", "--batches", "2", "--repeats", "1", "--no-operators",
            "-o", str(out_dir))
    out = cli(*args)
    assert out.returncode == 0, out.stderr
    lines = (out_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) >= 4 and all(json.loads(x)["status"] == "ok" for x in lines)
    assert "xtuner" in out.stdout and f"{len(lines)} results" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == f"report: {out_dir / 'report.html'}"
    again = cli(*args)
    assert again.returncode == 0
    assert len((out_dir / "results.jsonl").read_text().splitlines()) == len(lines)


def test_run_rejects_an_unknown_model(tmp_path: Path) -> None:
    out = cli("run", "--models", "alexnet", "-o", str(tmp_path / "r"))
    assert out.returncode == 2 and "unknown model(s) ['alexnet']" in out.stderr


@pytest.mark.slow
def test_models_describe_a_file_and_a_model(tmp_path: Path) -> None:
    import numpy as np
    import pytest

    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1)]
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "fc"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "fb")]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", 3, 16, 16])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, ["N", 4])], inits)
    path = tmp_path / "small.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    out = cli("models", "--describe", str(path), "--batch", "2", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["model"] == f"small.onnx@{d['sha256'][:12]}" and d["batch"] == 2
    assert d["heavy_ops"] == 2
    assert d["params"] == 8 * 27 + 4 * 8 + 4 and d["depth"] == 2 and d["avg_width"] == 1.0
    assert len(d["sha256"]) == 64 and d["inputs"] == {"x": [2, 3, 16, 16]}
    out = cli("models", "--describe", str(path))
    assert out.returncode == 0 and "avg width" in out.stdout, out.stderr
    out = cli("models", "--describe", "resnet50", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["params"] == 25_636_712
    out = cli("models", "--describe", str(tmp_path / "nope.onnx"))
    assert out.returncode == 2 and "neither a model" in out.stderr
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    out = cli("models", "--describe", str(bad))
    assert out.returncode == 2 and "bad.onnx" in out.stderr and out.stderr.count("\n") == 1


PRECISION_COMMANDS = (("run",), ("recommend", "mlp-512"), ("overhead", "mlp-512"),
                      ("trace", "mlp-512"), ("peak",))


def test_precision_is_an_option_of_each_command_and_other_values_are_refused() -> None:
    for args in PRECISION_COMMANDS:
        assert "--precision {fp32,bf16,int8}" in cli(args[0], "--help").stdout, args
        out = cli(*args, "--precision", "fp16")
        assert out.returncode == 2, (args, out.stderr)
        assert ("argument --precision: invalid choice: 'fp16' (choose from 'fp32', 'bf16', "
                "'int8')"
                in out.stderr.strip().splitlines()[-1]), (args, out.stderr)


@needs_onednn_bf16()
def test_trace_at_bf16(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    out = cli("trace", "mlp-512", "--batch", "4", "--repeats", "1", "--precision", "bf16",
              "-o", str(path))
    assert out.returncode == 0, out.stderr
    assert "library/onednn/openmp none bf16:" in out.stdout
    assert "bf16: 8 matrix nodes (" in out.stdout and "8 conversions to bf16" in out.stdout
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    linear = [e for e in events if e["cat"] == "linear"]
    assert len(linear) == 8 and all(e["args"]["precision"] == "bf16" and e["args"]["kernel"]
                                    and isinstance(e["args"]["emulated"], bool) for e in linear)
    assert all("precision" not in e["args"] for e in events if e["cat"] != "linear")


def test_a_precision_this_onednn_lacks_is_said_in_one_line() -> None:
    """Where oneDNN has no bf16 kernel (here: capped to SSE4.1, below every
    ISA with one), a command at bf16 ends with one line naming the ISA and
    what bf16 needs, status 1, no traceback; the API raises
    ppb.PrecisionUnavailable, a RuntimeError."""
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="SSE41")
    out = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "trace", "mlp-512",
                          "--repeats", "1", "--precision", "bf16"], capture_output=True,
                         text=True, timeout=300, env=env)
    if out.returncode == 0:
        pytest.skip("this oneDNN runs bf16 products below AVX2 (reference kernels)")
    assert out.returncode == 1, out.stderr
    assert out.stderr.startswith("pyparbench trace: error: "), out.stderr
    assert "precision 'bf16' is not available" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    api = subprocess.run([sys.executable, "-P", "-c", textwrap.dedent("""
        import pyparbench as ppb
        try:
            ppb.ops.Gemm(4, 4, 4, precision="bf16")
        except ppb.PrecisionUnavailable as e:
            assert isinstance(e, RuntimeError) and "bf16 needs" in str(e), e
            print("refused")
        """)], capture_output=True, text=True, timeout=120, env=env)
    assert api.stdout.strip() == "refused", api.stderr


def test_peak_names_the_ceiling_of_a_precision() -> None:
    out = cli("peak", "--quick", "--json", "--precision", "bf16")
    assert out.returncode == 0, out.stderr
    peak = json.loads(out.stdout)
    assert peak["precision"] == "bf16"
    for p in peak["points"]:
        want = p["bf16_gflops"] if p["bf16_gflops"] is not None else p["fma_gflops"]
        assert peak["compute_gflops"][str(p["threads"])] == want
    fp32 = cli("peak", "--quick", "--json")
    assert json.loads(fp32.stdout)["precision"] == "fp32"


def test_recommend_and_run_at_bf16(tmp_path: Path) -> None:
    out = cli("recommend", "mlp-512", "--batch", "4", "--no-calibrate", "--no-verify",
              "--precision", "bf16", "--json")
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert rec["settings"]["precision"] == "bf16"
    refused = cli("recommend", "mlp-512", "--precision", "bf16", "--libraries", "onednn,eigen",
                  "--no-calibrate")
    assert refused.returncode == 2
    assert "precision='bf16' runs on the onednn library only" in refused.stderr
    plan = cli("run", "--models", "mlp-512", "--batches", "2", "--no-operators", "--dry-run",
               "--json", "--precision", "bf16", "-o", str(tmp_path / "r"))
    assert plan.returncode == 0, plan.stderr
    labels = [c["label"] for c in json.loads(plan.stdout)["configurations"]]
    # Every setting at bf16, on onednn, the frameworks' included (OpenVINO's
    # mode its bf16 hint; no framework preset, which sets no precision).
    assert labels and all(lb.endswith(" bf16") and "/onednn/" in lb for lb in labels), labels
    assert any(lb.startswith("openvino (bf16) ") for lb in labels), labels
    assert not any("openvino-" in lb for lb in labels), labels
    fp32 = cli("run", "--models", "mlp-512", "--batches", "2", "--no-operators", "--dry-run",
               "--json", "--precision", "fp32", "-o", str(tmp_path / "r"))
    assert not any("bf16" in c["label"] for c in json.loads(fp32.stdout)["configurations"])


def test_run_at_int8_end_to_end(tmp_path: Path) -> None:
    out = cli("run", "--models", "mlp-512", "--batches", "2", "--repeats", "1", "--precision",
              "int8", "--no-operators", "--no-frameworks", "--no-recommend",
              "-o", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    assert "speed figures, not accuracy ones" in " ".join(out.stdout.split())
    assert "mlp-512 int8" in out.stdout
    records = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text()
               .splitlines()]
    assert records and all(r["status"] == "ok" for r in records)
    assert all(r["config"]["settings"]["precision"] == "int8" for r in records)
    assert all(r["resolved"]["precision"]["int8_nodes"] == 8 for r in records)
    # No framework runs int8: asked for, one is refused naming itself and the model.
    refused = cli("overhead", "mlp-512", "--precision", "int8", "--framework", "torch",
                  "--repeats", "1", "--warmup", "0", "--profile", "0", "--cold-repeats", "0",
                  "--no-dispatch", "--json")
    assert refused.returncode == 0, refused.stderr
    runs = json.loads(refused.stdout)["frameworks"]
    assert runs and all(r["status"] == "not_applicable" and
                        "framework torch has no int8 translation of built-in model 'mlp-512'"
                        in r["error"] for r in runs)
