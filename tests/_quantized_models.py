"""float32 models as users quantize them with onnxruntime.quantization: an
MLP of MatMuls on a 3-D input (bias Add, ReLU), a CNN exported from torch
(Conv, ReLU, MaxPool, a residual Add, global pooling, Gemm) and a tiny
random BERT exported from transformers; random calibration data."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _support import int8_weight_bits

onnx = pytest.importorskip("onnx")
quantization = pytest.importorskip("onnxruntime.quantization")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from onnx.reference.op_run import OpRun  # noqa: E402

BERT_VOCAB = 100
BERT_SEQ = 8


def mlp(path: Path) -> dict[str, Any]:
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


def cnn(path: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation
        warnings.simplefilter("ignore")
        torch.onnx.export(_Cnn().eval(), torch.randn(2, 3, 16, 16), str(path), dynamo=False,
                          input_names=["x"], output_names=["y"], opset_version=17)
    return {"x": (2, 3, 16, 16)}


def bert(path: Path) -> dict[str, Any]:
    """BertModel(hidden 64, 2 layers, 4 heads, intermediate 128, vocab 100),
    seeded, exported for (1, 8) ids and mask; its last hidden state out."""
    from _transformers import _Encoder, transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, vocab_size=BERT_VOCAB)
    encoder = _Encoder(transformers.BertModel(config).eval()).eval()
    ids = torch.randint(0, BERT_VOCAB, (1, BERT_SEQ))
    mask = torch.ones(1, BERT_SEQ, dtype=torch.int64)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(encoder, (ids, mask), str(path), dynamo=False,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], opset_version=17)
    return {"input_ids": (1, BERT_SEQ), "attention_mask": (1, BERT_SEQ)}


def feeds(shapes: dict[str, Any], seed: int) -> dict[str, np.ndarray]:
    """Random inputs: ids in the vocabulary, a mask of ones, floats N(0, 1)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        if name == "input_ids":
            out[name] = rng.integers(0, BERT_VOCAB, shape).astype(np.int64)
        elif name == "attention_mask":
            out[name] = np.ones(shape, np.int64)
        else:
            out[name] = rng.standard_normal(shape).astype(np.float32)
    return out


class RandomData(quantization.CalibrationDataReader):  # type: ignore[misc]
    def __init__(self, shapes: dict[str, Any]) -> None:
        self.batches = iter([feeds(shapes, seed) for seed in range(1, 5)])

    def get_next(self) -> Any:
        return next(self.batches, None)


class GatherElements(OpRun):  # type: ignore[misc]
    """GatherElements as the standard says, under its op's name (the
    reference evaluator's own fails on BERT's (1, n) position table)."""

    def _run(self, data: Any, indices: Any, axis: int = 0) -> Any:
        axis %= data.ndim
        indices = np.where(indices < 0, indices + data.shape[axis], indices)
        return (np.take_along_axis(data, indices, axis),)


def reference_evaluator(path: Path) -> Any:
    """onnx's ReferenceEvaluator on the file, its default opset read as at
    least 19 (it implements QuantizeLinear / DequantizeLinear from 19 on,
    whose semantics for uint8 / int8 are those of 13)."""
    m = onnx.load(str(path))
    for op in m.opset_import:
        if op.domain in ("", "ai.onnx"):
            op.version = max(op.version, 19)
    return ReferenceEvaluator(m, new_ops=[GatherElements])


def quantized(tmp: Path, make: Any, per_channel: bool, activations: str,
              fmt: str = "QDQ") -> tuple[Path, dict[str, Any]]:
    """The float32 file ``make`` writes, quantised by quantize_static in
    format ``fmt`` (QDQ or QOperator) with int8 weights and ``activations``
    (uint8 or int8), calibrated on :class:`RandomData`; and its input shapes."""
    f32, q = tmp / "f32.onnx", tmp / f"{fmt.lower()}.onnx"
    shapes = make(f32)
    act = quantization.QuantType.QUInt8 if activations == "uint8" else \
        quantization.QuantType.QInt8
    quantization.quantize_static(str(f32), str(q), RandomData(shapes),
                                 quant_format=getattr(quantization.QuantFormat, fmt),
                                 per_channel=per_channel, activation_type=act,
                                 weight_type=quantization.QuantType.QInt8,
                                 reduce_range=int8_weight_bits() == 7)
    return q, shapes


def output_step(path: Path) -> float:
    """The scale of the DequantizeLinear that writes the graph's output."""
    m = onnx.load(str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    dq = next(n for n in m.graph.node if n.output[0] == m.graph.output[0].name)
    assert dq.op_type == "DequantizeLinear"
    return float(inits[dq.input[1]])


def in_steps(got: Any, want: Any, step: float) -> Any:
    """|got - want| in steps of the output's grid."""
    return np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)) / step
