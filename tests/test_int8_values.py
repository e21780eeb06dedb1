"""Int8 values kept as bytes between int8 nodes (graph.passes.int8_values):
which values the executed graph keeps as bytes, the residual add fused into
the fake_quantize after it, max pools of bytes, a fake_quantize after a
channel shuffle onto the grid its values lie on dropped
(graph.passes.int8_identities), and results equal to the
bit to the float32 plan's (no passes), within a step of the float64
reference, and within ONNX Runtime's bound on a quantize_static file of
residual blocks, at 1, 2 and 3 threads, on odd shapes; a float node reading
bytes is refused by the plan."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _support import (
    conv_c_output,
    int8_weight_bits,
    int8_weights,
    skip_where_signed_int8_conv_is_refused,
)

from pyparbench._core import graph as native
from pyparbench.executor import compile_graph
from pyparbench.graph import GraphBuilder, from_onnx
from pyparbench.graph.ir import Graph
from pyparbench.graph.passes import executed_graph
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

THREADS = (1, 2, 3)
STEP = 0.05  # the output grid's


def _grid(prefix: str, dtype: str, scale: float) -> dict[str, np.ndarray]:
    return {f"{prefix}_scale": np.array([scale], np.float32),
            f"{prefix}_zero_point": np.array([128.0 if dtype == "uint8" else 0.0], np.float32)}


def _conv(b: GraphBuilder, rng: np.random.Generator, x: int, cin: int, cout: int,
          x_scale: float, out_scale: float, dtype: str, name: str) -> int:
    c = b.quantized_conv2d(x, cout, 3, padding=1, x_dtype=dtype, out_dtype=dtype, name=name)
    b.set_weights(c, {"weight": int8_weights(rng, (cout, cin, 3, 3)),
                      "weight_scale": rng.uniform(0.001, 0.004, cout).astype(np.float32),
                      "bias": rng.standard_normal(cout).astype(np.float32) * 0.1,
                      **_grid("x", dtype, x_scale), **_grid("out", dtype, out_scale)})
    return c


def _block_graph(dtype: str) -> Graph:
    """x -> conv 0 -> conv a -> conv b, + conv 0's value -> grid -> conv c: a
    residual block as a QDQ file imports, 5 channels of 11 x 13."""
    rng = np.random.default_rng(3)
    b = GraphBuilder("block")
    x = b.input("x", (2, 5, 11, 13))
    c0 = _conv(b, rng, x, 5, 5, 0.04, 0.05, dtype, "conv_0")
    a = _conv(b, rng, c0, 5, 5, 0.05, 0.03, dtype, "conv_a")
    c = _conv(b, rng, a, 5, 5, 0.03, 0.06, dtype, "conv_b")
    s = b.add(c, c0, name="sum")
    g1 = b.fake_quantize(s, x_dtype=dtype, name="g1")
    b.set_weights(g1, _grid("x", dtype, 0.07))
    y = _conv(b, rng, g1, 5, 7, 0.07, STEP, dtype, "conv_c")
    return b.build(y)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_consecutive_int8_nodes_pass_bytes_and_the_residual_add_is_fused(dtype: str) -> None:
    g = executed_graph(_block_graph(dtype), Settings())
    # The graph's output, channels-last, is reordered under its own name.
    by_name = {n.name.removesuffix("/nhwc"): n for n in g.nodes if n.op != "reorder"}
    # conv 0's bytes go straight into conv a, conv a's into conv b, conv b's
    # and conv 0's into the fused sum, whose bytes go into conv c.
    assert by_name["conv_a"].inputs == (by_name["conv_0"].id,)
    assert by_name["conv_b"].inputs == (by_name["conv_a"].id,)
    assert "sum" not in by_name and not [n for n in g.nodes if n.op == "add"]
    assert by_name["g1"].inputs == (by_name["conv_b"].id, by_name["conv_0"].id)
    assert by_name["conv_c"].inputs == (by_name["g1"].id,)
    for name in ("conv_0", "conv_a", "conv_b", "g1"):
        assert by_name[name].dtype == dtype, name
    assert by_name["conv_c"].dtype == "float32"
    assert g[g.outputs[0]].dtype == "float32"


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_bytes_give_the_float_plans_values_to_the_bit(dtype: str) -> None:
    skip_where_signed_int8_conv_is_refused(dtype)
    g = _block_graph(dtype)
    x = np.random.default_rng(0).standard_normal((2, 5, 11, 13)).astype(np.float32)
    plain = conv_c_output(g, x, Settings(graph_opt="none"))
    want = reference_forward(g, {"x": x})["conv_c"]
    steps = np.abs(plain - want) / STEP
    assert steps.max() <= 1 + 1e-3 and np.mean(steps > 1e-3) <= 0.05
    for t in THREADS:
        np.testing.assert_array_equal(conv_c_output(g, x, Settings(intra_op=t)), plain, str(t))


def _pool_graph(dtype: str, ceil_mode: bool) -> Graph:
    """conv 0 -> max pool (3 x 3, stride 2, padding 1) -> conv c, on 7 x 13."""
    rng = np.random.default_rng(4)
    b = GraphBuilder("pool")
    x = b.input("x", (2, 5, 7, 13))
    c0 = _conv(b, rng, x, 5, 6, 0.04, 0.05, dtype, "conv_0")
    p = b.pool2d(c0, "max", 3, stride=2, padding=1, ceil_mode=ceil_mode, name="pool")
    y = _conv(b, rng, p, 6, 7, 0.05, STEP, dtype, "conv_c")
    return b.build(y)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_a_max_pool_of_bytes_writes_bytes_and_the_float_plans_values(dtype: str,
                                                                      ceil_mode: bool) -> None:
    skip_where_signed_int8_conv_is_refused(dtype)
    g = _pool_graph(dtype, ceil_mode)
    run = executed_graph(g, Settings())
    pool = next(n for n in run.nodes if n.op == "pool2d")
    assert pool.dtype == dtype and run[pool.inputs[0]].dtype == dtype
    x = np.random.default_rng(2).standard_normal((2, 5, 7, 13)).astype(np.float32)
    plain = conv_c_output(g, x, Settings(graph_opt="none"))
    for t in THREADS:
        np.testing.assert_array_equal(conv_c_output(g, x, Settings(intra_op=t)), plain, str(t))


def _shuffle_graph(dtype: str) -> Graph:
    """conv 0 (grid G) -> a channel shuffle (reshape, transpose, reshape) ->
    fake_quantize G -> two slices of the channels, one rounded onto G again,
    the other onto a coarser grid -> concat -> conv c: a QDQ ShuffleNet unit."""
    rng = np.random.default_rng(6)
    b = GraphBuilder("shuffle")
    x = b.input("x", (1, 6, 7, 9))
    c0 = _conv(b, rng, x, 6, 6, 0.04, 0.05, dtype, "conv_0")
    t = b.transpose(b.reshape(c0, (1, 2, 3, 7, 9)), (0, 2, 1, 3, 4), name="shuffle")
    same = b.fake_quantize(t, x_dtype=dtype, name="same_grid")
    b.set_weights(same, _grid("x", dtype, 0.05))
    flat = b.reshape(b.reshape(same, (1, 6, 7, 9)), (6, 7, 9))
    halves = []
    for name, scale, start in (("same_again", 0.05, 0), ("other_grid", 0.08, 3)):
        half = b.reshape(b.slice(flat, start, 3), (1, 3, 7, 9))
        f = b.fake_quantize(half, x_dtype=dtype, name=name)
        b.set_weights(f, _grid("x", dtype, scale))
        halves.append(f)
    y = _conv(b, rng, b.concat(halves), 6, 7, 0.05, STEP, dtype, "conv_c")
    return b.build(y)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_a_fake_quantize_onto_the_grid_its_values_lie_on_is_dropped(dtype: str) -> None:
    skip_where_signed_int8_conv_is_refused(dtype)
    g = _shuffle_graph(dtype)
    kept = {n.name for n in executed_graph(g, Settings()).nodes if n.op == "fake_quantize"}
    assert kept == {"other_grid"}
    # Rounding onto the other grid (step 0.08) moves a value up to 0.04, over
    # half conv c's input step (0.05): dropping it would change the results.
    x = np.random.default_rng(7).standard_normal((1, 6, 7, 9)).astype(np.float32)
    plain = conv_c_output(g, x, Settings(graph_opt="none"))
    for t in THREADS:
        np.testing.assert_array_equal(conv_c_output(g, x, Settings(intra_op=t)), plain, str(t))


def test_a_byte_value_read_by_a_float_node_is_refused_naming_both() -> None:
    specs = []
    for name, op in (("x", "input"), ("q", "fake_quantize"), ("r", "eltwise")):
        s = native.NodeSpec()
        s.op, s.name, s.shape = op, name, [4]
        specs.append(s)
    specs[1].inputs, specs[1].kind, specs[1].int8 = [0], "uint8", True
    specs[2].inputs, specs[2].kind = [1], "relu"
    with pytest.raises(ValueError, match="'r' \\(eltwise\\) cannot read the int8 bytes of "
                                         "node 'q'"):
        native.Plan(specs, [2], reuse_buffers=False)


# ----------------------------------------------------------- a QDQ file

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")
torch = pytest.importorskip("torch")


class _Blocks(torch.nn.Module):  # type: ignore[misc]
    """A stem, max pool, two residual blocks (the second downsampling), a head."""

    def __init__(self) -> None:
        super().__init__()
        conv = torch.nn.Conv2d
        self.stem = conv(3, 12, 3, padding=1)
        self.a1, self.b1 = conv(12, 12, 3, padding=1), conv(12, 12, 3, padding=1)
        self.a2, self.b2 = conv(12, 20, 3, stride=2, padding=1), conv(20, 20, 3, padding=1)
        self.down = conv(12, 20, 1, stride=2)
        self.fc = torch.nn.Linear(20, 9)

    def forward(self, x: Any) -> Any:
        relu = torch.relu
        y = torch.nn.functional.max_pool2d(relu(self.stem(x)), 2)
        y = relu(y + self.b1(relu(self.a1(y))))
        y = relu(self.down(y) + self.b2(relu(self.a2(y))))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


class _Random(quantization.CalibrationDataReader):  # type: ignore[misc]
    def __init__(self) -> None:
        rng = np.random.default_rng(1)
        self.feeds = iter([{"x": rng.standard_normal((3, 3, 22, 26)).astype(np.float32)}
                           for _ in range(4)])

    def get_next(self) -> Any:
        return next(self.feeds, None)


def _qdq_file(tmp: Path) -> Path:
    f32, q = tmp / "f32.onnx", tmp / "int8.onnx"
    torch.manual_seed(0)
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation
        warnings.simplefilter("ignore")
        torch.onnx.export(_Blocks().eval(), torch.randn(3, 3, 22, 26), str(f32), dynamo=False,
                          input_names=["x"], output_names=["y"], opset_version=17)
    quantization.quantize_static(str(f32), str(q), _Random(),
                                 quant_format=quantization.QuantFormat.QDQ, per_channel=True,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8,
                                 reduce_range=int8_weight_bits() == 7)
    return q


def test_a_quantize_static_file_keeps_bytes_and_matches_onnx_runtime(tmp_path: Path) -> None:
    path = _qdq_file(tmp_path)
    graph = from_onnx(path)
    run = executed_graph(graph, Settings())
    convs = [n for n in run.nodes if n.op == "quantized_conv2d"]
    # The stem's bytes go through the max pool, each block's first conv
    # hands its bytes to the second, and every residual sum is fused and
    # reads both addends as bytes.
    for first, second in (("a1", "b1"), ("a2", "b2")):
        a = next(n for n in convs if first in n.name)
        b = next(n for n in convs if second in n.name)
        assert b.inputs == (a.id,) and a.dtype == "uint8", (a.name, b.name)
    assert not [n for n in run.nodes if n.op == "add"]
    sums = [n for n in run.nodes if n.op == "fake_quantize" and len(n.inputs) == 2]
    assert len(sums) == 2 and all(run[i].dtype == "uint8" for n in sums for i in n.inputs)
    pool = next(n for n in run.nodes if n.op == "pool2d")
    assert pool.dtype == "uint8" and run[pool.inputs[0]].op == "quantized_conv2d"
    m = onnx.load(str(path))
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    dq = next(n for n in m.graph.node if n.output[0] == m.graph.output[0].name)
    step = float(inits[dq.input[1]])
    x = np.random.default_rng(7).standard_normal((3, 3, 22, 26)).astype(np.float32)
    ort_y = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    want = reference_forward(graph, {"x": x})["y"]
    cg = compile_graph(graph)
    cg.set_inputs({"x": x})
    cg.run(Settings(graph_opt="none"), repeats=1, warmup=0)
    plain = cg.outputs()["y"].copy()
    for t in THREADS:
        cg.run(Settings(intra_op=t), repeats=1, warmup=0)
        got = cg.outputs()["y"]
        np.testing.assert_array_equal(got, plain, str(t))
        assert np.max(np.abs(got - want) / step) <= 1 + 1e-3, t
        assert np.max(np.abs(got - ort_y) / step) <= 2 + 1e-3, t
