"""The int8 graph nodes built directly (quantized_conv2d, quantized_linear on
an N-D input, fake_quantize), float32 in and out: the native executor
against the graph's float64 reference (the same integer semantics), at 1
and 2 threads, in library and framework mode; a channels-last node's
quantisation of its input and dequantisation of its output exactly ONNX's
(ties to even, saturation), at 1 to 3 threads; their checks by name."""

from __future__ import annotations

import numpy as np
import pytest
from _support import int8_weight_bits, outputs_per_setting, skip_where_signed_int8_conv_is_refused

from pyparbench.executor import compile_graph
from pyparbench.graph import GraphBuilder
from pyparbench.graph.ir import Graph
from pyparbench.graph.passes import executed_graph
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
    reach = 2 ** (int8_weight_bits() - 1) - 1  # 127, or 63 where 8 bits would saturate
    return {"weight": rng.integers(-reach, reach + 1, shape).astype(np.float32),
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
    skip_where_signed_int8_conv_is_refused(x_dtype)
    g = _graph(x_dtype, out_dtype)
    x = np.random.default_rng(0).standard_normal((2, 4, 9, 9)).astype(np.float32)
    want = reference_forward(g, {"x": x})["fc"]
    for _, got in outputs_per_setting(g, {"x": x}, "fc"):
        if out_dtype == "float32":
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        else:  # one step of the output grid at most, where a float32 sum sits on a tie
            steps = np.abs(got - want) / OUT_STEP
            assert steps.max() <= 1 + 1e-3 and np.mean(steps > 1e-3) <= 0.02


def _identity_conv(x_dtype: str, out_dtype: str, shape: tuple[int, int, int, int],
                   scale: float) -> Graph:
    """A 1 x 1 convolution that passes each channel through (weights 1, no
    bias), its input and output (unless float32) on one grid of power-of-two
    ``scale``: every
    product and rescale is exact, so its output is its input quantised and
    dequantised."""
    b = GraphBuilder("identity")
    x = b.input("x", shape)
    c = b.quantized_conv2d(x, shape[1], 1, bias=False, x_dtype=x_dtype, out_dtype=out_dtype,
                           name="conv")
    zero = np.array([128.0 if x_dtype == "uint8" else 0.0], np.float32)
    grids = {"x_scale": np.array([scale], np.float32), "x_zero_point": zero}
    if out_dtype != "float32":
        grids |= {"out_scale": np.array([scale], np.float32), "out_zero_point": zero}
    b.set_weights(c, {"weight": np.eye(shape[1], dtype=np.float32).reshape(shape[1], shape[1], 1, 1),
                      "weight_scale": np.ones(shape[1], np.float32), **grids})
    return b.build(c)


@pytest.mark.parametrize("x_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("requantised", [False, True])
def test_a_channels_last_node_quantises_and_dequantises_as_onnx(x_dtype: str,
                                                               requantised: bool) -> None:
    skip_where_signed_int8_conv_is_refused(x_dtype)
    # Odd sizes over the parallel threshold: each thread's share and the
    # last block end mid-vector.
    shape, scale = (2, 37, 23, 29), 2.0 ** -5
    g = _identity_conv(x_dtype, x_dtype if requantised else "float32", shape, scale)
    conv = next(n for n in executed_graph(g, Settings()).nodes if n.op == "quantized_conv2d")
    assert conv.attrs["layout"] == "nhwc"
    rng = np.random.default_rng(5)
    # Steps from far below the grid to far above it, a quarter of them ties,
    # and some far beyond: around 2^22 and 2^23 steps (where float32's ulp
    # passes 1), huge, infinite.
    steps = rng.integers(-300, 300, shape) + rng.choice([0.0, 0.5, -0.5, 0.25], shape)
    far = np.array([2.0 ** 22, 2.0 ** 22 + 3, 2.0 ** 23 - 1, 1.5 * 2.0 ** 23, 2.0 ** 24 + 2,
                    1e30, np.inf])
    picked = rng.random(shape) < 0.02
    steps[picked] = rng.choice(np.concatenate([far, -far]), int(picked.sum()))
    x = (steps * scale).astype(np.float32)
    zero, lo, hi = (128, 0, 255) if x_dtype == "uint8" else (0, -128, 127)
    q = np.clip(np.round(x.astype(np.float64) / scale) + zero, lo, hi)  # round: ties to even
    want = ((q - zero) * scale).astype(np.float32)
    cg = compile_graph(g)
    cg.set_inputs({"x": x})
    for t in (1, 2, 3):
        cg.run(Settings(intra_op=t), repeats=1, warmup=0)
        np.testing.assert_array_equal(cg.outputs()["conv"], want, str(t))


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
