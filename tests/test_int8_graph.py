"""The int8 graph nodes built directly (quantized_conv2d, quantized_linear on
an N-D input, fake_quantize), float32 in and out: the native executor
against the graph's float64 reference (the same integer semantics), at 1
and 2 threads, in library and framework mode; their checks by name."""

from __future__ import annotations

import numpy as np
import pytest
from _support import outputs_per_setting

from pyparbench.executor import compile_graph
from pyparbench.graph import GraphBuilder
from pyparbench.graph.ir import Graph
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

OUT_STEP = 0.04


def _grids(x_dtype: str, out_dtype: str, x_zero_point: float | None = None
           ) -> dict[str, np.ndarray]:
    zero = 128.0 if x_dtype == "uint8" else 0.0
    arrays = {"x_scale": np.array([0.03], np.float32),
              "x_zero_point": np.array([zero if x_zero_point is None else x_zero_point],
                                       np.float32)}
    if out_dtype != "float32":
        arrays["out_scale"] = np.array([OUT_STEP], np.float32)
        arrays["out_zero_point"] = np.array([128.0 if out_dtype == "uint8" else 0.0],
                                            np.float32)
    return arrays


def _weights(rng: np.random.Generator, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    return {"weight": rng.integers(-127, 128, shape).astype(np.float32),
            "weight_scale": rng.uniform(0.002, 0.01, shape[0]).astype(np.float32),
            "bias": rng.standard_normal(shape[0]).astype(np.float32) * 0.1}


def _graph(x_dtype: str, out_dtype: str, x_zero_point: float | None = None) -> Graph:
    rng = np.random.default_rng(1)
    b = GraphBuilder("int8")
    x = b.input("x", (2, 4, 9, 9))
    c = b.quantized_conv2d(x, 6, 3, padding=1, stride=2, relu=True, x_dtype=x_dtype,
                           out_dtype=out_dtype, name="conv")
    b.set_weights(c, {**_weights(rng, (6, 4, 3, 3)),
                      **_grids(x_dtype, out_dtype, x_zero_point)})
    f = b.fake_quantize(c, x_dtype=x_dtype, name="grid")
    b.set_weights(f, _grids(x_dtype, "float32"))
    r = b.reshape(f, (2, 6, 25), name="rows")
    y = b.quantized_linear(r, 7, x_dtype=x_dtype, out_dtype=out_dtype, name="fc")
    b.set_weights(y, {**_weights(rng, (7, 25)), **_grids(x_dtype, out_dtype)})
    return b.build(y)


@pytest.mark.parametrize("x_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("out_dtype", ["float32", "uint8", "int8"])
def test_int8_nodes_match_their_float64_reference(x_dtype: str, out_dtype: str) -> None:
    g = _graph(x_dtype, out_dtype)
    x = np.random.default_rng(0).standard_normal((2, 4, 9, 9)).astype(np.float32)
    want = reference_forward(g, {"x": x})["fc"]
    for _, got in outputs_per_setting(g, {"x": x}, "fc"):
        if out_dtype == "float32":
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        else:  # one step of the output grid at most, where a float32 sum sits on a tie
            steps = np.abs(got - want) / OUT_STEP
            assert steps.max() <= 1 + 1e-3 and np.mean(steps > 1e-3) <= 0.02


def test_the_analysis_counts_int8_weights_as_bytes() -> None:
    g = _graph("uint8", "uint8")
    stats = {s.name: s for s in g.stats}
    fc = g["fc"]
    assert stats["fc"].macs == 2 * 6 * 7 * 25
    # int8 weights, float32 scales and grids, float32 activations in and out.
    weights = 7 * 25
    others = sum(int(np.prod(s)) for k, s in fc.params.shapes.items() if k != "weight")
    assert stats["fc"].bytes == 4 * (2 * 6 * 25 + 2 * 6 * 7) + weights + 4 * others


def test_bad_quantisation_parameters_are_refused_naming_the_node() -> None:
    g = _graph("uint8", "float32", x_zero_point=300.0)
    cg = compile_graph(g)
    cg.set_inputs({"x": np.zeros((2, 4, 9, 9), np.float32)})
    with pytest.raises(ValueError, match=r"node 'conv' \(quantized_conv2d\): x_zero_point 300"):
        cg.run(Settings(intra_op=1), repeats=1, warmup=0)
    with pytest.raises(ValueError, match="x_dtype must be 'uint8' or 'int8', got 'int4'"):
        b = GraphBuilder("g")
        b.fake_quantize(b.input("x", (2, 3)), x_dtype="int4")
