"""Fuzzing the graph builder, hand-made graphs, Settings and the executor.

Random graphs are grown op by op with random attributes (the builder must
refuse what does not fit with a clear error), then compiled and run under
random settings (every scheduler, pool, operator mode and math library):
the outputs must equal the float64 reference. Graphs put together by hand,
bypassing the builder (a node's shape, attributes, parameters, inputs or op
changed), must be refused by ``compile_graph`` or, when the change is
harmless, still give the reference's answer: the native plan is never
handed a shape its kernel disagrees with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from _fuzz import attempt
from pyparbench.executor import compile_graph
from pyparbench.graph import Graph, GraphBuilder, Params, ParamSpec
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

RTOL = 2e-4  # fp32 kernels through a few layers against float64


def grow(d: st.DrawFn, steps: int) -> Graph:
    """A random graph: one or two inputs, then ``steps`` random ops on
    random earlier nodes (ops the builder refuses are tallied and skipped)."""
    b = GraphBuilder("fuzz", seed=d(st.integers(0, 99)))
    nodes = [b.input("x", d(st.sampled_from([(2, 3, 6, 6), (1, 4, 5, 7), (3, 8), (2, 4, 6)])))]
    if d(st.booleans()):
        nodes.append(b.input("idx", (d(st.integers(1, 3)), d(st.integers(1, 3))), "int64"))
    small = st.integers(1, 4)
    for _ in range(steps):
        x = d(st.sampled_from(nodes))
        s = b.shape(x)
        y = d(st.sampled_from([n for n in nodes if b.shape(n) == s] or [x]))
        op = d(st.sampled_from(["conv2d", "linear", "matmul", "embedding_bag", "eltwise", "add",
                                "mul", "concat", "pool2d", "global_avg_pool", "batch_norm",
                                "layer_norm", "softmax", "reshape", "transpose",
                                "tril_flatten"]))
        calls: dict[str, Callable[[], int]] = {
            "conv2d": lambda: b.conv2d(x, d(small), (d(small), d(small)), stride=d(small),
                                       padding=d(st.integers(0, 2)), dilation=d(st.integers(1, 2)),
                                       groups=d(st.sampled_from([1, 2, s[1] if len(s) > 1 else 1])),
                                       bias=d(st.booleans()), relu=d(st.booleans())),
            "linear": lambda: b.linear(x, d(st.integers(1, 9)), bias=d(st.booleans()),
                                       relu=d(st.booleans())),
            "matmul": lambda: b.matmul(x, y, trans_b=d(st.booleans())),
            "embedding_bag": lambda: b.embedding_bag(x, d(st.integers(1, 30)), d(small),
                                                     mode=d(st.sampled_from(["sum", "mean"]))),
            "eltwise": lambda: b.eltwise(x, d(st.sampled_from(["relu", "relu6", "sigmoid",
                                                               "tanh", "gelu", "swish",
                                                               "hardswish", "mish"]))),
            "add": lambda: b.add(x, y, relu=d(st.booleans())),
            "mul": lambda: b.mul(x, y),
            "concat": lambda: b.concat([x, y], axis=d(st.integers(-2, 3))),
            "pool2d": lambda: b.pool2d(x, d(st.sampled_from(["max", "avg"])), d(small),
                                       stride=d(st.sampled_from([None, 1, 2])),
                                       padding=d(st.integers(0, 1)), ceil_mode=d(st.booleans()),
                                       count_include_pad=d(st.booleans())),
            "global_avg_pool": lambda: b.global_avg_pool(x),
            "batch_norm": lambda: b.batch_norm(x, eps=d(st.sampled_from([1e-5, 1e-3])),
                                               scale=d(st.booleans())),
            "layer_norm": lambda: b.layer_norm(x),
            "softmax": lambda: b.softmax(x, axis=d(st.integers(-3, 3))),
            "reshape": lambda: b.reshape(x, (s[0], -1)),
            "transpose": lambda: b.transpose(x, d(st.permutations(range(len(s))))),
            "tril_flatten": lambda: b.tril_flatten(x),
        }
        made = attempt(f"builder/{op}", calls[op])
        if made is not None:
            nodes.append(made)
    consumed = {i for n in b._nodes for i in n.inputs}
    outputs = [n.id for n in b._nodes if n.id not in consumed]
    return b.build(outputs)


@st.composite
def run_settings(draw: st.DrawFn) -> Settings:
    scheduler = draw(st.sampled_from(["sync", "async"]))
    inter = 1 if scheduler == "sync" else draw(st.integers(1, 3))
    return Settings(scheduler=scheduler, inter_op=inter, intra_op=draw(st.integers(1, 3)),
                    operator=draw(st.sampled_from(["library", "framework"])),
                    library=draw(st.sampled_from(["onednn", "eigen", "blas"])),
                    pool=draw(st.sampled_from(["openmp", "std", "eigen"])),
                    affinity=draw(st.sampled_from(["none", "none", "compact", "scatter"])),
                    placement="per-socket" if inter > 1 and draw(st.booleans()) else "shared")


def check_against_reference(target: str, g: Graph, settings: Settings) -> None:
    cg = attempt(f"{target}/compile", lambda: compile_graph(g))
    if cg is None:
        return
    # Settings this machine cannot hold (more pinned threads than CPUs) are
    # a clear error; anything that runs must give the reference's answer.
    if attempt(f"{target}/run", lambda: cg.run(settings, repeats=1, warmup=0)) is None:
        return
    want = reference_forward(g, g.random_inputs(seed=0))
    got = cg.outputs()
    assert got.keys() == want.keys()
    for k in want:
        scale = max(1.0, float(np.abs(want[k]).max()))
        err = float(np.abs(got[k] - want[k]).max()) / scale
        assert err <= RTOL, f"{settings.label()}: output {k} off by {err:.3g}"


@given(st.data())
def test_fuzz_random_graphs_under_random_settings(data: st.DataObject) -> None:
    g = grow(data.draw, data.draw(st.integers(1, 7)))
    check_against_reference("graph", g, data.draw(run_settings()))


# ------------------------------------------------------------ hand-made graphs


def _mutate(d: st.DrawFn, g: Graph) -> tuple[str, Graph] | None:
    """One node of ``g`` changed behind the builder's back."""
    node = d(st.sampled_from(g.nodes))
    kind = d(st.sampled_from(["shape", "attr-drop", "attr-value", "param-shape", "param-drop",
                              "param-extra", "param-dict", "inputs", "op", "dtype"]))
    changes: dict[str, Any] = {}
    if kind == "shape":
        if not node.shape:
            return None
        i = d(st.integers(0, len(node.shape) - 1))
        delta = d(st.sampled_from([-1, 1, 7]))
        changes["shape"] = node.shape[:i] + (max(1, node.shape[i] + delta),) + node.shape[i + 1:]
    elif kind in ("attr-drop", "attr-value"):
        if not node.attrs:
            return None
        key = d(st.sampled_from(sorted(node.attrs)))
        attrs = dict(node.attrs)
        if kind == "attr-drop":
            del attrs[key]
        else:
            attrs[key] = d(st.sampled_from([0, -1, 2, 99, 1.5, "x", None, (1,), (0, 0),
                                            (2, 2, 2, 2), True]))
        changes["attrs"] = attrs
    elif kind.startswith("param"):
        specs = dict(node.params.specs)
        if kind == "param-extra":
            specs["extra"] = ParamSpec((3,), "normal", 0.0, 1.0)
        elif kind == "param-dict":  # arrays in a plain dict, not the IR's Params
            changes["params"] = dict(node.params.items())
        elif not specs:
            return None
        elif kind == "param-drop":
            specs.pop(d(st.sampled_from(sorted(specs))))
        else:
            name = d(st.sampled_from(sorted(specs)))
            shape = specs[name].shape
            specs[name] = dataclasses.replace(specs[name], shape=shape[:-1] + (shape[-1] + 1,))
        changes.setdefault("params", Params(specs, 0, node.id))
    elif kind == "inputs":
        if node.id == 0:
            return None
        changes["inputs"] = tuple(d(st.integers(0, node.id - 1)) for _ in range(
            d(st.integers(0, 3))))
    elif kind == "op":
        changes["op"] = d(st.sampled_from(["conv2d", "linear", "matmul", "add", "concat",
                                           "pool2d", "softmax", "reshape", "transpose",
                                           "tril_flatten", "embedding_bag", "input"]))
    else:
        changes["dtype"] = d(st.sampled_from(["int64", "float32", "float16"]))
    bad = dataclasses.replace(node, **changes)
    nodes = [bad if n.id == node.id else n for n in g.nodes]
    made = attempt("handmade/graph", lambda: Graph(g.name, nodes, g.outputs))
    return None if made is None else (kind, made)


@given(st.data())
def test_fuzz_hand_made_graphs(data: st.DataObject) -> None:
    g = grow(data.draw, data.draw(st.integers(1, 5)))
    mutated = _mutate(data.draw, g)
    if mutated is None:
        return
    kind, bad = mutated
    check_against_reference(f"handmade/{kind}", bad, data.draw(run_settings()))


def test_a_node_declaring_a_smaller_output_than_its_kernel_writes_is_refused() -> None:
    # A linear node that claims (4, 2) while its weight gives (4, 1000): the
    # kernel would write 4000 floats into a buffer of 8 (heap corruption).
    b = GraphBuilder("g")
    y = b.linear(b.input("x", (4, 8)), 1000)
    g = b.build(y)
    lie = dataclasses.replace(g.nodes[1], shape=(4, 2))
    bad = Graph("bad", [g.nodes[0], lie], [1])
    try:
        compile_graph(bad)
    except ValueError as e:
        assert "declares output (4, 2)" in str(e) and "(4, 1000)" in str(e)
    else:
        raise AssertionError("compile_graph took a node whose shape its kernel contradicts")


def test_an_int64_input_read_back_as_an_output() -> None:
    # Its 8-byte elements were copied into a float32 array of half the size
    # (heap corruption); an int64 input nothing indexes with broke
    # random_inputs (min() of nothing).
    b = GraphBuilder("g")
    idx = b.input("idx", (64, 64), "int64")
    spare = b.input("spare", (3, 2), "int64")
    e = b.embedding_bag(idx, 10, 4)
    g = b.build([e, idx, spare])
    cg = compile_graph(g)
    cg.run(repeats=1, warmup=0)
    inputs = g.random_inputs(seed=0)
    for _ in range(50):
        out = cg.outputs()
    assert out["idx"].dtype == np.int64 and np.array_equal(out["idx"], inputs["idx"])
    assert np.array_equal(out["spare"], np.zeros((3, 2), np.int64))


def test_a_node_with_too_few_inputs_or_no_weight_is_refused() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (2, 3, 5, 5))
    c = b.conv2d(x, 4, 3)
    g = b.build(c)
    no_inputs = dataclasses.replace(g.nodes[1], inputs=())
    no_weight = dataclasses.replace(g.nodes[1], params=Params({}, 0, 1))
    for node, match in ((no_inputs, "input"), (no_weight, "weight")):
        try:
            compile_graph(Graph("bad", [g.nodes[0], node], [0, 1]))
        except ValueError as e:
            assert match in str(e)
        else:
            raise AssertionError(f"compile_graph took {node}")


# ----------------------------------------------------------------- settings

VALUES: dict[str, Any] = {
    "scheduler": st.sampled_from(["sync", "async", "eager", 1, None]),
    "inter_op": st.sampled_from([1, 2, 3, 0, -1, 2.0, "2", True, 4097, 2**70]),
    "intra_op": st.sampled_from([1, 2, 3, 0, -2, 1.5, None, 4096, 4097]),
    "operator": st.sampled_from(["library", "framework", "both", 0]),
    "library": st.sampled_from(["onednn", "eigen", "blas", "mkl", b"blas"]),
    "pool": st.sampled_from(["openmp", "std", "eigen", "folly", []]),
    "affinity": st.sampled_from(["none", "compact", "scatter", "spread", ((0,),), ((0,), (1,)),
                                 ((0, 1),), [[0.5]], [[float("inf")]], [["a"]], [1, 2], 7,
                                 {"a": 1}, ((99999,),), ((-1,),)]),
    "smt": st.sampled_from([False, True, 1, "yes", None]),
    "instances": st.sampled_from([1, 2, 0, 3.0]),
    "placement": st.sampled_from(["shared", "per-socket", "numa"]),
    "omp_wait": st.sampled_from([None, "active", "passive", 0, 100, -1, "busy", 1.5, True]),
    "name": st.sampled_from(["", "intel", 3, None]),
}


@given(st.data())
def test_fuzz_settings_values(data: st.DataObject) -> None:
    # Any field value is taken or refused with ValueError / TypeError; what
    # is taken serialises, reads back equal, and (when small enough for this
    # machine) runs a graph to the reference's answer.
    fields = data.draw(st.sets(st.sampled_from(sorted(VALUES)), max_size=4))
    kw = {f: data.draw(VALUES[f]) for f in fields}
    s = attempt("settings", lambda: Settings(**kw))
    if s is None:
        return
    assert Settings.from_dict(s.as_dict()) == s
    assert isinstance(s.label(), str)
    if s.threads <= 4 and s.instances == 1:
        b = GraphBuilder("g")
        x = b.input("x", (2, 3, 6, 6))
        y = b.conv2d(b.conv2d(x, 4, 3, padding=1), 4, 1)
        g = b.build(b.concat([y, b.conv2d(x, 4, 3, padding=1)], axis=1))
        check_against_reference("settings/run", g, s)
