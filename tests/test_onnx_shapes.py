"""An ONNX file whose inputs have symbolic dimensions besides the batch (a
sequence length, a decoder's past) imports at sizes given by name
(``from_onnx(path, shapes=...)``, ``--shape NAME=SIZE``), and the sizes
become part of the file's model name, so that children rebuild the same
graph and two sizes are two models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from _support import cli_main  # noqa: E402
from pyparbench.executor import compile_graph  # noqa: E402
from pyparbench.frameworks import ModelRef, run_framework  # noqa: E402
from pyparbench.graph import from_onnx  # noqa: E402
from pyparbench.models import build, files, resolve  # noqa: E402
from pyparbench.reference import output_error  # noqa: E402


def symbolic_file(path: Path) -> Path:
    """y = the past p followed by relu(x @ W), as a decoder's cache grows:
    x (batch, seq, 8), p (batch, past_len, 6), y (batch, past_len + seq, 6);
    seq and past_len symbolic."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Concat", ["p", "r"], ["y"], axis=1)]
    graph = helper.make_graph(
        nodes, "symbolic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8]),
         helper.make_tensor_value_info("p", TensorProto.FLOAT, ["batch", "past_len", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "total", 6])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))
    return path


def _matches_ort(path: Path, graph: object) -> float:
    from pyparbench.graph import Graph

    assert isinstance(graph, Graph)
    ins = graph.random_inputs(seed=2)
    shapes = graph.meta["onnx_input_shapes"]
    want = ort.InferenceSession(str(path)).run(
        None, {k: v.reshape(shapes[k]) for k, v in ins.items()})[0]
    cg = compile_graph(graph)
    cg.set_inputs(ins)
    cg.run(repeats=1)
    (got,) = cg.outputs().values()
    return output_error({"y": got.reshape(want.shape)}, {"y": want})


def test_symbolic_dimensions_are_sized_by_name(tmp_path: Path) -> None:
    path = symbolic_file(tmp_path / "sym.onnx")
    # Unsized: refused, naming the dimension, how to size it and every one the file has.
    with pytest.raises(ValueError, match=r"symbolic dimension 'seq' at axis 1: give its size "
                       r"with shapes=\{'seq': N\} \(--shape seq=N\); the file's symbolic "
                       r"dimensions: past_len, seq"):
        from_onnx(path)
    g = from_onnx(path, batch=2, shapes={"seq": 5, "past_len": 3})
    assert g.meta["onnx_input_shapes"] == {"x": [2, 5, 8], "p": [2, 3, 6]}
    assert {g.nodes[i].name: g.nodes[i].shape for i in g.inputs} == {"x": (2, 5, 8),
                                                                       "p": (2, 3, 6)}
    assert g.meta["symbolic"] == {"past_len": 3, "seq": 5}
    assert _matches_ort(path, g) <= 1e-6
    # Another size is another graph, and still ONNX Runtime's.
    g7 = from_onnx(path, shapes={"seq": 7, "past_len": 1})
    assert g7.meta["onnx_input_shapes"]["x"] == [1, 7, 8] and _matches_ort(path, g7) <= 1e-6
    # A name the file does not have, a bad size or name: refused, naming it.
    with pytest.raises(ValueError, match=r"shapes names 'sequence', which no input has past "
                       r"its batch axis \(the file's symbolic dimensions: past_len, seq\)"):
        from_onnx(path, shapes={"seq": 5, "past_len": 3, "sequence": 2})
    with pytest.raises(ValueError, match=r"dimension 'seq' must be an int >= 1, got 0"):
        from_onnx(path, shapes={"seq": 0, "past_len": 3})
    with pytest.raises(ValueError, match=r"without ':', ',', '=' or spaces, got 'se:q'"):
        from_onnx(path, shapes={"se:q": 1})
    with pytest.raises(ValueError, match=r"shapes must map dimension names to sizes"):
        from_onnx(path, shapes=[("seq", 1)])  # type: ignore[arg-type]


def test_the_sizes_are_part_of_the_files_model_name(tmp_path: Path) -> None:
    path = symbolic_file(tmp_path / "sym.onnx")
    name = resolve(str(path), {"seq": 5, "past_len": 3})
    base = files.file_name(path)
    assert name == f"{base}:past_len=3,seq=5"
    assert files.is_file_key(name) and files.shapes_of(name) == {"past_len": 3, "seq": 5}
    assert files.file_path(name) == path.resolve()
    other = resolve(str(path), {"seq": 9, "past_len": 3})
    assert other != name and files.shapes_of(other)["seq"] == 9
    # A registered name takes further sizes.
    assert resolve(name, {"seq": 2}) == f"{base}:past_len=3,seq=2"
    g = build(name, 2)
    assert g.name == name and g.meta["onnx_input_shapes"] == {"x": [2, 5, 8], "p": [2, 3, 6]}
    for bad in (f"{base}:seq", f"{base}:seq=0", f"{base}:seq=1,seq=2", f"{base}:seq=x"):
        assert not files.is_file_key(bad), bad
    with pytest.raises(ValueError, match="symbolic dimension 'past_len'"):
        resolve(str(path), {"seq": 5})
    # A child rebuilds the graph at the name's sizes: ONNX Runtime runs the
    # file at them, and the native executor agrees.
    ort_run = run_framework(ModelRef(name, 2), "onnxruntime", repeats=1, outputs=True)
    native = run_framework(ModelRef(name, 2), "native", repeats=1, outputs=True)
    assert ort_run.ok and native.ok, (ort_run.error, native.error)
    assert ort_run.job.outputs()["y"].shape == (2, 8, 6)
    assert output_error(native.job.outputs(), ort_run.job.outputs()) <= 1e-6


def test_shape_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(symbolic_file(tmp_path / "sym.onnx"))
    code, out, err = cli_main(capsys, "trace", path, "--shape", "seq=4",
                              "--shape", "past_len=2", "--repeats", "1",
                              "-o", str(tmp_path / "trace.json"))
    assert code == 0, out + err
    code, out, err = cli_main(capsys, "trace", path, "--repeats", "1")
    assert code == 2 and "--shape seq=N" in err and "Traceback" not in err, err
    code, out, err = cli_main(capsys, "trace", "mlp-512", "--shape", "seq=4")
    assert code == 2 and "'mlp-512' is a built-in model" in err, err
    code, out, err = cli_main(capsys, "trace", path, "--shape", "seq")
    assert code == 2 and "--shape takes NAME=SIZE" in err, err
    code, out, err = cli_main(capsys, "trace", path, "--shape", "seq=4", "--shape", "seq=5")
    assert code == 2 and "--shape seq given twice: 4 and 5" in err, err
    code, out, err = cli_main(capsys, "models", "--describe", path, "--shape", "seq=4",
                              "--shape", "past_len=2", "--json")
    assert code == 0, err
    assert '"symbolic": {\n    "past_len": 2,\n    "seq": 4\n  }' in out
    code, out, err = cli_main(capsys, "run", "--quick", "--models", "mlp-512", "--shape",
                              "seq=4", "--dry-run")
    assert code == 2 and "no file is among the models (mlp-512)" in err, err
