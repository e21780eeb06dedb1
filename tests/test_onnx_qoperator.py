"""QOperator files as onnxruntime.quantization.quantize_static writes them
(QuantFormat.QOperator, random calibration data) imported onto the int8
nodes: QLinearConv / QLinearMatMul / QGemm as quantized_conv2d /
quantized_linear requantised onto their output grid, the com.microsoft
glue ops (QLinearAdd, QLinearGlobalAveragePool) as their float op then a
fake_quantize onto the output grid, MaxPool and Flatten of an integer value
as the float op on the same grid. The native executor is within
REFERENCE_STEPS of the output grid of onnx's ReferenceEvaluator (on a file
of standard ops alone, which it runs) and within ORT_STEPS of ONNX
Runtime, which runs every file's own ops, at 1 and 2 threads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _quantized_models import (cnn, feeds, in_steps, mlp, output_step,
                               quantized, reference_evaluator)
from _support import outputs_per_setting, skip_where_signed_int8_conv_is_refused

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pyparbench.graph import from_onnx  # noqa: E402
from pyparbench.reference import reference_forward  # noqa: E402

# How far from the reference evaluator and from ONNX Runtime an element may
# be, in steps of the output's grid: each dequantises, computes and
# requantises each op in float32 in its own order (ORT's int8 kernels sum
# in int32 and requantise by their own multiplier); a value on a tie between
# two steps may land on either, and a step moved early passes on.
REFERENCE_STEPS = 1
ORT_STEPS = 2
# The share of elements that may differ at all.
OFF_SHARE = 0.05


def _plain_mlp(path: Path) -> dict[str, Any]:
    """MatMul -> ReLU -> MatMul, no bias: a QOperator file of standard ops
    alone (QuantizeLinear, QLinearMatMul, DequantizeLinear), which onnx's
    reference evaluator runs."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array((rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32),
                                     name) for name, s in (("w1", (16, 24)), ("w2", (24, 6)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu1"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")]
    g = helper.make_graph(nodes, "plain", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [3, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 6])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return {"x": (3, 16)}


def _ops(path: Path) -> set[str]:
    return {(f"{n.domain}." if n.domain else "") + n.op_type
            for n in onnx.load(str(path)).graph.node}


@pytest.mark.parametrize("make", [_plain_mlp, mlp, cnn], ids=["plain_mlp", "mlp", "cnn"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("activations", ["uint8", "int8"])
def test_a_qoperator_file_runs_at_int8_as_onnx_runtime_does(tmp_path: Path, make: Any,
                                                             per_channel: bool,
                                                             activations: str) -> None:
    skip_where_signed_int8_conv_is_refused(activations)
    path, shapes = quantized(tmp_path, make, per_channel, activations, "QOperator")
    written = _ops(path)
    graph = from_onnx(path)
    ops = [n.op for n in graph.nodes]
    assert ops.count("quantized_linear") + ops.count("quantized_conv2d") == \
        (3 if make is cnn else 2), ops
    assert not {"linear", "conv2d", "matmul"} & set(ops), ops
    if make is cnn:  # the glue ops ORT writes for it: each a float op, then rounded
        assert {"com.microsoft.QLinearAdd", "com.microsoft.QLinearGlobalAveragePool",
                "com.microsoft.QGemm", "QLinearConv", "MaxPool"} <= written, written
        assert ops.count("fake_quantize") == 2 and "add" in ops and "pool2d" in ops, ops
    x = feeds(shapes, 7)
    ort_y = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, x)[0]
    step = output_step(path)
    name = onnx.load(str(path)).graph.output[0].name
    wants = [(ort_y, ORT_STEPS)]
    if make is _plain_mlp:  # standard ops alone: the reference evaluator runs it too
        assert written == {"QuantizeLinear", "QLinearMatMul", "DequantizeLinear"}, written
        wants.append((reference_evaluator(path).run(None, x)[0], REFERENCE_STEPS))
    # The graph's own float64 reference is the file's semantics too.
    ref = reference_forward(graph, x)[name]
    assert np.max(in_steps(ref, ort_y, step)) <= ORT_STEPS + 1e-3
    for settings, got in outputs_per_setting(graph, x, name):
        for want, steps in wants:
            assert got.shape == want.shape
            off = in_steps(got, want, step)
            assert np.max(off) <= steps + 1e-3, (settings.intra_op, float(np.max(off)))
            assert np.mean(off > 1e-3) <= OFF_SHARE, (settings.intra_op,
                                                      float(np.mean(off > 1e-3)))


def test_the_int8_weights_and_bias_are_the_files_own(tmp_path: Path) -> None:
    path, _ = quantized(tmp_path, cnn, True, "uint8", "QOperator")
    m = onnx.load(str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    conv = next(n for n in from_onnx(path).nodes if n.op == "quantized_conv2d")
    np.testing.assert_array_equal(conv.params["weight"], inits["c1.weight_quantized"])
    np.testing.assert_array_equal(conv.params["weight_scale"], inits["c1.weight_scale"])
    # The int32 bias on the products' scale, x_scale · w_scale.
    want = inits["c1.bias_quantized"] * np.float64(inits["x_scale"]) * \
        inits["c1.weight_scale"].astype(np.float64)
    np.testing.assert_allclose(conv.params["bias"], want, rtol=1e-6)
    assert conv.attrs["out_dtype"] == "uint8"


def _qoperator_file(path: Path, nodes: list[Any], inits: list[Any], domain: bool) -> None:
    g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.microsoft", 1)]
                                              if domain else [])
    onnx.save(helper.make_model(g, opset_imports=opsets), str(path))


_GRID = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
         numpy_helper.from_array(np.array(128, np.uint8), "z")]


def test_an_integer_value_read_by_a_float_op_is_refused_naming_the_node(
        tmp_path: Path) -> None:
    # Relu of the uint8 values themselves: not of their real values.
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="quant_x"),
             helper.make_node("QLinearMatMul", ["xq", "s", "z", "w", "s", "z8", "s", "z"],
                              ["mq"], name="the_product"),
             helper.make_node("Relu", ["mq"], ["rq"], name="relu_of_integers"),
             helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["y"], name="dequant")]
    inits = [*_GRID, numpy_helper.from_array(np.eye(3, dtype=np.int8), "w"),
             numpy_helper.from_array(np.array(0, np.int8), "z8")]
    path = tmp_path / "relu.onnx"
    _qoperator_file(path, nodes, inits, False)
    with pytest.raises(ValueError, match=r"Relu x1 \(node 'relu_of_integers': it reads the "
                                         r"integer value 'mq'"):
        from_onnx(path)


def test_a_grid_other_than_the_writers_is_refused(tmp_path: Path) -> None:
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="quant_x"),
             helper.make_node("DequantizeLinear", ["xq", "s2", "z"], ["y"], name="other_grid")]
    inits = [*_GRID, numpy_helper.from_array(np.array(0.1, np.float32), "s2")]
    # Read by a DequantizeLinear alone, QuantizeLinear -> DequantizeLinear is a
    # QDQ pair: its grids must agree.
    path = tmp_path / "grid.onnx"
    _qoperator_file(path, nodes, inits, False)
    with pytest.raises(ValueError, match=r"DequantizeLinear x1 \(node 'other_grid'"):
        from_onnx(path)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="quant_x"),
             helper.make_node("QLinearAdd", ["xq", "s2", "z", "xq", "s", "z", "s", "z"], ["aq"],
                              name="add_on_another_grid", domain="com.microsoft"),
             helper.make_node("DequantizeLinear", ["aq", "s", "z"], ["y"], name="dequant")]
    _qoperator_file(path, nodes, inits, True)
    with pytest.raises(ValueError, match=r"QLinearAdd x1 \(node 'add_on_another_grid': "
                                         r".*'xq' is read on grid"):
        from_onnx(path)


def test_a_product_of_two_computed_integer_values_is_their_float_product(
        tmp_path: Path) -> None:
    """x · xᵀ on x's grid (a Transpose moves the integer value): the float
    MatMul of the real values, rounded onto the output grid, as ORT's
    QLinearMatMul gives it."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="quant_x"),
             helper.make_node("Transpose", ["xq"], ["xt"], name="turn", perm=[1, 0]),
             helper.make_node("QLinearMatMul", ["xq", "s", "z", "xt", "s", "z", "so", "z"],
                              ["pq"], name="gram"),
             helper.make_node("DequantizeLinear", ["pq", "so", "z"], ["y"], name="dequant")]
    inits = [*_GRID, numpy_helper.from_array(np.array(0.02, np.float32), "so")]
    g = helper.make_graph(nodes, "gram", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                        [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])], inits)
    path = tmp_path / "gram.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    graph = from_onnx(path)
    assert [n.op for n in graph.nodes] == ["input", "fake_quantize", "transpose", "matmul",
                                           "fake_quantize"]
    x = {"x": np.random.default_rng(4).uniform(-1.5, 1.5, (2, 3)).astype(np.float32)}
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, x)[0]
    ref = reference_evaluator(path).run(None, x)[0]
    for settings, got in outputs_per_setting(graph, x, "y"):
        assert np.max(in_steps(got, ref, 0.02)) <= REFERENCE_STEPS + 1e-3, settings.intra_op
        assert np.max(in_steps(got, want, 0.02)) <= ORT_STEPS + 1e-3, settings.intra_op
