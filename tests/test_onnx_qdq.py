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

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _quantized_models import (cnn, in_steps, mlp, output_step, quantized,
                               reference_evaluator)
from _support import outputs_per_setting, skip_where_signed_int8_conv_is_refused

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

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


@pytest.mark.parametrize("make", [mlp, cnn], ids=["mlp", "cnn"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("activations", ["uint8", "int8"])
def test_a_qdq_file_runs_at_int8_as_its_semantics_say(tmp_path: Path, make: Any,
                                                       per_channel: bool,
                                                       activations: str) -> None:
    skip_where_signed_int8_conv_is_refused(activations)
    path, shapes = quantized(tmp_path, make, per_channel, activations)
    graph = from_onnx(path)
    ops = [n.op for n in graph.nodes]
    assert ops.count("quantized_linear") + ops.count("quantized_conv2d") == \
        (2 if make is mlp else 3), ops
    assert not {"linear", "conv2d", "matmul"} & set(ops), ops
    # Values on their grid already (a requantised output, its max pool, a
    # Flatten of a rounded value) or read by int8 nodes alone are not rounded
    # again: in the CNN only the residual Add's and the global pool's are; in
    # the MLP none (the first product is requantised, the bias Add's output
    # read by the second product alone).
    assert ops.count("fake_quantize") == (0 if make is mlp else 2), ops
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shapes["x"]).astype(np.float32)
    want = reference_evaluator(path).run(None, {"x": x})[0]
    ort_y = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    step = output_step(path)
    # The graph's own float64 reference is the file's semantics too.
    ref = reference_forward(graph, {"x": x})["y"]
    assert np.max(in_steps(ref, want, step)) <= REFERENCE_STEPS + 1e-3
    for settings, got in outputs_per_setting(graph, {"x": x}, "y"):
        assert got.shape == want.shape
        off = in_steps(got, want, step)
        assert np.max(off) <= REFERENCE_STEPS + 1e-3, (settings.intra_op, float(np.max(off)))
        assert np.mean(off > 1e-3) <= 0.05, (settings.intra_op, float(np.mean(off > 1e-3)))
        assert np.max(in_steps(got, ort_y, step)) <= ORT_STEPS + 1e-3, settings.intra_op


def test_the_int8_weights_are_the_files_own(tmp_path: Path) -> None:
    path, _ = quantized(tmp_path, cnn, True, "uint8")
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
