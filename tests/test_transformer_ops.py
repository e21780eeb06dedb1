"""Native kernels of transformer graphs, each against numpy on random inputs
at several thread counts and in both operator modes."""

from __future__ import annotations

import numpy as np
import pytest

from pyparbench.executor import compile_graph
from pyparbench.graph import GraphBuilder
from pyparbench.graph.positions import padded_positions
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

_SETTINGS = [Settings(), Settings(intra_op=2), Settings(operator="framework", intra_op=2)]


@pytest.mark.parametrize("settings", _SETTINGS, ids=["1", "2", "framework2"])
def test_position_ids_lookup_matches_numpy(settings: Settings) -> None:
    b = GraphBuilder("positions")
    ids = b.input("ids", (3, 7), "int64")
    pos = b.position_ids(ids, pad_id=1, offset=1, name="positions")
    flat = b.reshape(pos, (21, 1), name="flat")
    e = b.embedding_bag(flat, 9, 4, name="lookup")
    g = b.build(e)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, (3, 7)).astype(np.int64)
    x[0, 0] = 1  # a padding id first
    x[2] = 1  # a row of padding alone
    want = g.nodes[e].params["table"][padded_positions(x, 1, 1).reshape(-1)]
    assert np.array_equal(reference_forward(g, {"ids": x}, np.float32)["lookup"], want)
    cg = compile_graph(g)
    cg.set_inputs({"ids": x})
    cg.run(settings, repeats=1, warmup=0)
    np.testing.assert_array_equal(cg.outputs()["lookup"], want)


def test_padded_positions() -> None:
    ids = np.array([[5, 1, 7, 7, 1], [1, 1, 2, 3, 4]])
    assert padded_positions(ids, 1, 1).tolist() == [[2, 1, 3, 4, 1], [1, 1, 2, 3, 4]]
    with pytest.raises(ValueError, match=r"\(batch, seq\)"):
        padded_positions(np.zeros(3), 1, 1)


def test_position_ids_refuses_float_ids() -> None:
    b = GraphBuilder("positions")
    x = b.input("x", (2, 3))
    with pytest.raises(ValueError, match="int64 ids"):
        b.position_ids(x, pad_id=0, offset=0)
