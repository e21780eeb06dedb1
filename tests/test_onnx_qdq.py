"""QDQ files as onnxruntime.quantization.quantize_static writes them
(random calibration data) imported as int8 nodes: an MLP of MatMuls on a
3-D input and a small CNN exported from torch (Conv, ReLU, MaxPool, Add,
global pooling, Gemm), weights per tensor and per channel, uint8 and int8
activations. The native executor's output is within one quantisation step
of the output (its DequantizeLinear's scale) of onnx's ReferenceEvaluator
on the same file, everywhere but a few elements (a tie of the float32 sums
rounded the other way may move one earlier value by a step); ONNX Runtime,
whose kernels sum in int32 and requantise in their own order, within two
steps. Weights are int8 once, at import; bad files are refused naming the
node."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _support import outputs_per_setting

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from pyparbench.frameworks.overhead import heavy_op_graphs  # noqa: E402
from pyparbench.graph import from_onnx  # noqa: E402
from pyparbench.reference import reference_forward  # noqa: E402

# How far from ONNX's reference evaluator an element may be, in steps of the
# output's grid; and the share of elements that may be that far at all.
REFERENCE_STEPS = 1
# ORT's int8 kernels accumulate in int32 and requantise each op in their own
# float order (the reference evaluator dequantises and sums in float32):
# values on a tie between two steps may land on either, and a step moved
# early passes on, at most this many steps at the output.
ORT_STEPS = 2


def _mlp(path: Path) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32),
                                     name) for name, s in (("w1", (16, 32)), ("w2", (32, 10)))]
    inits.append(numpy_helper.from_array(rng.standard_normal(32).astype(np.float32) * 0.1, "b1"))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu1"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                       [2, 5, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 10])],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return {"x": (2, 5, 16)}


class _Cnn(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x: Any) -> Any:
        y = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        y = torch.relu(y + self.c2(y))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


def _cnn(path: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation
        warnings.simplefilter("ignore")
        torch.onnx.export(_Cnn().eval(), torch.randn(2, 3, 16, 16), str(path), dynamo=False,
                          input_names=["x"], output_names=["y"], opset_version=17)
    return {"x": (2, 3, 16, 16)}


class _Random(quantization.CalibrationDataReader):  # type: ignore[misc]
    def __init__(self, shapes: dict[str, Any]) -> None:
        rng = np.random.default_rng(1)
        self.feeds = iter([{k: rng.standard_normal(s).astype(np.float32)
                            for k, s in shapes.items()} for _ in range(4)])

    def get_next(self) -> Any:
        return next(self.feeds, None)


def _quantized(tmp: Path, make: Any, per_channel: bool, activations: str) -> tuple[Path, Any]:
    f32, q = tmp / "f32.onnx", tmp / "int8.onnx"
    shapes = make(f32)
    act = quantization.QuantType.QUInt8 if activations == "uint8" else \
        quantization.QuantType.QInt8
    quantization.quantize_static(str(f32), str(q), _Random(shapes),
                                 quant_format=quantization.QuantFormat.QDQ,
                                 per_channel=per_channel, activation_type=act,
                                 weight_type=quantization.QuantType.QInt8)
    return q, shapes


def _evaluator(path: Path) -> Any:
    """onnx's ReferenceEvaluator on the file; it implements QuantizeLinear /
    DequantizeLinear from opset 19 on, whose semantics for uint8 / int8 are
    those of 13 (the new attributes are for float8), so the opset is read
    as 19."""
    m = onnx.load(str(path))
    for op in m.opset_import:
        if op.domain in ("", "ai.onnx"):
            op.version = max(op.version, 19)
    return ReferenceEvaluator(m)


def _output_step(path: Path) -> float:
    """The scale of the DequantizeLinear that writes the graph's output."""
    m = onnx.load(str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    dq = next(n for n in m.graph.node if n.output[0] == m.graph.output[0].name)
    assert dq.op_type == "DequantizeLinear"
    return float(inits[dq.input[1]])


def _in_steps(got: Any, want: Any, step: float) -> Any:
    return np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)) / step


@pytest.mark.parametrize("make", [_mlp, _cnn], ids=["mlp", "cnn"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("activations", ["uint8", "int8"])
def test_a_qdq_file_runs_at_int8_as_its_semantics_say(tmp_path: Path, make: Any,
                                                       per_channel: bool,
                                                       activations: str) -> None:
    path, shapes = _quantized(tmp_path, make, per_channel, activations)
    graph = from_onnx(path)
    ops = [n.op for n in graph.nodes]
    assert ops.count("quantized_linear") + ops.count("quantized_conv2d") == \
        (2 if make is _mlp else 3), ops
    assert not {"linear", "conv2d", "matmul"} & set(ops), ops
    # Values on their grid already (a requantised output, its max pool, a
    # Flatten of a rounded value) or read by int8 nodes alone are not rounded
    # again: in the CNN only the residual Add's and the global pool's are; in
    # the MLP none (the first product is requantised, the bias Add's output
    # read by the second product alone).
    assert ops.count("fake_quantize") == (0 if make is _mlp else 2), ops
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shapes["x"]).astype(np.float32)
    want = _evaluator(path).run(None, {"x": x})[0]
    ort_y = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    step = _output_step(path)
    # The graph's own float64 reference is the file's semantics too.
    ref = reference_forward(graph, {"x": x})["y"]
    assert np.max(_in_steps(ref, want, step)) <= REFERENCE_STEPS + 1e-3
    for settings, got in outputs_per_setting(graph, {"x": x}, "y"):
        assert got.shape == want.shape
        off = _in_steps(got, want, step)
        assert np.max(off) <= REFERENCE_STEPS + 1e-3, (settings.intra_op, float(np.max(off)))
        assert np.mean(off > 1e-3) <= 0.05, (settings.intra_op, float(np.mean(off > 1e-3)))
        assert np.max(_in_steps(got, ort_y, step)) <= ORT_STEPS + 1e-3, settings.intra_op


def test_the_int8_weights_are_the_files_own(tmp_path: Path) -> None:
    path, _ = _quantized(tmp_path, _cnn, True, "uint8")
    m = onnx.load(str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    graph = from_onnx(path)
    conv = next(n for n in graph.nodes if n.op == "quantized_conv2d")
    np.testing.assert_array_equal(conv.params["weight"], inits["c1.weight_quantized"])
    np.testing.assert_array_equal(conv.params["weight_scale"], inits["c1.weight_scale"])
    # The first conv's output is requantised onto the grid the file gives it.
    assert conv.attrs["out_dtype"] == "uint8"
    # Operator scaling in the frameworks has no one-op graph of an int8 node:
    # refused by name (the file itself runs in ONNX Runtime and OpenVINO).
    with pytest.raises(ValueError, match=f"node '{conv.name}' \\(quantized_conv2d\\)"):
        heavy_op_graphs(graph)


def _one_conv_qdq(path: Path, weight_zero_point: int, op: str = "Conv") -> None:
    """x -> Q -> DQ -> op(DQ(int8 weight)) -> Q -> DQ, written by hand."""
    rng = np.random.default_rng(3)
    w = rng.integers(-100, 100, (4, 3, 3, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(128, np.uint8), "z"),
             numpy_helper.from_array(w, "wq"),
             numpy_helper.from_array(np.array(0.01, np.float32), "ws"),
             numpy_helper.from_array(np.array(weight_zero_point, np.int8), "wz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="quant_x"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dequant_x"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], name="dequant_w")]
    if op == "Conv":
        nodes.append(helper.make_node("Conv", ["xd", "w"], ["c"], name="the_conv",
                                      pads=[1, 1, 1, 1]))
    else:
        nodes.append(helper.make_node(op, ["xd"], ["c"], name="the_odd_op"))
    nodes += [helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"], name="quant_c"),
              helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"], name="dequant_c")]
    out_shape = [1, 4, 6, 6] if op == "Conv" else [1, 3, 6, 6]
    g = helper.make_graph(nodes, "one", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                       [1, 3, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_a_nonzero_weight_zero_point_is_refused_naming_the_node(tmp_path: Path) -> None:
    ok, bad = tmp_path / "ok.onnx", tmp_path / "bad.onnx"
    _one_conv_qdq(ok, 0)
    graph = from_onnx(ok)
    assert [n.op for n in graph.nodes] == ["input", "quantized_conv2d"]
    _one_conv_qdq(bad, 3)
    with pytest.raises(ValueError, match=r"Conv x1 \(node 'the_conv': Conv's weight 'wq' has "
                                         r"a nonzero weight zero point"):
        from_onnx(bad)


def test_a_qdq_around_an_op_not_supported_is_refused_naming_the_node(tmp_path: Path) -> None:
    path = tmp_path / "odd.onnx"
    _one_conv_qdq(path, 0, op="Softplus")
    with pytest.raises(ValueError, match=r"unsupported ONNX ops: Softplus x1 \(node "
                                         r"'the_odd_op'\)"):
        from_onnx(path)


def test_an_integer_value_read_other_than_by_dequantize_linear_is_refused(
        tmp_path: Path) -> None:
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="quant_x"),
             helper.make_node("Cast", ["xq"], ["y"], name="to_float", to=TensorProto.FLOAT)]
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(128, np.uint8), "z")]
    g = helper.make_graph(nodes, "cast", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                        [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
    path = tmp_path / "cast.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(ValueError, match=r"QuantizeLinear x1 \(node 'quant_x': its integer "
                                         r"output is read by Cast 'to_float'"):
        from_onnx(path)
