"""The dynamically quantized graph ops (dynamic_quantized_conv2d,
dynamic_quantized_linear): the native nodes take their input's grid on
each run and sum exactly, so they match the graph's float64 reference (the
same integer sums, the scales in float32) to float32 rounding, with int8
and uint8 weights, nonzero weight zero points per output, a strided,
padded, grouped convolution, at 1 and 2 threads and in framework mode;
the grid follows the input from run to run; bad weights are refused
naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from _support import outputs_per_setting

from pyparbench.executor import compile_graph
from pyparbench.graph import GraphBuilder
from pyparbench.graph.ir import Graph
from pyparbench.reference import dynamic_grid, reference_forward
from pyparbench.settings import Settings


def _weights(rng: np.random.Generator, shape: tuple[int, ...], dtype: str
             ) -> dict[str, np.ndarray]:
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    return {"weight": rng.integers(lo, hi + 1, shape).astype(np.float32),
            "weight_zero_point": rng.integers(lo // 4 + hi // 4, hi // 2 + 1, shape[0]
                                              ).astype(np.float32),
            "weight_scale": rng.uniform(0.001, 0.004, shape[0]).astype(np.float32),
            "bias": rng.standard_normal(shape[0]).astype(np.float32) * 0.1}


def _graph(dtype: str) -> Graph:
    rng = np.random.default_rng(1)
    b = GraphBuilder("dynamic")
    x = b.input("x", (2, 4, 9, 9))
    c = b.dynamic_quantized_conv2d(x, 6, 3, padding=(1, 0, 2, 1), stride=2, groups=2,
                                   name="conv")
    b.set_weights(c, _weights(rng, (6, 2, 3, 3), dtype))
    r = b.reshape(c, (2, 6, 20), name="rows")
    y = b.dynamic_quantized_linear(r, 7, name="fc")
    b.set_weights(y, _weights(rng, (7, 20), dtype))
    return b.build(y)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_the_nodes_match_their_reference(dtype: str) -> None:
    g = _graph(dtype)
    x = np.random.default_rng(0).standard_normal((2, 4, 9, 9)).astype(np.float32)
    want = reference_forward(g, {"x": x})["fc"]
    for settings, got in outputs_per_setting(g, {"x": x}, "fc"):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max(),
                                   err_msg=str(settings))


def test_each_run_takes_its_own_inputs_grid() -> None:
    g = _graph("int8")
    cg = compile_graph(g)
    rng = np.random.default_rng(2)
    for scale in (1.0, 30.0, 0.01):  # a grid kept from an earlier run would clip or blur
        x = (rng.standard_normal((2, 4, 9, 9)) * scale + scale / 3).astype(np.float32)
        cg.set_inputs({"x": x})
        cg.run(Settings(intra_op=2), repeats=1, warmup=0)
        want = reference_forward(g, {"x": x})["fc"]
        np.testing.assert_allclose(cg.outputs()["fc"], want, rtol=1e-5,
                                   atol=1e-5 * np.abs(want).max())


def test_the_grid_is_onnx_dynamic_quantize_linear_s() -> None:
    # min(0, min) = -1, max(0, max) = 2: scale 3 / 255, zero point 85.
    assert dynamic_grid(np.array([-1.0, 0.5, 2.0], np.float32)) == (
        float(np.float32(3) / np.float32(255)), 85)
    # Positive values alone: the range starts at 0, zero point 0.
    assert dynamic_grid(np.array([0.5, 2.0], np.float32))[1] == 0
    assert dynamic_grid(np.zeros(4, np.float32)) == (0.0, 0)


def test_a_weight_that_is_no_byte_is_refused_naming_the_node() -> None:
    b = GraphBuilder("bad")
    x = b.input("x", (3, 5))
    y = b.dynamic_quantized_linear(x, 2, name="bad_fc")
    w = _weights(np.random.default_rng(0), (2, 5), "int8")
    w["weight"][0, 0] = 300.0
    b.set_weights(y, w)
    cg = compile_graph(b.build(y))
    cg.set_inputs({"x": np.ones((3, 5), np.float32)})
    with pytest.raises(ValueError, match=r"node 'bad_fc' \(dynamic_quantized_linear\): weight "
                                         r"value 300\.0+ is not an int8 or uint8"):
        cg.run(Settings(intra_op=1), repeats=1, warmup=0)
