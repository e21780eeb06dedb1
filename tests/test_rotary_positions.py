"""The native ``rotary`` node with int64 (B, S) positions: its tables
computed as it runs (float32(position) * inv_freq, cos / sin, a scaling)
against the float64 reference at several shapes and thread counts, the
constant-table node where the positions are 0 .. S - 1, and bad inputs
refused by name; and the variant reading tables (C, D) at the positions
(ONNX's RotaryEmbedding with position_ids)."""

from __future__ import annotations

import numpy as np
import pytest

from pyparbench.executor import compile_graph
from pyparbench.graph import Graph, GraphBuilder, transformer_math
from pyparbench.graph.builder import rebuild
from pyparbench.reference import assert_near, reference_forward
from pyparbench.settings import Settings

_SETTINGS = [Settings(), Settings(intra_op=2), Settings(operator="framework", intra_op=2)]


def _inv_freq(d: int, theta: float = 10000.0) -> np.ndarray:
    return (1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)).astype(np.float32)


def _graph(shape: tuple[int, ...], scaling: float) -> Graph:
    b = GraphBuilder("rotary_positions")
    x = b.input("x", shape)
    p = b.input("positions", (shape[0], shape[-2]), "int64")
    y = b.rotary(x, positions=p, name="y")
    b.set_weights(y, {"inv_freq": _inv_freq(shape[-1]), "scaling": [scaling]})
    return b.build(y)


def _run(g: Graph, feeds: dict[str, np.ndarray], settings: Settings) -> np.ndarray:
    cg = compile_graph(g)
    cg.set_inputs(feeds)
    cg.run(settings, repeats=1, warmup=0)
    (out,) = cg.outputs().values()
    return out


@pytest.mark.parametrize("settings", _SETTINGS, ids=["1", "2", "framework2"])
@pytest.mark.parametrize(("shape", "scaling"), [
    ((2, 3, 5, 8), 1.0),
    ((3, 2, 7, 64), 0.75),  # Llama 3's scaled variants: another factor
    ((1, 4, 1, 16), 1.0),  # one decode step's row
    ((4, 6, 32), 1.0),  # (B, S, D): no heads axis
])
def test_rotary_positions_match_the_reference(settings: Settings, shape: tuple[int, ...],
                                              scaling: float) -> None:
    g = _graph(shape, scaling)
    rng = np.random.default_rng(len(shape) + shape[-1])
    # Left padding's clipped, shifted and negative positions, and far ones.
    positions = rng.integers(-20, 5000, (shape[0], shape[-2])).astype(np.int64)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32), "positions": positions}
    want = reference_forward(g, feeds)["y"]
    got = _run(g, feeds, settings)
    assert_near(got, want)
    # Each batch row's own positions: another row's would rotate differently.
    swapped = {**feeds, "positions": positions[::-1].copy()}
    if shape[0] > 1:
        assert np.abs(_run(g, swapped, settings) - got).max() > 1e-3


def test_rotary_positions_from_zero_are_the_tables_node() -> None:
    shape = (2, 3, 6, 16)
    g = _graph(shape, 1.0)
    b = GraphBuilder("rotary_tables")
    y = b.rotary(b.input("x", shape), name="y")
    angles = np.arange(shape[2], dtype=np.float32)[:, None] * _inv_freq(shape[-1])
    both = np.concatenate([angles, angles], axis=-1)
    b.set_weights(y, {"cos": np.cos(both), "sin": np.sin(both)})
    tables = b.build(y)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    positions = np.broadcast_to(np.arange(shape[2]), (shape[0], shape[2])).astype(np.int64)
    got = _run(g, {"x": x, "positions": positions}, Settings(intra_op=2))
    want = _run(tables, {"x": x}, Settings(intra_op=2))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        reference_forward(g, {"x": x, "positions": positions})["y"],
        transformer_math.rotary(x.astype(np.float64), np.cos(both), np.sin(both)),
        rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("settings", _SETTINGS, ids=["1", "2", "framework2"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 8), (3, 1, 4, 16), (2, 7, 12)])
def test_rotary_tables_read_at_positions_match_the_reference(settings: Settings,
                                                             shape: tuple[int, ...]) -> None:
    b = GraphBuilder("rotary_indexed")
    p = b.input("positions", (shape[0], shape[-2]), "int64")
    y = b.rotary(b.input("x", shape), positions=p, context=50, name="y")
    g = b.build(y)
    rng = np.random.default_rng(shape[-1])
    positions = rng.integers(0, 50, (shape[0], shape[-2])).astype(np.int64)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32), "positions": positions}
    want = reference_forward(g, feeds)["y"]
    assert_near(_run(g, feeds, settings), want)
    # Row (b, s) is table row positions[b, s]: the tables' own rows.
    cos, sin = (np.asarray(g.nodes[y].params[w], np.float64)[positions] for w in ("cos", "sin"))
    view = (shape[0], *(1,) * (len(shape) - 3), *shape[-2:])
    np.testing.assert_allclose(want, transformer_math.rotary(
        feeds["x"].astype(np.float64), cos.reshape(view), sin.reshape(view)), rtol=1e-12)
    with pytest.raises(ValueError, match=r"\.\. -1 are outside its tables. 50 rows"):
        reference_forward(g, {**feeds, "positions": positions - positions.max() - 1})


def test_rotary_positions_count_their_tables_flops() -> None:
    shape = (2, 3, 5, 8)
    plain = GraphBuilder("plain")
    y = plain.rotary(plain.input("x", shape), name="y")
    extra = _graph(shape, 1.0).flops - plain.build(y).flops
    assert extra == 5 * 2 * 5 * 4  # angle, cos, sin and two scalings per position, frequency


def test_rotary_positions_refuse_bad_inputs_by_name() -> None:
    b = GraphBuilder("bad")
    x = b.input("x", (2, 3, 5, 8))
    floats = b.input("float_positions", (2, 5))
    with pytest.raises(ValueError, match="'float_positions' .*float32"):
        b.rotary(x, positions=floats)
    short = b.input("short_positions", (2, 4), "int64")
    with pytest.raises(ValueError, match=r"'short_positions' .*\(2, 4\)"):
        b.rotary(x, positions=short)
    length = b.input("length", (1,), "int64")
    good = b.input("positions", (2, 5), "int64")
    with pytest.raises(ValueError, match="not both"):
        b.rotary(x, length, context=8, positions=good)
    with pytest.raises(ValueError, match=r"\(B, \.\.\., S, D\)"):
        b.rotary(b.input("x2", (5, 8)), positions=good)
    with pytest.raises(ValueError, match="context .* got 0"):
        b.rotary(x, positions=good, context=0)


def test_both_positions_variants_rebuild_the_same() -> None:
    """rebuild (the check of a hand-made graph) knows both variants."""
    b = GraphBuilder("both")
    x = b.input("x", (2, 3, 5, 8))
    p = b.input("positions", (2, 5), "int64")
    y = b.rotary(b.rotary(x, positions=p, name="computed"), positions=p, context=9,
                 name="read")
    g = b.build(y)
    assert rebuild(g).as_dict() == g.as_dict()


@pytest.mark.parametrize("framework", ["torch", "onnxruntime"])
def test_framework_translations_refuse_computed_tables_by_name(framework: str) -> None:
    """No framework translation computes the tables from positions: the
    translators say so, naming the node (the file runs in ONNX Runtime)."""
    g = _graph((2, 3, 5, 8), 1.0)
    module, build = {"torch": ("pyparbench.frameworks.torch.translate", "build_module"),
                     "onnxruntime": ("pyparbench.frameworks.onnxruntime.translate",
                                     "build_onnx")}[framework]
    translate = getattr(pytest.importorskip(module), build)
    with pytest.raises(ValueError, match="node 'y': a rotary computing its tables"):
        translate(g)
