"""A user's ONNX file wherever a model name is taken: the Python API, `run`,
`recommend`, `overhead`, `trace`, and the records that name it by file name
and content hash.

The files are made here: small torch modules exported with
``torch.onnx.export``, and graphs written with ``onnx.helper``.
"""

from __future__ import annotations

import io
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

from _support import cli_main
from pyparbench.cli import main
from pyparbench.frameworks.spec import NO_MODULE
from pyparbench.models import build, files, resolve
from pyparbench.models.modules import MODULES_ENV, attach_module, attached_module

torch = pytest.importorskip("torch")


class _Residual(torch.nn.Module):  # type: ignore[misc]
    """A residual block with batch norm, a pooled head: what a CNN exports."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8),
                                  nn.ReLU())
        self.c1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 10)
        self.b1.running_mean.uniform_(-0.2, 0.2)
        self.b1.running_var.uniform_(0.5, 1.5)

    def forward(self, x: Any) -> Any:
        x = self.stem(x)
        y = torch.relu(self.b1(self.c1(x)) + x)
        return self.head(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


def export_residual(path: Path, seed: int = 0) -> Path:
    """The residual block (weights from ``seed``) exported to ``path``, batch symbolic."""
    torch.manual_seed(seed)
    module = _Residual().eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(1, 3, 16, 16),), buf, input_names=["x"],
                          output_names=["out"], dynamic_axes={"x": {0: "batch"}},
                          opset_version=17, dynamo=False)
    path.write_bytes(buf.getvalue())
    return path


def _unsupported(path: Path) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]),
                           helper.make_node("Hardmax", ["r"], ["y"], name="/hm")], "g", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _digest12(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each test registers its files afresh (and its children inherit only those).
    monkeypatch.delenv(files.FILES_ENV, raising=False)
    monkeypatch.delenv(MODULES_ENV, raising=False)


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return cli_main(capsys, *argv)


# ------------------------------------------------------------------ names and the API


def test_a_file_is_named_by_file_name_and_content_hash(tmp_path: Path) -> None:
    path = export_residual(tmp_path / "my.onnx")
    name = resolve(str(path))
    assert name == f"my.onnx@{_digest12(path)}" and files.is_file_key(name)
    assert resolve(name) == name  # registered: the name alone is enough now
    g = build(name, 3)
    assert g.name == name and g.meta["model"] == name and g.meta["onnx_file"] == str(path)
    assert g[g.inputs[0]].shape == (3, 3, 16, 16)
    # A child finds the file by the name, through the environment it inherits.
    assert json.loads(os.environ[files.FILES_ENV]) == {name: str(path.resolve())}
    # Built-in names are untouched.
    assert resolve("resnet50") == "resnet50" and not files.is_file_key("resnet50")


def test_a_changed_file_is_refused_under_its_old_name(tmp_path: Path) -> None:
    path = export_residual(tmp_path / "my.onnx")
    name = resolve(str(path))
    export_residual(path, seed=1)  # other weights, same file name
    with pytest.raises(ValueError, match="changed since it was named"):
        build(name, 1)
    assert resolve(str(path)) != name


def test_bad_names_and_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown model 'resnet51'.*or an ONNX file's path"):
        resolve("resnet51")
    with pytest.raises(ValueError, match="no such file"):
        resolve(str(tmp_path / "missing.onnx"))
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07 not a protobuf at all")
    with pytest.raises(ValueError, match="not an ONNX model"):
        resolve(str(tmp_path / "junk.onnx"))
    with pytest.raises(ValueError, match=r"unsupported ONNX ops: Hardmax x1 \(node '/hm'\)"):
        resolve(str(_unsupported(tmp_path / "hm.onnx")))
    with pytest.raises(ValueError, match="no file of that name was given"):
        build("other.onnx@0123456789ab", 1)
    path = export_residual(tmp_path / "my.onnx")
    with pytest.raises(ValueError, match="image_size do not apply"):
        build(resolve(str(path)), 1, image_size=64)


def test_run_model_takes_a_path(tmp_path: Path) -> None:
    from pyparbench.executor import run_model
    from pyparbench.settings import Settings

    path = export_residual(tmp_path / "my.onnx")
    rec = run_model(str(path), 2, Settings(), repeats=2, warmup=1)
    assert rec.graph == f"my.onnx@{_digest12(path)}" and len(rec.ns) == 2


@pytest.mark.parametrize("command", [
    ["run", "--quick", "--no-operators", "--models"], ["recommend"], ["overhead"], ["trace"],
], ids=["run", "recommend", "overhead", "trace"])
def test_a_bad_file_is_one_line_and_exit_2_before_anything_runs(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "junk.onnx").write_bytes(b"")
    cases = {str(tmp_path / "missing.onnx"): "no such file",
             str(tmp_path / "junk.onnx"): "the file is empty: not an ONNX model",
             str(_unsupported(tmp_path / "hm.onnx")): "unsupported ONNX ops: Hardmax x1"}
    for path, why in cases.items():
        out_dir = tmp_path / "out"
        extra = ["-o", str(out_dir)] if command[0] in ("run", "trace") else []
        code, out, err = _main(capsys, *command, path, *extra)
        assert code == 2 and why in err and len(err.strip().splitlines()) == 1, err
        assert not out_dir.exists()  # nothing ran, nothing was written


def test_run_refuses_a_batch_the_file_cannot_take_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = onnx.load_model_from_string(export_residual(tmp_path / "my.onnx").read_bytes())
    for vi in (*model.graph.input, *model.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_value = 1  # a fixed batch of 1
    onnx.save(model, str(tmp_path / "fixed.onnx"))
    out_dir = tmp_path / "out"
    code, _, err = _main(capsys, "run", "--quick", "--models", str(tmp_path / "fixed.onnx"),
                         "--batches", "1", "2", "-o", str(out_dir))
    assert code == 2 and "has a fixed batch of 1, not the batch=2" in err, err
    assert len(err.strip().splitlines()) == 1 and not out_dir.exists()


# ------------------------------------------------------------------ the commands


def test_trace_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = export_residual(tmp_path / "my.onnx")
    code, out, _ = _main(capsys, "trace", str(path), "--batch", "2", "-o",
                         str(tmp_path / "t.json"), "--repeats", "1")
    assert code == 0 and out.startswith(f"my.onnx@{_digest12(path)} batch 2, "), out
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    # The file's nodes, by the file's names: its input and output, a convolution's kernel.
    names = {e["name"] for e in events if "node" in e.get("args", {})}
    assert {"x", "out"} <= names, names
    assert any(e["args"].get("kernel") for e in events if "node" in e.get("args", {}))


def test_recommend_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = export_residual(tmp_path / "my.onnx")
    code, out, _ = _main(capsys, "recommend", str(path), "--batch", "4", "--json")
    assert code == 0
    rec = json.loads(out)
    assert rec["graph"] == f"my.onnx@{_digest12(path)}" and rec["batch"] == 4
    assert rec["settings"]["intra_op"] >= 1 and rec["predicted"]["latency_ms"] > 0
    # Verified in child processes, which loaded the file by its path.
    assert rec["calibration"]["verified"]


def test_overhead_of_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = export_residual(tmp_path / "my.onnx")
    code, out, _ = _main(capsys, "overhead", str(path), "--batch", "2", "--repeats", "3",
                         "--warmup", "1", "--profile", "2", "--no-dispatch", "--json")
    assert code == 0, out
    res = json.loads(out)
    assert res["model"] == f"my.onnx@{_digest12(path)}" and res["native"]["status"] == "ok"
    by = {(f["framework"], f["mode"]): f for f in res["frameworks"]}
    for key in (("tensorflow", "function"), ("torch", "eager"), ("torch", "script")):
        assert by[key]["status"] == "not_applicable" and NO_MODULE in by[key]["error"]
    ort = by[("onnxruntime", "all")]
    assert ort["status"] == "ok", ort.get("error")
    # ONNX Runtime ran the user's file, and agrees with the executor on the same inputs.
    assert ort["info"]["onnx_file"] == str(path.resolve())
    assert 0 <= ort["output_error"] <= 1e-4 and ort["overhead_ratio"] > 0
    # Its profile charged to the graph's op types, by the file's node names
    # (its own layout changes to reorder): nothing left as "other".
    charged = {k["op"] for k in ort["kernels"]}
    assert {"conv2d", "linear", "global_avg_pool"} <= charged and "other" not in charged, \
        ort["kernels"]
    # The table says it too.
    code, out, _ = _main(capsys, "overhead", str(path), "--repeats", "2", "--warmup", "0",
                         "--profile", "0", "--no-dispatch", "--framework", "torch",
                         "--framework", "onnxruntime")
    flat = " ".join(out.split())
    assert code == 0 and f"torch (eager) {NO_MODULE}" in flat
    assert "onnxruntime (all) ran the file itself; outputs: max |native" in flat


def test_the_framework_rows_of_one_file_share_one_native_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyparbench.harness import runner
    from pyparbench.resultfiles import RunConfig
    from pyparbench.settings import Settings

    path = export_residual(tmp_path / "my.onnx")
    key = resolve(str(path))
    started: list[str] = []
    real = runner.run_framework

    def counting(model: Any, framework: str, *a: Any, **k: Any) -> Any:
        started.append(framework)
        return real(model, framework, *a, **k)

    monkeypatch.setattr(runner, "run_framework", counting)
    monkeypatch.setattr(runner, "_NATIVE_OUTPUTS", type(runner._NATIVE_OUTPUTS)())
    errors = []
    for threads in (1, 2, 1):
        config = RunConfig(key, 1, Settings(intra_op=threads), repeats=1, warmup=0,
                           framework="onnxruntime", mode="all")
        res = runner.run_config(config, timeout=120)
        assert res.status == "ok", res.error
        assert res.resolved is not None
        errors.append(res.resolved["output_error"])
    # Three ONNX Runtime rows, one native run whose outputs all three are checked against.
    assert started == ["onnxruntime", "native", "onnxruntime", "onnxruntime"]
    assert all(e is not None and 0 < e <= 1e-4 for e in errors), errors


# ------------------------------------------------------------------ run, resumed


@pytest.mark.slow
def test_run_a_file_then_a_changed_file_is_not_resumed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        seed_peak: Callable[[Path], Path]) -> None:
    path = export_residual(tmp_path / "my.onnx")
    old = f"my.onnx@{_digest12(path)}"
    out_dir = tmp_path / "r"
    seed_peak(out_dir)
    suite = ("run", "--quick", "--models", str(path), "--batches", "1", "--repeats", "1",
             "--no-operators", "--no-recommend", "--confirm", "0", "-o", str(out_dir))
    code, out, err = _main(capsys, *suite)
    assert code == 0, out + err
    records = [json.loads(x) for x in (out_dir / "results.jsonl").read_text().splitlines()]
    assert records and {r["config"]["model"] for r in records} == {old}
    fw = {r["config"]["framework"]: r for r in records if r["config"].get("framework")}
    assert fw["onnxruntime"]["status"] == "ok"
    # ONNX Runtime ran the file itself; the native graph's outputs agree with it.
    assert 0 < fw["onnxruntime"]["resolved"]["output_error"] <= 1e-4
    for name in ("tensorflow", "torch"):
        assert fw[name]["status"] == "skipped" and fw[name]["error"] == NO_MODULE
    # The file's rows in the summary, the plan's graph figures, the report, the terminal.
    summary = json.loads((out_dir / "summary.json").read_text())
    assert old in json.dumps(summary["models"]) and old in json.dumps(
        summary["framework_overhead"])
    ort_rows = [i for i in summary["framework_overhead"] if i["framework"] == "onnxruntime"]
    assert ort_rows and all(0 < i["output_error"] <= 1e-4 for i in ort_rows)
    assert f"outputs of {old} b1 against ONNX Runtime running the file: max |native - ORT| " \
        "/ max |ORT| = " in " ".join(out.split())
    assert "outputs: max |native - framework| / max |framework|" in (
        out_dir / "report.html").read_text()
    graphs = json.loads((out_dir / "graphs.json").read_text())
    assert old in json.dumps(graphs)
    assert old in (out_dir / "report.html").read_text()
    assert "framework run(s) of ONNX files not applicable" in " ".join(out.split())

    # The same file name, other bytes: a new model, measured anew.
    export_residual(path, seed=1)
    new = f"my.onnx@{_digest12(path)}"
    assert new != old
    code, out, err = _main(capsys, *suite)
    assert code == 0, out + err
    again = [json.loads(x) for x in (out_dir / "results.jsonl").read_text().splitlines()]
    assert again[:len(records)] == records  # the old rows are kept, as the old model's
    fresh = again[len(records):]
    assert len(fresh) == len(records) and {r["config"]["model"] for r in fresh} == {new}
    assert min(r["started"] for r in fresh) > max(r["started"] for r in records)
    summary = json.loads((out_dir / "summary.json").read_text())
    assert new in json.dumps(summary["models"])

    # compare matches a file's rows by content hash: the old bytes' rows with
    # themselves, never with the new bytes' rows.
    for name, rows in (("old", records), ("new", fresh)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    matched = {}
    for other in ("old", "new"):
        code, out, err = _main(capsys, "compare", str(tmp_path / "old.jsonl"),
                               str(tmp_path / f"{other}.jsonl"), "--json")
        assert code == 0, err
        matched[other] = json.loads(out)["comparisons"][0]
    assert matched["old"]["rows"] and not matched["old"]["only_in_other"]
    assert not matched["new"]["rows"]
    assert all(old in k for k in matched["new"]["only_in_baseline"])
    assert all(new in k for k in matched["new"]["only_in_other"])


# ------------------------------------------------------------------ a module given


def test_pytorch_runs_the_module_attached_to_a_file(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from pyparbench.frameworks import ModelRef, run_framework
    from pyparbench.reference import output_error

    path = export_residual(tmp_path / "my.onnx")
    name = resolve(str(path))
    assert run_framework(ModelRef(name, 2), "torch").status == "not_applicable"
    torch.manual_seed(0)  # the weights the file was exported with
    module = _Residual()
    # Exported with a dynamic batch (at 2: torch.export fixes a batch of 1),
    # the file imported once for its inputs.
    imported: list[int | None] = []
    real_load = files.load
    monkeypatch.setattr(files, "load",
                        lambda n, b=None, **k: imported.append(b) or real_load(n, b, **k))
    assert attach_module(path, module, directory=tmp_path / "mods") == name
    assert imported == [1]
    monkeypatch.setattr(files, "load", real_load)
    assert attached_module(name) is not None and attached_module(name).is_file()
    ort_run = run_framework(ModelRef(name, 3), "onnxruntime", repeats=2, outputs=True)
    assert ort_run.ok, ort_run.error
    for mode in ("eager", "script"):  # in a child, at another batch than the export's
        res = run_framework(ModelRef(name, 3), "torch", mode=mode, repeats=2, outputs=True)
        assert res.ok, res.error
        assert len(res.job.ns) == 2
        assert output_error(res.job.outputs(), ort_run.job.outputs()) <= 1e-5
    # TensorFlow takes no module: still not applicable.
    assert run_framework(ModelRef(name, 3), "tensorflow").error.endswith(NO_MODULE)
    # A module that is not the file's network, or a model pyparbench builds, is refused.
    torch.manual_seed(5)
    with pytest.raises(ValueError, match="is not the file's network: max"):
        attach_module(path, _Residual(), directory=tmp_path / "mods")
    with pytest.raises(ValueError, match="'mlp-512' is not an ONNX file"):
        attach_module("mlp-512", module)
    assert np.isfinite(ort_run.job.ns).all()


def test_output_error_reads_what_children_send() -> None:
    import numpy as np

    from pyparbench.frameworks.child import decode, encode
    from pyparbench.reference import output_error

    want = np.linspace(-2.0, 4.0, 12, dtype=np.float32).reshape(3, 4)
    got = want.copy()
    got[1, 2] += 0.004
    labels = ("native", "framework")

    def decoded(outputs: dict[str, object]) -> dict[str, object]:
        return {k: decode(v) if isinstance(v, dict) else v for k, v in outputs.items()}

    def error(a: dict[str, object], b: dict[str, object]) -> float:
        return output_error(decoded(a), decoded(b), labels=labels)

    assert error({"y": encode(got)}, {"y": encode(want)}) == pytest.approx(0.004 / 4.0,
                                                                           rel=1e-3)
    # Arrays pass through as they are.
    assert error({"y": got}, {"y": encode(want)}) == pytest.approx(0.004 / 4.0, rel=1e-3)
    with pytest.raises(ValueError, match=r"no output in common: native \['y'\], framework"):
        error({"y": encode(got)}, {"z": encode(want)})
    with pytest.raises(ValueError, match=r"output 'y': native shape \(3, 4\), framework's"):
        error({"y": encode(got)}, {"y": encode(want.reshape(4, 3))})
