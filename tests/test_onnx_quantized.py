"""A quantized ONNX file the importer does not map, made as users make one
(onnxruntime.quantization on a float32 export, random calibration data:
dynamic quantization, the QOperator format), is refused in one line that
says it is quantized and names its ops, not by its first int8 tensor. QDQ
files import (tests/test_onnx_qdq.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
quantization = pytest.importorskip("onnxruntime.quantization")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pyparbench.graph import from_onnx  # noqa: E402


def _float_model(path: Path) -> None:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    fc = numpy_helper.from_array(rng.standard_normal((8 * 6 * 6, 10)).astype(np.float32), "fc")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["y"])]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [1, 3, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], [w, fc])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


class _Random(quantization.CalibrationDataReader):  # type: ignore[misc]
    def __init__(self) -> None:
        rng = np.random.default_rng(1)
        self.feeds = iter([{"x": rng.standard_normal((1, 3, 6, 6)).astype(np.float32)}
                           for _ in range(4)])

    def get_next(self) -> Any:
        return next(self.feeds, None)


def test_a_qoperator_file_is_refused_naming_its_qlinear_ops(tmp_path: Path) -> None:
    f32, q = tmp_path / "f32.onnx", tmp_path / "int8.onnx"
    _float_model(f32)
    from_onnx(f32)  # the float32 model it came from imports
    quantization.quantize_static(str(f32), str(q), _Random(),
                                 quant_format=quantization.QuantFormat.QOperator)
    with pytest.raises(ValueError, match=r"int8\.onnx.*: a quantized model \(.*QLinearConv x1.*\): "
                                         r"dynamic quantization and the QOperator format are "
                                         r"not imported; import the float32 model"):
        from_onnx(q)


def test_the_qdq_file_of_the_same_model_imports(tmp_path: Path) -> None:
    f32, q = tmp_path / "f32.onnx", tmp_path / "int8.onnx"
    _float_model(f32)
    quantization.quantize_static(str(f32), str(q), _Random(),
                                 quant_format=quantization.QuantFormat.QDQ)
    ops = [n.op for n in from_onnx(q).nodes]
    assert "quantized_conv2d" in ops and "quantized_linear" in ops, ops


def test_a_dynamic_quantized_file_is_refused_naming_its_integer_ops(tmp_path: Path) -> None:
    f32, q = tmp_path / "f32.onnx", tmp_path / "dyn.onnx"
    _float_model(f32)
    quantization.quantize_dynamic(str(f32), str(q))
    with pytest.raises(ValueError, match=r"a quantized model \(.*(MatMulInteger|ConvInteger)"):
        from_onnx(q)
