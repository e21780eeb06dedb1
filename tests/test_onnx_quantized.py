"""A quantized ONNX file with an op the importer does not map, made as
users make one, is refused in one line that says it is quantized and names
those ops, not by its first int8 tensor: a QOperator file of a LeakyReLU
(com.microsoft QLinearLeakyRelu), and a dynamically quantized BERT as ONNX
Runtime's graph optimisation saves it (com.microsoft MatMulIntegerToFloat).
The files of the formats themselves import: QDQ (tests/test_onnx_qdq.py),
QOperator (tests/test_onnx_qoperator.py), dynamic quantization
(tests/test_onnx_dynamic_quant.py); so does the optimised model's other
fused product, DynamicQuantizeMatMul."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _quantized_models import RandomData, bert, mlp
from _support import int8_weight_bits, outputs_per_setting

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")
torch = pytest.importorskip("torch")

from pyparbench.graph import from_onnx  # noqa: E402


class _LeakyConv(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x: Any) -> Any:
        return torch.nn.functional.leaky_relu(self.conv(x), 0.1)


def _leaky(path: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_LeakyConv().eval(), torch.randn(1, 3, 8, 8), str(path), dynamo=False,
                          input_names=["x"], output_names=["y"], opset_version=17)
    return {"x": (1, 3, 8, 8)}


def _optimised(f32: Path, out: Path) -> Path:
    """quantize_dynamic's file as ONNX Runtime's extended graph optimisation
    saves it (its fused contrib ops)."""
    q = f32.with_name("dynamic.onnx")
    quantization.quantize_dynamic(str(f32), str(q), reduce_range=int8_weight_bits() == 7)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(out)
    ort.InferenceSession(str(q), options, providers=["CPUExecutionProvider"])
    return out


def test_a_qoperator_file_with_an_op_not_mapped_is_refused_naming_it(tmp_path: Path) -> None:
    f32, q = tmp_path / "f32.onnx", tmp_path / "int8.onnx"
    shapes = _leaky(f32)
    quantization.quantize_static(str(f32), str(q), RandomData(shapes),
                                 quant_format=quantization.QuantFormat.QOperator)
    with pytest.raises(ValueError, match=r"int8\.onnx.*: a quantized model \(QLinearLeakyRelu "
                                         r"x1\): these ONNX Runtime quantized ops are not "
                                         r"imported; import the float32 model"):
        from_onnx(q)


def test_an_optimised_dynamic_bert_is_refused_naming_its_fused_ops(tmp_path: Path) -> None:
    f32 = tmp_path / "f32.onnx"
    bert(f32)
    path = _optimised(f32, tmp_path / "optimised.onnx")
    with pytest.raises(ValueError, match=r"a quantized model \(MatMulIntegerToFloat x\d+\)"):
        from_onnx(path)


def test_an_optimised_dynamic_mlp_imports_its_fused_products(tmp_path: Path) -> None:
    f32 = tmp_path / "f32.onnx"
    shapes = mlp(f32)
    path = _optimised(f32, tmp_path / "optimised.onnx")
    written = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert written.count("DynamicQuantizeMatMul") == 2, written
    graph = from_onnx(path)
    assert [n.op for n in graph.nodes].count("dynamic_quantized_linear") == 2
    x = np.random.default_rng(3).standard_normal(shapes["x"]).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    # Both quantise and sum exactly: within float rounding and a tie rounded
    # the other way (tests/test_onnx_dynamic_quant.py has the bound).
    for _, got in outputs_per_setting(graph, {"x": x}, "y"):
        np.testing.assert_allclose(got, want, atol=0.05 * float(np.max(np.abs(want))))
