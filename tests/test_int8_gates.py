"""SiLU gates of grid values looked up by byte (graph.passes.int8_gates): a
QDQ SiLU (sigmoid, its fake_quantize, the mul, the rounding after it)
becomes one fake_quantize with a 256-entry table, its input passed as
bytes; results equal to the bit to the plan without the pass and to the
float32 plan (no passes), at 1, 2 and 3 threads on odd shapes, uint8 and
int8 grids, with and without a fake_quantize after the mul, at every build
of the byte lookup this CPU runs, also where a pool reads the gate (its
lookup writes float32) over more elements than one thread takes; a gate whose
input another op reads is left alone; the table is x times the sigmoid
rounded onto its grid; a table of the wrong size is refused naming it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from _support import conv_c_output, int8_weights, skip_where_signed_int8_conv_is_refused

from pyparbench.executor import compile_graph
from pyparbench.graph import GraphBuilder
from pyparbench.graph.ir import Graph
from pyparbench.graph.passes import executed_graph, int8_gates, optimizer
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

THREADS = (1, 2, 3)
SHAPE = (2, 5, 11, 13)


def _grid(prefix: str, scale: float, zp: float) -> dict[str, np.ndarray]:
    return {f"{prefix}_scale": np.array([scale], np.float32),
            f"{prefix}_zero_point": np.array([zp], np.float32)}


def _gate_graph(dtype: str, rounded_after: bool, pooled: bool = False,
                pooled_gate: bool = False, shape: tuple[int, ...] = SHAPE) -> Graph:
    """conv 0 -> x · fq(sigmoid(x)) [-> fake_quantize] -> conv c, as a QDQ
    EfficientNet's SiLU imports; ``pooled``: a global pool reads x too;
    ``pooled_gate``: one reads the gate's output (a squeeze-excite's)."""
    rng = np.random.default_rng(5)
    b = GraphBuilder("gate")
    x = b.input("x", shape)
    zp = 128.0 if dtype == "uint8" else 0.0
    next_zp = 10.0 if dtype == "uint8" else -100.0
    c = b.quantized_conv2d(x, 6, 3, padding=1, x_dtype=dtype, out_dtype=dtype, name="conv_0")
    b.set_weights(c, {"weight": int8_weights(rng, (6, 5, 3, 3)),
                      "weight_scale": rng.uniform(0.001, 0.004, 6).astype(np.float32),
                      "bias": rng.standard_normal(6).astype(np.float32) * 0.1,
                      **_grid("x", 0.04, zp), **_grid("out", 0.05, zp)})
    s = b.eltwise(c, "sigmoid", name="sig")
    f = b.fake_quantize(s, x_dtype="uint8", name="sig_q")
    b.set_weights(f, _grid("x", 1 / 255, 0.0))
    m = b.mul(c, f, name="silu")
    if rounded_after:
        m = b.fake_quantize(m, x_dtype=dtype, name="silu_q")
        b.set_weights(m, _grid("x", 0.03, next_zp))
    y = b.quantized_conv2d(m, 7, 3, padding=1, x_dtype=dtype, out_dtype="float32", name="conv_c")
    b.set_weights(y, {"weight": int8_weights(rng, (7, 6, 3, 3)),
                      "weight_scale": rng.uniform(0.001, 0.004, 7).astype(np.float32),
                      "bias": rng.standard_normal(7).astype(np.float32) * 0.1,
                      **_grid("x", 0.03, next_zp)})
    if pooled or pooled_gate:
        p = b.global_avg_pool(c if pooled else m, name="pool")
        return b.build([y, p])
    return b.build(y)


@pytest.fixture
def without_gates(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(optimizer, "int8_gates", lambda g: g)
    yield


def _input(shape: tuple[int, ...] = SHAPE) -> np.ndarray:
    # Wide enough that conv 0's output spans its grid, saturating at both ends.
    return (np.random.default_rng(0).standard_normal(shape) * 3).astype(np.float32)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("rounded_after", [True, False])
def test_a_silu_gate_is_one_lookup_reading_bytes(dtype: str, rounded_after: bool) -> None:
    g = executed_graph(_gate_graph(dtype, rounded_after), Settings())
    assert not [n for n in g.nodes if n.op in ("eltwise", "mul")]
    lookups = [n for n in g.nodes if "table" in n.params]
    assert len(lookups) == 1 and lookups[0].op == "fake_quantize"
    assert lookups[0].params["table"].shape == (256,)
    conv = g[lookups[0].inputs[0]]
    assert conv.name == "conv_0" and conv.dtype == dtype
    # Bytes on to conv c, whose own input grid the lookup rounds onto.
    assert lookups[0].dtype == dtype


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("rounded_after", [True, False])
def test_the_lookup_gives_the_float_chains_values_to_the_bit(dtype: str, rounded_after: bool,
                                                             lookup_tier: str,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    skip_where_signed_int8_conv_is_refused(dtype)
    g = _gate_graph(dtype, rounded_after)
    x = _input()
    plain = conv_c_output(g, x, Settings(graph_opt="none"))
    assert np.ptp(plain) > 0
    got = {t: conv_c_output(g, x, Settings(intra_op=t)) for t in THREADS}
    monkeypatch.setattr(optimizer, "int8_gates", lambda g: g)
    for t in THREADS:
        np.testing.assert_array_equal(got[t], conv_c_output(g, x, Settings(intra_op=t)), str(t))
        np.testing.assert_array_equal(got[t], plain, str(t))


# A gate output of more elements than one thread looks up (16384).
WIDE = (2, 5, 41, 43)


def _outputs(g: Graph, x: np.ndarray, settings: Settings) -> dict[str, np.ndarray]:
    cg = compile_graph(g)
    cg.set_inputs({"x": x})
    cg.run(settings, repeats=1, warmup=0)
    return {k: v.copy() for k, v in cg.outputs().items()}


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_a_gate_a_pool_reads_looks_up_float32_to_the_bit(dtype: str, lookup_tier: str,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    skip_where_signed_int8_conv_is_refused(dtype)
    g = _gate_graph(dtype, True, pooled_gate=True, shape=WIDE)
    lookups = [n for n in executed_graph(g, Settings()).nodes if "table" in n.params]
    assert len(lookups) == 1 and lookups[0].dtype == "float32"
    x = _input(WIDE)
    plain = _outputs(g, x, Settings(graph_opt="none"))
    got = {t: _outputs(g, x, Settings(intra_op=t)) for t in THREADS}
    monkeypatch.setattr(optimizer, "int8_gates", lambda g: g)
    for t in THREADS:
        without = _outputs(g, x, Settings(intra_op=t))
        for name, want in plain.items():
            np.testing.assert_array_equal(got[t][name], without[name], f"{name}, {t}")
        np.testing.assert_array_equal(got[t]["conv_c"], plain["conv_c"], str(t))
        # The pool sums the map channels-last in the optimised plans (NCHW in
        # the plain one): float32 sums in another order.
        np.testing.assert_allclose(got[t]["pool"], plain["pool"], rtol=1e-5, err_msg=str(t))


def test_a_gate_whose_input_another_op_reads_stays_float() -> None:
    g = executed_graph(_gate_graph("uint8", True, pooled=True), Settings())
    assert not [n for n in g.nodes if "table" in n.params]
    assert [n for n in g.nodes if n.op == "eltwise" and n.attrs["kind"] == "sigmoid"]


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_the_table_is_x_times_its_rounded_sigmoid(dtype: str) -> None:
    scale, zp, sig_scale = 0.05, (128.0 if dtype == "uint8" else 0.0), 1 / 255
    table = int8_gates.gate_table((dtype, scale, zp), ("uint8", sig_scale, 0.0))
    first = 0 if dtype == "uint8" else -128
    x = (np.arange(first, first + 256) - zp) * np.float32(scale)
    want = x * np.clip(np.rint(1 / (1 + np.exp(-x)) / np.float32(sig_scale)), 0, 255) * np.float32(
        sig_scale)
    # float64 against float32: a sigmoid on a tie of its grid may round the
    # other way (one step of it); float32 rounding otherwise.
    steps = np.abs(table - want) / (np.abs(x) * sig_scale + 1e-30)
    assert steps.max() <= 1 + 1e-3 and np.mean(steps > 1e-3) <= 0.02
    assert len(set(table.tolist())) > 200


def test_a_table_of_the_wrong_size_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = int8_gates.gate_table
    monkeypatch.setattr(int8_gates, "gate_table", lambda *a: whole(*a)[:255])
    with pytest.raises(ValueError, match=r"silu.*'table' holds 255 values"):
        conv_c_output(_gate_graph("uint8", True), _input(), Settings())


def test_the_float64_reference_reads_the_table_as_the_chain() -> None:
    # A 2-D chain straight through the pass: the reference of the rewritten
    # graph (its lookup) against the reference of the float chain.
    b = GraphBuilder("chain")
    x = b.input("x", (3, 50))
    q0 = b.fake_quantize(x, x_dtype="int8", name="x_q")
    b.set_weights(q0, _grid("x", 0.06, 3.0))
    f = b.fake_quantize(b.eltwise(q0, "sigmoid", name="sig"), x_dtype="uint8", name="sig_q")
    b.set_weights(f, _grid("x", 1 / 255, 0.0))
    y = b.fake_quantize(b.mul(q0, f, name="silu"), x_dtype="uint8", name="silu_q")
    b.set_weights(y, _grid("x", 0.04, 9.0))
    g = b.build(y)
    gated = int8_gates.int8_gates(g)
    assert [n.op for n in gated.nodes] == ["input", "fake_quantize", "fake_quantize"]
    inputs = {"x": (np.random.default_rng(1).standard_normal((3, 50)) * 4).astype(np.float32)}
    want = reference_forward(g, inputs)["silu_q"]
    got = reference_forward(gated, inputs)["silu"]
    steps = np.abs(got - want) / 0.04
    assert np.ptp(want) > 1 and steps.max() <= 1 + 1e-3 and np.mean(steps > 1e-3) <= 0.05
