"""Files of onnxruntime.quantization.quantize_dynamic (int8 and uint8
weights, per tensor and per output channel) imported as
dynamic_quantized_linear / dynamic_quantized_conv2d nodes: an MLP of
MatMuls, a CNN exported from torch (ConvInteger, MatMulInteger) and a tiny
BERT exported from transformers (12 MatMulInteger).

The bound. A product's output is y = s · w_s · Σ_k (q_k - z)(w_k - w_z) + b,
q = round(x / s) + z on the run's own grid s = (max(0, max x) - min(0,
min x)) / 255. The native node sums exactly and scales in the file's
float32 order, so on the same x it is the file's value up to float32
rounding. Its x, though, comes from float kernels that round otherwise
than numpy's or ONNX Runtime's (and ORT's own quantisation multiplies by
1 / s): an element of x on a tie between two steps may round to the
other, moving the sum by |w_k - w_z| <= 255 for one product, one unit of
s · w_s each. The output's bound is therefore stated in units of the last
product's STEP = s · max w_s · max |w - w_z|: the native result is within
REFERENCE_STEPS of onnx's ReferenceEvaluator (which implements
DynamicQuantizeLinear, MatMulInteger and ConvInteger) and within ORT_STEPS
of ONNX Runtime, at 1 and 2 threads. For BERT, whose output is a
LayerNorm's (unit scale), the bound is on the output's scale directly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _quantized_models import bert, cnn, feeds, mlp, reference_evaluator
from _support import int8_weight_bits, outputs_per_setting

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pyparbench.graph import from_onnx  # noqa: E402
from pyparbench.reference import dynamic_grid, reference_forward  # noqa: E402

# In units of the last product's STEP (the module's docstring derives it):
# one of its input's elements may round to the other side of a tie; ORT,
# which quantises by a multiplication, two. (Measured: 0 on these files,
# the integer sums and the scaling agree to the bit.)
REFERENCE_STEPS = 1
ORT_STEPS = 2
# BERT's output (a LayerNorm's, of unit scale): at most this far from the
# reference, and from ORT, in absolute terms (a flipped rounding in an early
# product reaches it through the attention and the later products; measured:
# 1e-6, float32 rounding alone).
BERT_BOUND = 0.01


def _quantized(tmp: Path, make: Any, weights: str, per_channel: bool
               ) -> tuple[Path, dict[str, Any]]:
    f32, q = tmp / "f32.onnx", tmp / "dynamic.onnx"
    shapes = make(f32)
    wt = quantization.QuantType.QInt8 if weights == "int8" else quantization.QuantType.QUInt8
    quantization.quantize_dynamic(str(f32), str(q), weight_type=wt, per_channel=per_channel,
                                  reduce_range=int8_weight_bits() == 7)
    return q, shapes


def _last_step(graph: Any, x: dict[str, np.ndarray]) -> float:
    """STEP of the graph's last node, a dynamically quantized product: the
    grid of its input on ``x`` (from the graph's own reference) times its
    largest weight scale and weight."""
    last = graph.nodes[-1]
    assert last.op.startswith("dynamic_quantized"), last.op
    values = reference_forward(graph, x, return_all=True)
    scale, _ = dynamic_grid(values[graph.nodes[last.inputs[0]].name])
    w = np.abs(last.params["weight"] - last.params["weight_zero_point"].reshape(
        (-1,) + (1,) * (last.params["weight"].ndim - 1)))
    return scale * float(np.max(last.params["weight_scale"])) * float(np.max(w))


def _in(got: Any, want: Any, unit: float) -> float:
    return float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)))
                 / unit)


@pytest.mark.parametrize("make", [mlp, cnn], ids=["mlp", "cnn"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("weights", ["int8", "uint8"])
def test_a_dynamically_quantized_file_runs_as_its_semantics_say(
        tmp_path: Path, make: Any, per_channel: bool, weights: str) -> None:
    path, shapes = _quantized(tmp_path, make, weights, per_channel)
    graph = from_onnx(path)
    ops = [n.op for n in graph.nodes]
    want_ops = {"dynamic_quantized_linear": 2} if make is mlp else \
        {"dynamic_quantized_conv2d": 2, "dynamic_quantized_linear": 1}
    assert {op: ops.count(op) for op in want_ops} == want_ops, ops
    assert not {"linear", "conv2d", "matmul", "quantized_linear"} & set(ops), ops
    x = feeds(shapes, 7)
    want = reference_evaluator(path).run(None, x)[0]
    ort_y = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, x)[0]
    step = _last_step(graph, x)
    assert _in(reference_forward(graph, x)["y"], want, step) <= REFERENCE_STEPS
    for settings, got in outputs_per_setting(graph, x, "y"):
        assert got.shape == want.shape
        assert _in(got, want, step) <= REFERENCE_STEPS, settings.intra_op
        assert _in(got, ort_y, step) <= ORT_STEPS, settings.intra_op


def test_the_dynamically_quantized_bert_runs_as_onnx_runtime_does(tmp_path: Path) -> None:
    path, shapes = _quantized(tmp_path, bert, "int8", False)
    graph = from_onnx(path)
    ops = [n.op for n in graph.nodes]
    # Every projection and feed-forward product of both layers; the
    # attention's own products (q kᵀ, weights · v) stay float, as
    # quantize_dynamic leaves them; the embedding tables are float32 again.
    assert ops.count("dynamic_quantized_linear") == 12, ops
    assert ops.count("matmul") == 4 and "linear" not in ops, ops
    assert ops.count("embedding_bag") == 3, ops
    x = feeds(shapes, 7)
    want = reference_evaluator(path).run(None, x)[0]
    ort_y = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, x)[0]
    for settings, got in outputs_per_setting(graph, x, "last_hidden_state"):
        assert _in(got, want, 1.0) <= BERT_BOUND, settings.intra_op
        assert _in(got, ort_y, 1.0) <= BERT_BOUND, settings.intra_op


def test_the_weights_and_zero_points_are_the_files_own(tmp_path: Path) -> None:
    path, _ = _quantized(tmp_path, mlp, "uint8", True)
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    first = next(n for n in from_onnx(path).nodes if n.op == "dynamic_quantized_linear")
    np.testing.assert_array_equal(first.params["weight"], inits["w1_quantized"].T)
    np.testing.assert_array_equal(first.params["weight_zero_point"], inits["w1_zero_point"])
    np.testing.assert_array_equal(first.params["weight_scale"], inits["w1_scale"])
    np.testing.assert_array_equal(first.params["bias"], inits["b1"])


def test_an_input_of_zeros_gives_the_bias(tmp_path: Path) -> None:
    """Scale 0 (max = min = 0): ONNX's grid divides by it; every quantised
    value is the zero point 0, every sum 0, the output the bias."""
    path, shapes = _quantized(tmp_path, mlp, "int8", False)
    graph = from_onnx(path)
    x = {"x": np.zeros(shapes["x"], np.float32)}
    ort_y = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, x)[0]
    for _, got in outputs_per_setting(graph, x, "y"):
        np.testing.assert_allclose(got, ort_y, atol=1e-6)


def test_a_chain_that_is_not_quantize_dynamic_s_is_refused_naming_its_op(
        tmp_path: Path) -> None:
    """A MatMulInteger whose integer sum is read other than by the Cast the
    fused chain has stays itself, and is refused by name."""
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"], name="dql"),
             helper.make_node("MatMulInteger", ["q", "w", "z", "wz"], ["acc"], name="the_sum"),
             helper.make_node("Cast", ["acc"], ["y"], name="cast", to=TensorProto.FLOAT)]
    inits = [numpy_helper.from_array(np.eye(3, dtype=np.int8), "w"),
             numpy_helper.from_array(np.array(0, np.int8), "wz")]
    g = helper.make_graph(nodes, "odd", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                       [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
    path = tmp_path / "odd.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(ValueError, match=r"unsupported ONNX ops: .*MatMulInteger x1 \(node "
                                         r"'the_sum'"):
        from_onnx(path)
