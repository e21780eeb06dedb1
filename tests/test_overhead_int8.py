"""`overhead` on a quantized file as users make them (quantize_static, QDQ):
the native run splits its time per op type with the int8 nodes among them
(each timed alone as the node of a one-node plan, since pyparbench.ops has
no kernel that quantises around oneDNN's primitive), and ONNX Runtime's
int8 kernels are charged to the same op types, not to "other"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _quantized_models import cnn, quantized

pytest.importorskip("onnxruntime")

from pyparbench.frameworks.native.kernels import node_kernel  # noqa: E402
from pyparbench.graph import from_onnx  # noqa: E402
from pyparbench.reference import reference_forward  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def test_each_int8_node_is_timed_alone_on_its_own_output(tmp_path: Path) -> None:
    path, shapes = quantized(tmp_path, cnn, True, "uint8")
    graph = from_onnx(path)
    x = np.random.default_rng(3).standard_normal(shapes["x"]).astype(np.float32)
    values = reference_forward(graph, {"x": x}, return_all=True)
    timed = set()
    for node in graph.nodes:
        if node.op not in ("quantized_conv2d", "quantized_linear", "fake_quantize"):
            continue
        ins = [np.asarray(values[graph.nodes[j].name], np.float32) for j in node.inputs]
        made = node_kernel(node, ins, 1)
        assert made is not None, node.name
        kernel, run = made
        times = run(3, 1)
        assert len(times) == 3 and all(t > 0 for t in times), (node.name, times)
        # The one-node plan computed the node: its output is the reference's.
        got = kernel.output(node.name)
        want = np.asarray(values[node.name], np.float64)
        step = float(np.max(np.abs(want))) / 100
        assert np.max(np.abs(got - want)) <= step, node.name
        timed.add(node.op)
    assert {"quantized_conv2d", "quantized_linear"} <= timed


def test_overhead_of_a_qdq_file_splits_both_runtimes_per_op_type(tmp_path: Path) -> None:
    path, _ = quantized(tmp_path, cnn, True, "uint8")
    script = Path(sys.executable).parent / "pyparbench"
    cmd = [str(script)] if script.exists() else [sys.executable, "-P", "-m", "pyparbench"]
    proc = subprocess.run(
        [*cmd, "overhead", str(path), "--batch", "2", "--framework", "onnxruntime",
         "--json", "--repeats", "5", "--profile", "3", "--no-dispatch"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    res: dict[str, Any] = json.loads(proc.stdout)
    assert res["native"]["status"] == "ok", res["native"]
    (ort,) = res["frameworks"]
    assert ort["status"] == "ok", ort
    rows = {r["op"]: r for r in ort["per_op"]}
    conv = rows["quantized_conv2d"]
    assert conv["native_ns"] > 0 and conv["native_nodes"] == 2, conv
    assert conv["framework_ns"] > 0 and conv["framework_kernels"] >= 2, conv
    # Nearly all of ONNX Runtime's kernel time is on the graph's op types.
    other = rows.get("other", {}).get("framework_ns") or 0.0
    total = sum(r["framework_ns"] or 0.0 for r in ort["per_op"])
    assert other <= 0.25 * total, rows
