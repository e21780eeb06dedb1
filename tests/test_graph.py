"""Graph IR: builder shape checks, parameters, and the analysis on graphs with known answers."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import numpy as np
import pytest

from pyparbench.graph import ELTWISE_FLOPS, Graph, GraphBuilder

# ------------------------------------------------------------ hand-built graphs


def chain() -> Graph:
    """x (1, 8) -> linear 16 + ReLU -> linear 4 -> softmax."""
    b = GraphBuilder("chain", seed=1)
    x = b.input("x", (1, 8))
    y = b.linear(x, 16, relu=True, name="fc1")
    y = b.linear(y, 4, name="fc2")
    return b.build(b.softmax(y, name="out"))


def diamond() -> Graph:
    """Two heavy branches joined by an add, then one more heavy op."""
    b = GraphBuilder("diamond")
    x = b.input("x", (2, 4))
    left = b.linear(x, 6, bias=False, name="left")
    right = b.eltwise(b.linear(x, 6, bias=False, name="right"), "relu", name="relu")
    y = b.add(left, right, name="add")
    return b.build(b.linear(y, 3, bias=False, name="out"))


def inception_block() -> Graph:
    """Four branches (1x1; 1x1-3x3; 1x1-5x5; pool-1x1) concatenated, no bias."""
    b = GraphBuilder("block")
    x = b.input("x", (1, 8, 6, 6))
    b1 = b.conv2d(x, 4, 1, bias=False, name="b1")
    b2 = b.conv2d(b.conv2d(x, 3, 1, bias=False, name="b2a"), 4, 3, padding=1, bias=False,
                  name="b2b")
    b3 = b.conv2d(b.conv2d(x, 2, 1, bias=False, name="b3a"), 4, 5, padding=2, bias=False,
                  name="b3b")
    p = b.pool2d(x, "max", 3, stride=1, padding=1, name="pool")
    b4 = b.conv2d(p, 4, 1, bias=False, name="b4")
    return b.build(b.concat([b1, b2, b3, b4], name="concat"))


def split_block() -> Graph:
    """Inception-v3's 8x8 module shape: branches that split again, so the largest
    set of independent heavy ops (6) spans several depth levels (at most 4 each)."""
    b = GraphBuilder("split")
    x = b.input("x", (1, 4, 3, 3))

    def conv(v: int, name: str) -> int:
        return b.conv2d(v, 4, 1, name=name)

    s = conv(x, "s1")
    d = conv(conv(x, "d1"), "d2")
    outs = [conv(x, "b1"), conv(s, "s2a"), conv(s, "s2b"), conv(d, "d3a"), conv(d, "d3b"),
            conv(b.pool2d(x, "avg", 3, stride=1, padding=1, name="pool"), "pp")]
    return b.build(b.concat(outs, name="concat"))


def test_chain_metrics() -> None:
    g = chain()
    assert (g.heavy_ops, g.depth, g.avg_width, g.max_width) == (2, 2, 1.0, 1)
    # fc1: 2*16*8 MACs + bias + ReLU; fc2: 2*4*16 + bias; softmax 5 per element.
    assert [s.flops for s in g.stats] == [0, 256 + 16 + 16, 128 + 4, 20]
    assert g.flops == g.span == 440
    assert g.work_span == 1.0
    assert g.macs == 128 + 64
    assert g.num_params == g.trainable_params == (16 * 8 + 16) + (4 * 16 + 4)
    # bytes: each op reads its inputs and params and writes its output, fp32.
    assert g.bytes_moved == 4 * ((8 + 16 + 144) + (16 + 4 + 68) + (4 + 4))


def test_diamond_metrics() -> None:
    g = diamond()
    assert (g.heavy_ops, g.depth, g.max_width, g.level_width) == (3, 2, 2, 2)
    assert g.avg_width == 1.5
    assert g.flops == 96 + 96 + 12 + 12 + 72
    assert g.span == 96 + 12 + 12 + 72  # through the right branch's ReLU
    assert g.work_span == pytest.approx(288 / 192)
    assert [s.level for s in g.stats] == [0, 1, 1, 1, 1, 2]


def test_inception_block_metrics() -> None:
    g = inception_block()
    assert (g.heavy_ops, g.depth, g.max_width, g.level_width) == (6, 2, 4, 4)
    assert g.avg_width == 3.0
    hw = 36  # 6x6 outputs everywhere
    macs = {"b1": hw * 4 * 8, "b2a": hw * 3 * 8, "b2b": hw * 4 * 3 * 9, "b3a": hw * 2 * 8,
            "b3b": hw * 4 * 2 * 25, "b4": hw * 4 * 8}
    pool = 8 * hw * 9
    assert g.macs == sum(macs.values())
    assert g.flops == 2 * sum(macs.values()) + pool
    assert g.span == 2 * (macs["b3a"] + macs["b3b"])  # the 5x5 branch is the heaviest
    assert g.work_span == pytest.approx(g.flops / g.span)
    assert g.num_params == 4 * 8 + 3 * 8 + 4 * 3 * 9 + 2 * 8 + 4 * 2 * 25 + 4 * 8
    assert g["concat"].shape == (1, 16, 6, 6)


def test_max_width_spans_levels() -> None:
    g = split_block()
    assert (g.heavy_ops, g.depth, g.level_width, g.max_width) == (9, 3, 4, 6)
    assert g.avg_width == 3.0


def test_no_heavy_ops() -> None:
    b = GraphBuilder("light")
    x = b.input("x", (2, 3))
    g = b.build(b.reshape(x, (3, 2)))
    assert (g.heavy_ops, g.depth, g.avg_width, g.max_width, g.flops) == (0, 0, 0.0, 0, 0)
    assert g.work_span == 1.0


def _random_dag(seed: int, n: int) -> Graph:
    """n heavy ops, each reading a random subset of earlier ones (or the input)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("random", seed)
    x = b.input("x", (1, 4))
    heavy: list[int] = []
    used: set[int] = set()
    for i in range(n):
        deps = [h for h in heavy if rng.random() < 0.3] or [x]
        used.update(deps)
        y = deps[0]
        for d in deps[1:]:
            y = b.add(y, d)
        heavy.append(b.linear(y, 4, name=f"h{i}"))
    return b.build(b.concat([h for h in heavy if h not in used], axis=1))


def _brute_force_width(g: Graph) -> int:
    heavy = [n.id for n in g if n.heavy]
    ancestors: dict[int, set[int]] = {}
    for n in g:
        ancestors[n.id] = set().union(*(ancestors[j] | {j} for j in n.inputs))
    for size in range(len(heavy), 0, -1):
        for combo in itertools.combinations(heavy, size):
            if all(u not in ancestors[v] and v not in ancestors[u]
                   for u, v in itertools.combinations(combo, 2)):
                return size
    return 0


@pytest.mark.parametrize("seed", range(12))
def test_max_width_matches_brute_force(seed: int) -> None:
    g = _random_dag(seed, 9)
    assert g.max_width == _brute_force_width(g)
    assert g.level_width <= g.max_width


# ------------------------------------------------------------ FLOP conventions


def _one(op: str, **kw: object) -> Graph:
    """A graph of one op on a (2, 3, 4, 4) input."""
    b = GraphBuilder(op)
    x = b.input("x", (2, 3, 4, 4))
    return b.build(getattr(b, op)(x, **kw))


@pytest.mark.parametrize("kind", sorted(ELTWISE_FLOPS))
def test_eltwise_flops(kind: str) -> None:
    assert _one("eltwise", kind=kind).flops == ELTWISE_FLOPS[kind] * 96


def test_norm_pool_softmax_flops() -> None:
    assert _one("batch_norm").flops == 4 * 96
    assert _one("batch_norm", scale=False).flops == 3 * 96
    assert _one("layer_norm").flops == 8 * 96
    assert _one("softmax", axis=1).flops == 5 * 96
    assert _one("global_avg_pool").flops == 96 + 6
    assert _one("pool2d", kind="max", kernel=2).flops == 24 * 4
    assert _one("pool2d", kind="avg", kernel=2).flops == 24 * 5
    assert _one("transpose", perm=(0, 2, 3, 1)).flops == 0


def test_conv_flops_with_groups_bias_relu() -> None:
    g = _one("conv2d", out_channels=6, kernel=3, padding=1, groups=3, relu=True)
    out = 2 * 6 * 4 * 4
    assert g.macs == out * 1 * 9
    assert g.flops == 2 * out * 9 + 2 * out  # bias and ReLU: one each per output


def test_embedding_bag_flops_bytes_params() -> None:
    b = GraphBuilder("emb")
    idx = b.input("idx", (5, 7), "int64")
    e = b.embedding_bag(idx, 1000, 16, mode="mean")
    g = b.build(e)
    assert g.flops == 5 * 7 * 16 + 5 * 16
    assert g.num_params == 16000
    # indices (int64) + output + only the gathered rows, not the table
    assert g.bytes_moved == 8 * 35 + 4 * 80 + 4 * 35 * 16
    assert g.heavy_ops == 1


def test_a_constant_is_a_parameter_its_reader_moves() -> None:
    from pyparbench.graph.builder import rebuild
    from pyparbench.reference import reference_forward

    b = GraphBuilder("token")
    x = b.input("x", (2, 5, 8))
    c = b.constant((2, 1, 8), name="token")
    g = b.build(b.concat([c, x], axis=1))
    assert g.flops == 0 and g.num_params == 16
    # The concat reads both and writes its output; the constant moves nothing itself.
    assert g.bytes_moved == 4 * (16 + 80 + 96)
    assert rebuild(g).as_dict() == g.as_dict()
    xs = g.random_inputs(3)
    out = reference_forward(g, xs)[g[g.outputs[0]].name]
    np.testing.assert_array_equal(out[:, :1], g["token"].params["value"])
    np.testing.assert_array_equal(out[:, 1:], xs["x"])


def test_batch_norm_statistics_count_as_params() -> None:
    g = _one("batch_norm")
    assert g.num_params == 4 * 3 and g.trainable_params == 2 * 3
    g = _one("batch_norm", scale=False)
    assert g.num_params == 3 * 3 and g.trainable_params == 3


# ----------------------------------------------------------------- parameters


def test_params_lazy_seeded_readonly() -> None:
    g = chain()
    g.summary()
    assert all(not n.params.materialized for n in g)  # analysis makes no weights
    w = g["fc2"].params["weight"]
    assert w.dtype == np.float32 and w.shape == (4, 16)
    assert not w.flags.writeable
    assert g["fc2"].params.materialized == ("weight",)
    # Same seed: same values whatever the order of access; other seed: others.
    h = chain()
    assert np.array_equal(h["fc2"].params["weight"], w)
    assert np.array_equal(h["fc1"].params["bias"], g["fc1"].params["bias"])
    b = GraphBuilder("chain", seed=2)
    y = b.linear(b.linear(b.input("x", (1, 8)), 16, relu=True, name="fc1"), 4, name="fc2")
    assert not np.array_equal(b.build(y)["fc2"].params["weight"], w)


def test_weights_scaled_and_bn_variance_positive() -> None:
    b = GraphBuilder("init")
    x = b.input("x", (1, 64, 8, 8))
    c = b.conv2d(x, 128, 3, padding=1)
    g = b.build(b.batch_norm(c))
    w = g.nodes[c].params["weight"]
    assert np.std(w) == pytest.approx(np.sqrt(2 / (64 * 9)), rel=0.05)  # He normal
    assert np.all(g.nodes[-1].params["var"] > 0)
    assert dict(g.nodes[-1].params.shapes) == {"mean": (128,), "var": (128,), "scale": (128,),
                                               "shift": (128,)}


def test_random_inputs() -> None:
    b = GraphBuilder("inputs")
    idx = b.input("idx", (64, 10), "int64")
    x = b.input("x", (64, 3))
    e = b.concat([b.embedding_bag(idx, 50, 3), b.embedding_bag(idx, 7, 3), x])
    g = b.build(e)
    inp = g.random_inputs(seed=3)
    assert inp["x"].dtype == np.float32 and np.all(inp["x"] != 0)
    assert np.all(np.abs(inp["x"]) <= 1)
    assert inp["idx"].dtype == np.int64
    assert inp["idx"].min() >= 0 and inp["idx"].max() < 7  # valid for both tables
    assert np.array_equal(g.random_inputs(seed=3)["x"], inp["x"])


# ------------------------------------------------------------------ structure


def test_summary_and_json() -> None:
    g = inception_block()
    s = g.summary()
    assert s["heavy_ops"] == 6 and s["depth"] == 2 and s["max_width"] == 4
    assert s["outputs"] == {"concat": [1, 16, 6, 6]}
    assert s["op_counts"] == {"concat": 1, "conv2d": 6, "input": 1, "pool2d": 1}
    json.dumps(s)
    d = json.loads(g.to_json())
    assert [n["name"] for n in d["nodes"]] == [n.name for n in g]
    assert d["nodes"][1]["params"] == {"weight": [4, 8, 1, 1]}
    assert d["nodes"][-1]["attrs"] == {"axis": 1}
    assert all(not n.params.materialized for n in g)


def test_scope_names_and_lookup() -> None:
    b = GraphBuilder("s")
    x = b.input("x", (1, 2))
    with b.scope("outer"), b.scope("inner"):
        y = b.linear(x, 2, name="fc")
        z = b.input("z", (1, 2))
    assert b.shape(z) == (1, 2)
    g = b.build(b.add(b.eltwise(y, "tanh"), z))
    assert g[y].name == "outer/inner/fc"
    assert g.input_names == ["x", "z"]  # inputs are never scoped
    assert g["outer/inner/fc"].id == y
    assert g.nodes[-2].name == f"eltwise_{len(g) - 2}"
    assert g.consumers[y] == (len(g) - 2,)
    with pytest.raises(KeyError, match="no node named"):
        g["nope"]


# --------------------------------------------------------------- bad input


def _b() -> tuple[GraphBuilder, int]:
    b = GraphBuilder("bad")
    return b, b.input("x", (2, 3, 8, 8))


@pytest.mark.parametrize("make, match", [
    (lambda b, x: b.conv2d(x, 4, 3, groups=2), "groups=2 must divide"),
    (lambda b, x: b.conv2d(x, 4, 9), r"output shape \(2, 4, 0, 0\)"),
    (lambda b, x: b.conv2d(x, 4, 3, stride=0), "stride"),
    (lambda b, x: b.linear(x, 4), r"2-D or 3-D, got \(2, 3, 8, 8\)"),
    (lambda b, x: b.add(x, b.input("y", (2, 3, 8, 2))), r"\(2, 3, 8, 2\) does not broadcast"),
    (lambda b, x: b.mul(x, b.input("y", (2, 3, 8, 2))), r"\(2, 3, 8, 2\) does not broadcast"),
    (lambda b, x: b.concat([x, b.input("y", (2, 3, 4, 8))], axis=1), "equal other dims"),
    (lambda b, x: b.concat([x], axis=4), "out of range"),
    (lambda b, x: b.pool2d(x, "max", 2, padding=2), "padding <= kernel/2"),
    (lambda b, x: b.pool2d(x, "min", 2), "'max' or 'avg'"),
    (lambda b, x: b.reshape(x, (5, -1)), r"cannot reshape \(2, 3, 8, 8\)"),
    (lambda b, x: b.reshape(x, (2, 3, 8, 9)), "cannot reshape"),
    (lambda b, x: b.transpose(x, (0, 1, 2, 2)), "not a permutation"),
    (lambda b, x: b.tril_flatten(x), r"\(B, n, n\)"),
    (lambda b, x: b.matmul(b.input("a", (2, 3, 4)), b.input("c", (2, 5, 6))),
     r"inner dimensions differ: \(2, 3, 4\) and \(2, 5, 6\)"),
    (lambda b, x: b.matmul(x, x), "two 2-D or two 3-D"),
    (lambda b, x: b.matmul(b.input("a", (2, 3)), b.input("c", (1, 3, 2))), "one batch size"),
    (lambda b, x: b.eltwise(x, "mish"), "kind must be one of"),
    (lambda b, x: b.embedding_bag(x, 10, 4), "2-D int64 input"),
    (lambda b, x: b.embedding_bag(b.input("i", (2, 3), "int64"), 10, 4, mode="max"), "mode"),
    (lambda b, x: b.linear(b.input("i", (2, 3), "int64"), 4), "float32 input"),
    (lambda b, x: b.input("x", (1,)), "duplicate node name 'x'"),
    (lambda b, x: b.input("y", (1,), "float16"), "dtype"),
    (lambda b, x: b.global_avg_pool(99), "not a node id"),
])
def test_builder_rejects(make: object, match: str) -> None:
    b, x = _b()
    with pytest.raises(ValueError, match=match):
        make(b, x)  # type: ignore[operator]


def test_graph_rejects_dead_nodes_and_bad_outputs() -> None:
    b, x = _b()
    b.eltwise(x, "relu", name="unused")
    y = b.eltwise(x, "tanh")
    with pytest.raises(ValueError, match=r"reach no output: \['unused'\]"):
        b.build(y)
    with pytest.raises(ValueError, match="not node ids"):
        b.build([y, 42])
    with pytest.raises(ValueError, match="at least one output"):
        b.build([])


def test_graph_rejects_malformed_nodes() -> None:
    g = chain()
    fc1, fc2 = g["fc1"], g["fc2"]
    with pytest.raises(ValueError, match="unknown op 'conv3d'"):
        Graph("g", [g.nodes[0], replace(fc1, op="conv3d")], [1])
    with pytest.raises(ValueError, match="has id 2 at position 1"):
        Graph("g", [g.nodes[0], fc2], [1])
    with pytest.raises(ValueError, match="each must be an earlier node"):
        Graph("g", [g.nodes[0], replace(fc1, inputs=(1,))], [1])
    with pytest.raises(ValueError, match="duplicate node name 'x'"):
        Graph("g", [g.nodes[0], replace(fc1, name="x")], [1])
