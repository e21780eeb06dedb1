"""graph.from_onnx: each op mapping against ONNX Runtime on small graphs made
with onnx.helper, small torch modules exported at test time, the one error
listing unsupported ops, and every bad file refused with one clear line."""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pyparbench.executor import compile_graph  # noqa: E402
from pyparbench.graph import Graph, from_onnx  # noqa: E402
from pyparbench.graph.passes import executed_graph  # noqa: E402
from pyparbench.reference import reference_forward  # noqa: E402
from pyparbench.settings import Settings  # noqa: E402

OPSET = 17
CNN_TOL = 1e-4
TRANSFORMER_TOL = 1e-3


def _rand(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    x = np.asarray(rng.uniform(-1.0, 1.0, size=shape) * scale, dtype=np.float32)
    x[x == 0] = 0.5 * scale
    return x


def _model(nodes: Sequence[Any], inputs: Sequence[Any], outputs: Sequence[Any],
           inits: Sequence[Any] = (), opset: int = OPSET) -> Any:
    g = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    # Outputs declared without a shape take the one shape inference gives.
    inferred = onnx.shape_inference.infer_shapes(m)
    for o, io in zip(m.graph.output, inferred.graph.output, strict=True):
        o.CopyFrom(io)
    return m


def _vi(name: str, shape: Sequence[int | str] | None, dtype: int = TensorProto.FLOAT) -> Any:
    return helper.make_tensor_value_info(name, dtype, None if shape is None else list(shape))


def _init(name: str, arr: np.ndarray) -> Any:
    return numpy_helper.from_array(arr, name)


def _feeds(graph: Graph, seed: int = 1) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Inputs for the graph, and the same for ORT in the file's shapes."""
    ins = graph.random_inputs(seed)
    shapes = graph.meta["onnx_input_shapes"]
    return ins, {k: v.reshape(shapes[k]) for k, v in ins.items()}


def check(model: Any, tol: float = CNN_TOL, batch: int | None = None) -> float:
    """Import ``model``, run it natively (default Settings: every pass) and
    with the numpy reference, compare both with ORT; the largest relative error."""
    graph = from_onnx(model, batch=batch)
    ins, ort_ins = _feeds(graph)
    data = model.SerializeToString() if not isinstance(model, (str, Path)) else \
        Path(model).read_bytes()
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    want = dict(zip(names, sess.run(None, ort_ins), strict=True))
    cg = compile_graph(graph)
    cg.set_inputs(ins)
    cg.run(repeats=1, warmup=0)
    got = cg.outputs()
    ref = reference_forward(graph, ins)
    worst = 0.0
    for name in names:
        w = want[name].astype(np.float64)
        scale = max(float(np.abs(w).max()), 1e-30)
        for label, y in (("native", got[name]), ("reference", ref[name])):
            assert y.shape == w.shape, (label, name, y.shape, w.shape)
            err = float(np.abs(y.astype(np.float64) - w).max()) / scale
            assert err <= tol, f"{label} {name}: max |{label} - ORT| / max |ORT| = {err:.3g}"
            if label == "native":
                worst = max(worst, err)
    return worst


# --------------------------------------------------------------- single ops


@pytest.mark.parametrize("kw", [
    dict(c=4, o=6, k=3, pads=[1, 1, 1, 1], strides=[1, 1], group=1, dil=[1, 1]),
    dict(c=4, o=6, k=3, pads=[0, 1, 2, 0], strides=[2, 1], group=2, dil=[1, 1]),
    dict(c=6, o=6, k=3, pads=[1, 1, 1, 1], strides=[2, 2], group=6, dil=[1, 1]),  # depthwise
    dict(c=3, o=5, k=3, pads=[2, 2, 2, 2], strides=[1, 1], group=1, dil=[2, 2]),
    dict(c=3, o=4, k=3, auto_pad="SAME_UPPER", strides=[2, 2], group=1, dil=[1, 1]),
    dict(c=3, o=4, k=2, auto_pad="SAME_LOWER", strides=[1, 1], group=1, dil=[1, 1]),
    dict(c=3, o=4, k=3, auto_pad="VALID", strides=[1, 2], group=1, dil=[1, 1], bias=False),
])
def test_conv(kw: dict[str, Any]) -> None:
    rng = np.random.default_rng(0)
    c, o, k = kw["c"], kw["o"], kw["k"]
    attrs: dict[str, Any] = dict(strides=kw["strides"], group=kw["group"], dilations=kw["dil"])
    if "pads" in kw:
        attrs["pads"] = kw["pads"]
    else:
        attrs["auto_pad"] = kw["auto_pad"]
    inits = [_init("w", _rand(rng, o, c // kw["group"], k, k))]
    ins = ["x", "w"]
    if kw.get("bias", True):
        inits.append(_init("b", _rand(rng, o)))
        ins.append("b")
    m = _model([helper.make_node("Conv", ins, ["y"], **attrs)], [_vi("x", ["N", c, 9, 10])],
               [_vi("y", None)], inits)
    check(m, batch=2)


@pytest.mark.parametrize("as_input", [True, False])
def test_zero_pad_folds_into_conv(as_input: bool) -> None:
    rng = np.random.default_rng(10)
    pads = np.array([0, 0, 1, 0, 0, 0, 2, 1], np.int64)
    pad = (helper.make_node("Pad", ["x", "pads"], ["p"]) if as_input
           else helper.make_node("Pad", ["x"], ["p"], pads=[int(v) for v in pads]))
    m = _model([pad, helper.make_node("Conv", ["p", "w"], ["y"], pads=[1, 0, 0, 1],
                                      strides=[2, 2])],
               [_vi("x", [2, 3, 9, 8])], [_vi("y", None)],
               [_init("w", _rand(rng, 4, 3, 3, 3))] + ([_init("pads", pads)] if as_input else []),
               opset=17 if as_input else 10)
    g = from_onnx(m)
    assert g.op_counts() == {"conv2d": 1, "input": 1}
    check(m)


def test_conv1d() -> None:
    rng = np.random.default_rng(1)
    m = _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 2], strides=[2])],
               [_vi("x", [2, 3, 11])], [_vi("y", None)],
               [_init("w", _rand(rng, 4, 3, 3)), _init("b", _rand(rng, 4))])
    check(m)


@pytest.mark.parametrize("alpha, beta, ta, tb, cshape", [
    (1.0, 1.0, 0, 0, (5,)), (0.5, 2.0, 0, 1, (1, 5)), (1.5, 0.5, 1, 1, ()),
    (1.0, 1.0, 1, 0, None),
])
def test_gemm(alpha: float, beta: float, ta: int, tb: int, cshape: tuple[int, ...] | None
              ) -> None:
    rng = np.random.default_rng(2)
    x = [3, 7] if not ta else [7, 3]
    bshape = (5, 7) if tb else (7, 5)
    inits = [_init("B", _rand(rng, *bshape))]
    ins = ["x", "B"]
    if cshape is not None:
        inits.append(_init("C", _rand(rng, *cshape)))
        ins.append("C")
    m = _model([helper.make_node("Gemm", ins, ["y"], alpha=alpha, beta=beta, transA=ta,
                                 transB=tb)], [_vi("x", x)], [_vi("y", None)],
               inits)
    check(m)


@pytest.mark.parametrize("xshape", [(4, 6), (2, 3, 6), (2, 2, 3, 6)])
def test_matmul_constant_weight_and_bias(xshape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(3)
    m = _model([helper.make_node("MatMul", ["x", "w"], ["t"]),
                helper.make_node("Add", ["t", "b"], ["y"])],
               [_vi("x", xshape)], [_vi("y", None)],
               [_init("w", _rand(rng, 6, 5)), _init("b", _rand(rng, 5))])
    g = from_onnx(m)
    assert g.op_counts().get("linear") == 1 and "batch_norm" not in g.op_counts()
    check(m)


@pytest.mark.parametrize("sa, sb", [((4, 6), (6, 3)), ((2, 4, 6), (2, 6, 3)),
                                    ((2, 3, 4, 6), (2, 3, 6, 5))])
def test_matmul_of_two_values(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    m = _model([helper.make_node("MatMul", ["a", "b"], ["y"])],
               [_vi("a", sa), _vi("b", sb)], [_vi("y", None)])
    check(m)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("cshape", [(), (1,), (3, 1, 1), (1, 3, 1, 1), (5,), (4, 5),
                                    (3, 4, 5), (2, 3, 4, 5)])
def test_binary_with_a_constant(op: str, cshape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(4)
    c = _rand(rng, *cshape) + np.float32(2.0 if op == "Div" else 0.0)
    m = _model([helper.make_node(op, ["x", "c"], ["y"])], [_vi("x", [2, 3, 4, 5])],
               [_vi("y", None)], [_init("c", np.asarray(c, np.float32))])
    check(m)
    if op != "Div":  # the constant first
        m = _model([helper.make_node(op, ["c", "x"], ["y"])], [_vi("x", [2, 3, 4, 5])],
                   [_vi("y", None)], [_init("c", np.asarray(c, np.float32))])
        check(m)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("sa, sb", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (3, 1)),
                                    ((2, 3, 1, 1), (2, 3, 4, 5)), ((2, 3, 4), (4,))])
def test_binary_of_two_values(op: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    m = _model([helper.make_node(op, ["a", "b"], ["y"])], [_vi("a", sa), _vi("b", sb)],
               [_vi("y", None)])
    check(m)


@pytest.mark.parametrize("op, attrs, extra", [
    ("Relu", {}, []), ("Sigmoid", {}, []), ("Tanh", {}, []), ("Gelu", {}, []),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, []), ("HardSwish", {}, []),
    ("Clip", {}, [0.0, 6.0]), ("Clip", {}, [0.0, None]),
])
def test_activations(op: str, attrs: dict[str, Any], extra: list[float | None]) -> None:
    ins, inits = ["x"], []
    for name, v in zip(("lo", "hi"), extra, strict=False):
        if v is None:
            ins.append("")
        else:
            ins.append(name)
            inits.append(_init(name, np.array(v, np.float32)))
    m = _model([helper.make_node(op, ins, ["y"], **attrs)], [_vi("x", [2, 3, 4, 5])],
               [_vi("y", None)], inits, opset=20 if op == "Gelu" else OPSET)
    # Values beyond 6 so that ReLU6 clips.
    g = from_onnx(m)
    ins_ = {k: v * np.float32(8.0) for k, v in g.random_inputs(1).items()}
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, ins_)
    cg = compile_graph(g)
    cg.set_inputs(ins_)
    cg.run(repeats=1, warmup=0)
    got = cg.outputs()["y"]
    ref = reference_forward(g, ins_)["y"]
    scale = float(np.abs(want).max())
    assert float(np.abs(got - want).max()) / scale <= CNN_TOL
    assert float(np.abs(ref - want).max()) / scale <= CNN_TOL


@pytest.mark.parametrize("gate, kind", [("Sigmoid", "swish"), ("HardSigmoid", "hardswish"),
                                        ("HardSwish", "hardswish")])
def test_a_value_gated_by_itself_is_one_kernel_fused_into_the_conv(gate: str, kind: str
                                                                   ) -> None:
    """x * Sigmoid(x) (SiLU as exporters write it), x * HardSigmoid(x) with
    HardSwish's constants, and HardSwish itself: one eltwise node, which the
    activation pass fuses into the conv before it."""
    rng = np.random.default_rng(21)
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])
    attrs = {"alpha": 1 / 6, "beta": 0.5} if gate == "HardSigmoid" else {}
    if gate == "HardSwish":
        act = [helper.make_node("HardSwish", ["c"], ["y"])]
    else:
        act = [helper.make_node(gate, ["c"], ["g"], **attrs),
               helper.make_node("Mul", ["g", "c"], ["y"])]  # the gate first: either order
    m = _model([conv, *act], [_vi("x", [2, 3, 6, 5])], [_vi("y", None)],
               [_init("w", _rand(rng, 4, 3, 3, 3) * np.float32(2.0)), _init("b", _rand(rng, 4))])
    g = from_onnx(m)
    assert g.op_counts() == {"input": 1, "conv2d": 1, "eltwise": 1}
    assert [n.attrs["kind"] for n in g.nodes if n.op == "eltwise"] == [kind]
    fused = executed_graph(g, Settings())
    assert fused.op_counts().get("eltwise") is None
    assert [n.attrs.get("activation") for n in fused.nodes if n.op == "conv2d"] == [kind]
    check(m)


def test_a_gate_read_twice_stays_apart() -> None:
    """A sigmoid whose output something else reads too is no SiLU."""
    m = _model([helper.make_node("Sigmoid", ["x"], ["g"]),
                helper.make_node("Mul", ["x", "g"], ["y"]),
                helper.make_node("Add", ["g", "y"], ["z"])],
               [_vi("x", [2, 3, 4, 5])], [_vi("z", None)])
    g = from_onnx(m)
    assert [n.attrs["kind"] for n in g.nodes if n.op == "eltwise"] == ["sigmoid"]
    check(m)


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 1], ceil_mode=1)),
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
])
def test_pooling(op: str, attrs: dict[str, Any]) -> None:
    m = _model([helper.make_node(op, ["x"], ["y"], **attrs)], [_vi("x", [2, 3, 9, 8])],
               [_vi("y", None)])
    check(m)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "ReduceMean"])
def test_global_pooling(op: str) -> None:
    ins, inits = ["x"], []
    if op == "ReduceMean":
        ins.append("axes")
        inits.append(_init("axes", np.array([-1, 2], np.int64)))
    m = _model([helper.make_node(op, ins, ["y"])], [_vi("x", [2, 3, 5, 4])], [_vi("y", None)],
               inits, opset=18)
    check(m)


@pytest.mark.parametrize("half_first", [False, True])
def test_erf_gelu_is_one_gelu(half_first: bool) -> None:
    """x * 0.5 * (1 + erf(x / sqrt 2)) in either order of the products."""
    nodes = [helper.make_node("Mul", ["x", "inv_sqrt2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["one", "e"], ["a"])]
    if half_first:
        nodes += [helper.make_node("Mul", ["x", "half"], ["h"]),
                  helper.make_node("Mul", ["h", "a"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"]),
                  helper.make_node("Mul", ["m", "half"], ["y"])]
    m = _model(nodes, [_vi("x", [2, 3, 4])], [_vi("y", None)],
               [_init("inv_sqrt2", np.array(2 ** -0.5, np.float32)),
                _init("one", np.array(1.0, np.float32)), _init("half", np.array(0.5, np.float32))])
    assert from_onnx(m).op_counts() == {"eltwise": 1, "input": 1}
    check(m)


def test_batch_and_layer_norm() -> None:
    rng = np.random.default_rng(5)
    m = _model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["t"],
                                 epsilon=1e-3),
                helper.make_node("Reshape", ["t", "shape"], ["r"]),
                helper.make_node("LayerNormalization", ["r", "g", "beta"], ["y"], axis=-1,
                                 epsilon=1e-5)],
               [_vi("x", [2, 4, 3, 5])], [_vi("y", None)],
               [_init("s", _rand(rng, 4)), _init("b", _rand(rng, 4)), _init("m", _rand(rng, 4)),
                _init("v", np.abs(_rand(rng, 4)) + 0.5), _init("g", _rand(rng, 15)),
                _init("beta", _rand(rng, 15)), _init("shape", np.array([0, 4, -1], np.int64))])
    check(m)


@pytest.mark.parametrize("axis, opset", [(-1, 17), (1, 17), (0, 17), (1, 11), (-1, 11)])
def test_softmax(axis: int, opset: int) -> None:
    m = _model([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], [_vi("x", [2, 3, 4])],
               [_vi("y", None)], opset=opset)
    check(m)


def test_views_transpose_concat() -> None:
    m = _model([
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Flatten", ["t"], ["f"], axis=2),
        helper.make_node("Unsqueeze", ["f", "ax"], ["u"]),
        helper.make_node("Squeeze", ["u", "ax"], ["s"]),
        helper.make_node("Transpose", ["s"], ["s2"]),
        helper.make_node("Identity", ["s2"], ["i"]),
        helper.make_node("Dropout", ["i"], ["d"]),
        helper.make_node("Concat", ["d", "d"], ["y"], axis=-2),
    ], [_vi("x", [2, 3, 4, 5])], [_vi("y", None)],
        [_init("ax", np.array([-1], np.int64))])
    check(m)


@pytest.mark.parametrize("shape, axis, sizes, opset", [
    ((1, 8, 5, 5), 1, None, 13),       # batch 1, channels: views of rows
    ((2, 8, 5, 5), 1, [2, 6], 13),     # batch 2: between transposes
    ((2, 8, 5, 6), -1, [1, 2, 3], 13),
    ((3, 4, 6), 2, None, 18),          # opset 18: num_outputs
])
def test_split(shape: tuple[int, ...], axis: int, sizes: list[int] | None, opset: int) -> None:
    parts = len(sizes) if sizes else 2
    outs = [f"y{i}" for i in range(parts)]
    ins = ["x", "sizes"] if sizes else ["x"]
    attrs: dict[str, Any] = {"axis": axis}
    if sizes is None and opset >= 18:
        attrs["num_outputs"] = parts
    # Each part goes on through a node of its own, as a network uses it.
    nodes = [helper.make_node("Split", ins, outs, **attrs)] + [
        helper.make_node("Relu" if i % 2 else "Sigmoid", [o], [f"z{i}"])
        for i, o in enumerate(outs)]
    inits = [_init("sizes", np.array(sizes, np.int64))] if sizes else []
    m = _model(nodes, [_vi("x", list(shape))], [_vi(f"z{i}", None) for i in range(parts)],
               inits, opset=opset)
    check(m)
    ops = [n.op for n in from_onnx(m).nodes]
    assert ops.count("slice") == parts
    # Where every axis before the split one has size 1, the parts are views.
    assert ("transpose" in ops) == (math.prod(shape[:axis % len(shape)]) > 1)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([0], [3], [1], None),             # channels 0-2 of batch 2: transposes
    ([1], [-1], [-1], [1]),            # last axis, a negative end
    ([0, 2], [2, 100], [0, 2], None),  # every row (no cut), then H from 2 to the end
    ([1], [2], [0], None),             # one row of the batch: a view
    ([0, 1], [2, 3], [1, 2], None),    # two axes, one after the other
    ([0, 1], [100, 100], [2, 3], [2, 2]),  # a patch merge's x[..., 0::2, 1::2]
    ([1], [5], [-1], [3]),             # step 3 from 1: columns 1 and 4
    ([0], [5], [2], [2]),              # step 2 over an odd axis: 0, 2, 4
])
def test_slice(starts: list[int], ends: list[int], axes: list[int],
               steps: list[int] | None) -> None:
    extra = [_init("st", np.array(steps, np.int64))] if steps else []
    m = _model([helper.make_node("Slice", ["x", "s", "e", "a"] + (["st"] if steps else []),
                                 ["t"]),
                helper.make_node("Relu", ["t"], ["y"])],
               [_vi("x", [2, 4, 5, 6])], [_vi("y", None)],
               [_init("s", np.array(starts, np.int64)), _init("e", np.array(ends, np.int64)),
                _init("a", np.array(axes, np.int64)), *extra])
    check(m)


@pytest.mark.parametrize("starts, ends, axes, steps, why", [
    ([3], [0], [1], [-1], "a step of -1 on axis 1"),
])
def test_slices_that_do_not_map(starts: list[int], ends: list[int], axes: list[int],
                                steps: list[int], why: str) -> None:
    m = _model([helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"], name="/cut")],
               [_vi("x", [2, 4, 5, 6])], [_vi("y", None)],
               [_init("s", np.array(starts, np.int64)), _init("e", np.array(ends, np.int64)),
                _init("a", np.array(axes, np.int64)), _init("st", np.array(steps, np.int64))])
    with pytest.raises(ValueError, match=rf"Slice x1 \(node '/cut': {why}"):
        from_onnx(m)


def test_a_constant_read_twice_by_one_node_is_folded() -> None:
    # starts and axes are one initializer: the Slice still folds at import.
    table = _rand(np.random.default_rng(2), 6, 4)
    m = _model([helper.make_node("Slice", ["t", "zero", "three", "zero"], ["c"]),
                helper.make_node("Add", ["x", "c"], ["y"])],
               [_vi("x", [3, 4])], [_vi("y", None)],
               [_init("t", table), _init("zero", np.array([0], np.int64)),
                _init("three", np.array([3], np.int64))])
    check(m)
    assert from_onnx(m).op_counts().get("constant", 0) == 0


@pytest.mark.parametrize("pads, value, axes, opset", [
    ([0, 0, 0, 0, 0, 0, 0, 0], None, None, OPSET),  # a window padding of nothing: a view
    ([0, 0, 1, 2, 0, 0, 3, 0], None, None, OPSET),  # H and W, before and after
    ([0, 2, 0, 0, 0, 1, 0, 0], 0.5, None, OPSET),   # channels, with a value
    ([1, 2], -1.0, [-1], 18),                       # the axes input: the last axis
    ([0, 0, 2, 1, 0, 0, 0, 1], 0.25, None, 10),     # pads and value as attributes
])
def test_pad(pads: list[int], value: float | None, axes: list[int] | None, opset: int) -> None:
    if opset < 11:
        node = helper.make_node("Pad", ["x"], ["p"], pads=pads, value=value or 0.0)
        inits = []
    else:
        names = ["x", "pads", "v" if value is not None else "", "ax" if axes else ""]
        node = helper.make_node("Pad", names[:4 if axes else 3 if value is not None else 2],
                                ["p"])
        inits = [_init("pads", np.array(pads, np.int64))]
        if value is not None:
            inits.append(_init("v", np.array(value, np.float32)))
        if axes:
            inits.append(_init("ax", np.array(axes, np.int64)))
    m = _model([node, helper.make_node("Sigmoid", ["p"], ["y"])], [_vi("x", [2, 3, 4, 5])],
               [_vi("y", None)], inits, opset=opset)
    check(m)
    if not any(pads):
        assert from_onnx(m).op_counts().get("concat", 0) == 0


@pytest.mark.parametrize("mode, pads, why", [
    ("reflect", [0, 0, 1, 1, 0, 0, 1, 1], "mode 'reflect'"),
    ("constant", [0, 0, -1, 0, 0, 0, 0, 0], "a negative pad"),
    ("constant", [0, 0, 0, 0, 0, 0, 1 << 40, 0], r"a pad to \(2, 3, 1099511627780, 5\)"),
])
def test_pads_that_do_not_map(mode: str, pads: list[int], why: str) -> None:
    m = _model([helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode, name="/pad")],
               [_vi("x", [2, 3, 4, 5])], [_vi("y", None)],
               [_init("pads", np.array(pads, np.int64))])
    with pytest.raises(ValueError, match=rf"Pad x1 \(node '/pad': {why}"):
        from_onnx(m)


@pytest.mark.parametrize("shape, axis, idx", [
    ((2, 5, 4), 1, np.array(0)),                       # x[:, 0] (a class token)
    ((2, 5, 4), -2, np.array([-3, -2])),               # negative indices in a row
    ((1, 6, 1, 1), 0, np.arange(6).reshape(1, 6, 1, 1)),  # as_strided of a flat view
])
def test_gather_of_a_value_by_a_range(shape: tuple[int, ...], axis: int,
                                      idx: np.ndarray) -> None:
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"])]
    src = "s"
    if idx.ndim == 4:  # the exporter flattens first
        nodes.append(helper.make_node("Reshape", ["s", "flat"], ["f"]))
        src = "f"
    nodes += [helper.make_node("Gather", [src, "i"], ["g"], axis=axis),
              helper.make_node("Relu", ["g"], ["y"])]
    inits = [_init("i", idx.astype(np.int64))]
    if idx.ndim == 4:
        inits.append(_init("flat", np.array([-1], np.int64)))
    check(_model(nodes, [_vi("x", list(shape))], [_vi("y", None)], inits))


def test_gather_of_a_value_out_of_order_is_refused() -> None:
    m = _model([helper.make_node("Sigmoid", ["x"], ["s"]),
                helper.make_node("Gather", ["s", "i"], ["y"], axis=1, name="/pick")],
               [_vi("x", [2, 5])], [_vi("y", None)], [_init("i", np.array([2, 0], np.int64))])
    with pytest.raises(ValueError, match=r"Gather x1 \(node '/pick': indices that do not run"):
        from_onnx(m)


def test_shape_arithmetic_is_folded() -> None:
    """Reshape to (batch, -1) computed from Shape / Gather / Unsqueeze / Concat /
    ConstantOfShape / Equal / Where / Cast / Range, as exporters write it."""
    nodes = [
        helper.make_node("Shape", ["x"], ["sh"]),
        helper.make_node("Gather", ["sh", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("ConstantOfShape", ["one"], ["m1"],
                         value=helper.make_tensor("v", TensorProto.INT64, [1], [-1])),
        helper.make_node("Concat", ["n1", "m1"], ["shape0"], axis=0),
        helper.make_node("Equal", ["shape0", "zero2"], ["eq"]),
        helper.make_node("Where", ["eq", "ones2", "shape0"], ["shape"]),
        helper.make_node("Cast", ["shape"], ["shape_i"], to=TensorProto.INT64),
        helper.make_node("Range", ["zero_s", "two_s", "one_s"], ["rng"]),
        helper.make_node("Reshape", ["x", "shape_i"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    inits = [_init("zero", np.array(0, np.int64)), _init("ax0", np.array([0], np.int64)),
             _init("one", np.array([1], np.int64)), _init("zero2", np.zeros(2, np.int64)),
             _init("ones2", np.ones(2, np.int64)), _init("zero_s", np.array(0, np.int64)),
             _init("two_s", np.array(2, np.int64)), _init("one_s", np.array(1, np.int64))]
    m = _model(nodes, [_vi("x", ["batch", 3, 4])], [_vi("y", None)], inits)
    g = from_onnx(m, batch=3)
    assert g.op_counts() == {"eltwise": 1, "input": 1, "reshape": 1}
    assert g["y"].shape == (3, 12)
    check(m, batch=3)


def test_embedding_lookup() -> None:
    rng = np.random.default_rng(6)
    m = _model([helper.make_node("Gather", ["table", "ids"], ["e"], axis=0),
                helper.make_node("LayerNormalization", ["e", "g", "b"], ["y"])],
               [_vi("ids", ["B", 5], TensorProto.INT64)], [_vi("y", None)],
               [_init("table", _rand(rng, 11, 8)), _init("g", _rand(rng, 8)),
                _init("b", _rand(rng, 8))])
    g = from_onnx(m, batch=2)
    # The file's input as it is (int64 (2, 5)), viewed as (10, 1) indices inside.
    assert g["ids"].shape == (2, 5) and g["ids"].dtype == "int64"
    assert g.meta["onnx_input_shapes"]["ids"] == [2, 5]
    assert g.op_counts()["reshape"] >= 1
    check(m, TRANSFORMER_TOL, batch=2)


# ------------------------------------------------------------ torch modules


torch = pytest.importorskip("torch")


def _export(module: Any, *args: Any, dynamic_batch: bool = True) -> Any:
    module.eval()
    buf = io.BytesIO()
    names = [f"in{i}" for i in range(len(args))]
    dyn = {n: {0: "batch"} for n in names} if dynamic_batch else None
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(args), buf, input_names=names, output_names=["out"],
                          dynamic_axes=dyn, opset_version=17, dynamo=False)
    return onnx.load_model_from_string(buf.getvalue())


class _Residual(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.c1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 10)
        for bn in (self.b1, self.b2):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: Any) -> Any:
        x = self.stem(x)
        y = torch.relu(self.b1(self.c1(x)))
        y = torch.relu(self.b2(self.c2(y)) + x)
        return self.head(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


class _SqueezeExcite(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.conv = nn.Conv2d(4, 16, 3, padding=1)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.fc1 = nn.Conv2d(16, 4, 1)
        self.fc2 = nn.Conv2d(4, 16, 1)
        self.act = nn.Hardswish()

    def forward(self, x: Any) -> Any:
        x = self.act(self.dw(torch.nn.functional.relu6(self.conv(x))))
        s = x.mean((2, 3), keepdim=True)
        s = torch.sigmoid(self.fc2(torch.nn.functional.silu(self.fc1(s))))
        return x * s


class _MLP(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 5),
                                 nn.Softmax(dim=-1))

    def forward(self, x: Any) -> Any:
        return self.net(x)


class _Attention(torch.nn.Module):  # type: ignore[misc]
    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        nn = torch.nn
        self.heads = heads
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: Any) -> Any:
        b, s, d = x.shape
        h = self.heads
        t = self.ln1(x)
        q, k, v = (f(t).reshape(b, s, h, d // h).transpose(1, 2)
                   for f in (self.q, self.k, self.v))
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // h) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.ff(self.ln2(x))


class _ClassToken(torch.nn.Module):  # type: ignore[misc]
    """A vision transformer's front: patches, a learned class token
    concatenated before them (a constant of the file that is data, not an
    op's weight), position embeddings, one encoder block, the token's row."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        nn = torch.nn
        self.patches = nn.Conv2d(3, d, 4, stride=4)
        self.token = nn.Parameter(torch.randn(1, 1, d))
        self.position = nn.Parameter(torch.randn(1, 17, d) * 0.1)
        self.block = _Attention(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x: Any) -> Any:
        p = self.patches(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.token.expand(x.shape[0], -1, -1), p], dim=1) + self.position
        return self.head(self.block(t)[:, 0])


@pytest.mark.parametrize("make, shape, tol", [
    (_Residual, (1, 3, 32, 32), CNN_TOL),
    (_SqueezeExcite, (1, 4, 12, 12), CNN_TOL),
    (_MLP, (1, 20), CNN_TOL),
    (_Attention, (1, 6, 32), TRANSFORMER_TOL),
    (_ClassToken, (1, 3, 16, 16), TRANSFORMER_TOL),
], ids=["residual", "squeeze_excite", "mlp", "attention", "class_token"])
def test_torch_module(make: Any, shape: tuple[int, ...], tol: float, capsys: Any) -> None:
    torch.manual_seed(0)
    m = _export(make(), torch.randn(*shape))
    if make is _Attention:  # the exporter's erf form of GELU is one gelu
        assert from_onnx(m).op_counts()["eltwise"] == 1
    for batch in (None, 3):
        err = check(m, tol, batch=batch)
        with capsys.disabled():
            print(f"\n{make.__name__} batch={batch}: max |native - ORT| / max |ORT| = "
                  f"{err:.2e}")


def test_a_constant_read_as_data_keeps_its_value_run_after_run() -> None:
    torch.manual_seed(1)
    m = _export(_ClassToken(), torch.randn(2, 3, 16, 16))
    graph = from_onnx(m, batch=2)
    token = [n for n in graph.nodes if n.op == "constant"]
    assert [n.shape for n in token] == [(2, 1, 32)]
    ins, ort_ins = _feeds(graph)
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, ort_ins)[0]
    cg = compile_graph(graph)
    cg.set_inputs(ins)
    for threads in (1, 2, 1):
        cg.run(Settings(intra_op=threads), repeats=3, warmup=1)
        got = cg.outputs()["out"]
        err = float(np.abs(got - want).max()) / float(np.abs(want).max())
        assert err <= TRANSFORMER_TOL, (threads, err)
    # The token is the file's own, not a seeded random one.
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for row in np.asarray(token[0].params["value"]):
        np.testing.assert_array_equal(row, inits["token"][0])


def test_a_constant_image_joins_a_channels_last_concat() -> None:
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "c"], ["b"], axis=1),
             helper.make_node("Conv", ["b", "w2"], ["y"], pads=[1, 1, 1, 1])]
    m = _model(nodes, [_vi("x", [1, 3, 8, 8])], [_vi("y", None)],
               [_init("w1", _rand(rng, 8, 3, 3, 3)), _init("c", _rand(rng, 1, 4, 8, 8)),
                _init("w2", _rand(rng, 8, 12, 3, 3))])
    check(m)
    run = executed_graph(from_onnx(m), Settings())
    cat = next(n for n in run.nodes if n.op == "concat")
    # Stored channels-last like the conv it joins: the constant is reordered to it.
    assert cat.attrs.get("layout") == "nhwc"
    assert [run[i].op for i in cat.inputs] == ["conv2d", "reorder"]


def test_file_batch_and_name(tmp_path: Path) -> None:
    torch.manual_seed(0)
    m = _export(_MLP(), torch.randn(1, 20))
    path = tmp_path / "my_mlp.onnx"
    path.write_bytes(m.SerializeToString())
    g = from_onnx(path, batch=4)
    assert g.name == "my_mlp" and g.meta["batch"] == 4 and g["in0"].shape == (4, 20)
    assert g.meta["source"] == "my_mlp.onnx" and len(g.meta["sha256"]) == 64
    check(path, batch=4)
    fixed = _export(_MLP(), torch.randn(2, 20), dynamic_batch=False)
    assert from_onnx(fixed)["in0"].shape == (2, 20)
    with pytest.raises(ValueError, match="fixed batch of 2, not the batch=3"):
        from_onnx(fixed, batch=3)


# ------------------------------------------------------------------ refusals


def test_unsupported_ops_are_listed_once() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="/relu"),
        helper.make_node("Sin", ["a"], ["b"], name="/sin_0"),
        helper.make_node("Cos", ["b"], ["c"], name="/cos"),
        helper.make_node("Sin", ["c"], ["d"], name="/sin_1"),
        helper.make_node("Clip", ["d", "lo", "hi"], ["e"], name="/clip"),
        helper.make_node("Relu", ["e"], ["y"], name="/relu2"),
        helper.make_node("Abs", ["x"], ["z"], name="/abs"),
    ]
    m = _model(nodes, [_vi("x", [2, 3])], [_vi("y", None), _vi("z", None)],
               [_init("lo", np.array(-1, np.float32)), _init("hi", np.array(1, np.float32))])
    with pytest.raises(ValueError) as e:
        from_onnx(m)
    msg = str(e.value)
    assert "unsupported ONNX ops: Sin x2 (node '/sin_0'), Cos x1 (node '/cos')" in msg
    assert "Abs x1 (node '/abs')" in msg
    assert "Relu" not in msg and "\n" not in msg
    # A supported op used in a way the IR lacks is listed with why.
    m = _model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="/clip")],
               [_vi("x", [2, 3])], [_vi("y", None)],
               [_init("lo", np.array(-1, np.float32)), _init("hi", np.array(1, np.float32))])
    with pytest.raises(ValueError, match=r"Clip x1 \(node '/clip': Clip to \[-1.0, 1.0\]"):
        from_onnx(m)


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _conv_model(rng: np.random.Generator, dtype: Any = np.float32) -> Any:
    w = _rand(rng, 64, 3, 3, 3).astype(dtype)
    t = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    return _model([helper.make_node("Conv", ["x", "w"], ["y"])], [_vi("x", [1, 3, 8, 8], t)],
                  [_vi("y", None, t)], [_init("w", w)])


def test_bad_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    good = _conv_model(rng).SerializeToString()
    cases = {
        "not ONNX": (_write(tmp_path, "a.onnx", b"this is not a model at all\n" * 10), {},
                     "not an ONNX model|not a valid ONNX model"),
        "empty": (_write(tmp_path, "b.onnx", b""), {}, "empty"),
        "truncated": (_write(tmp_path, "c.onnx", good[: len(good) // 2]), {},
                      "truncated"),
        "missing": (tmp_path / "nope.onnx", {}, "no such file"),
        "too big": (_write(tmp_path, "d.onnx", good), {"max_bytes": 100},
                    "more than max_bytes=100"),
        "float64": (_write(tmp_path, "e.onnx", _conv_model(rng, np.float64)
                           .SerializeToString()), {}, "compute dtype must be float32"),
    }
    for what, (path, kw, match) in cases.items():
        with pytest.raises(ValueError, match=match) as e:
            from_onnx(path, **kw)
        assert str(path.name) in str(e.value), what
        assert "\n" not in str(e.value), what


def test_non_finite_weights_are_refused() -> None:
    rng = np.random.default_rng(0)
    m = _conv_model(rng)
    w = numpy_helper.to_array(m.graph.initializer[0]).copy()
    w[0, 0, 0, :2] = (np.nan, np.inf)
    m.graph.initializer[0].CopyFrom(_init("w", w))
    with pytest.raises(ValueError, match=r"initializer 'w' has 2 NaN or infinite value\(s\) "
                                         r"of 1728"):
        from_onnx(m)


def test_geometry_beyond_any_network_is_refused_before_shape_inference() -> None:
    # onnx's shape inference aborts the process on this one (found by fuzzing).
    m = _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2],
                                 dilations=[1 << 40, 3], name="/pool")],
               [_vi("x", [1, 3, 8, 8])], [_vi("y", [1, 3, 7, 7])])
    with pytest.raises(ValueError, match=r"node '/pool' \(MaxPool\) has dilations "
                                         r"\[1099511627776, 3\]: beyond 16777216"):
        from_onnx(m)


def test_missing_external_data(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    m = _conv_model(rng)
    path = tmp_path / "ext.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.data", size_threshold=0)
    g = from_onnx(path)  # with its data it imports
    assert g.num_params == 64 * 27
    (tmp_path / "ext.data").unlink()
    with pytest.raises(ValueError, match="external data of tensor 'w' is missing"):
        from_onnx(path)


def test_hostile_constant_is_refused_not_folded() -> None:
    """A ConstantOfShape of 10^15 elements is listed, never allocated."""
    m = _model([helper.make_node("ConstantOfShape", ["shape"], ["c"], name="/huge"),
                helper.make_node("Add", ["x", "c"], ["y"])],
               [_vi("x", [1, 1])], [_vi("y", None)],
               [_init("shape", np.array([10 ** 5, 10 ** 10], np.int64))])
    with pytest.raises(ValueError, match=r"ConstantOfShape x1 \(node '/huge': a constant of"):
        from_onnx(m)


def test_bad_arguments() -> None:
    m = _conv_model(np.random.default_rng(9))
    with pytest.raises(ValueError, match="batch must be an int >= 1"):
        from_onnx(m, batch=0)
    m2 = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", ["N", "S"])],
                [_vi("y", None)])
    with pytest.raises(ValueError, match="symbolic dimension 'S' at axis 1"):
        from_onnx(m2)


def _saved(tmp_path: Path, name: str, nodes: Sequence[Any], inputs: Sequence[Any],
           outputs: Sequence[Any], inits: Sequence[Any] = (),
           opsets: Sequence[tuple[str, int]] = (("", OPSET),)) -> Path:
    """A model written as a file, its outputs' shapes given (not inferred)."""
    g = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 8
    path = tmp_path / name
    onnx.save_model(m, str(path))
    return path


@pytest.mark.parametrize("weight_from", ["initializer", "Constant node"])
def test_a_kernel_shape_that_contradicts_the_weights_is_refused(tmp_path: Path,
                                                                weight_from: str) -> None:
    w = _rand(np.random.default_rng(10), 4, 3, 3, 3)
    if weight_from == "initializer":
        inits, source = [_init("w", w)], []
    else:
        inits, source = [], [helper.make_node("Constant", [], ["w"],
                                              value=numpy_helper.from_array(w, "w"))]

    def conv_file(name: str, kernel: list[int]) -> Path:
        return _saved(tmp_path, name,
                      [*source, helper.make_node("Conv", ["x", "w"], ["y"], name="/conv",
                                                 kernel_shape=kernel)],
                      [_vi("x", [1, 3, 8, 8])], [_vi("y", [1, 4, 6, 6])], inits)

    assert from_onnx(conv_file("agrees.onnx", [3, 3]))["y"].shape == (1, 4, 6, 6)
    path = conv_file("contradicts.onnx", [99, 99])
    with pytest.raises(ValueError) as e:
        from_onnx(path)
    assert str(e.value) == (f"ONNX file {str(path)!r}: node '/conv' (Conv) has kernel_shape "
                            "[99, 99], but its weights 'w' have shape (4, 3, 3, 3): a kernel "
                            "of (3, 3)")


def test_a_kernel_shape_that_contradicts_computed_weights_is_refused(tmp_path: Path) -> None:
    # The weights reach the Conv through an op folded at import: the Conv's
    # converter compares them.
    w = _rand(np.random.default_rng(11), 4, 3, 3, 3)
    path = _saved(tmp_path, "computed.onnx",
                  [helper.make_node("Identity", ["w0"], ["w"]),
                   helper.make_node("Conv", ["x", "w"], ["y"], name="/conv",
                                    kernel_shape=[99, 99])],
                  [_vi("x", [1, 3, 8, 8])], [_vi("y", [1, 4, 6, 6])], [_init("w0", w)])
    with pytest.raises(ValueError, match=r"Conv x1 \(node '/conv': kernel_shape \[99, 99\] "
                                         r"contradicts the weights' shape \(4, 3, 3, 3\)\)"):
        from_onnx(path)


def test_an_opset_newer_than_onnx_knows_is_refused_with_both_numbers(tmp_path: Path) -> None:
    newest = onnx.defs.onnx_opset_version()

    def relu_file(name: str, opset: int) -> Path:
        return _saved(tmp_path, name, [helper.make_node("Relu", ["x"], ["y"])],
                      [_vi("x", [2, 3])], [_vi("y", [2, 3])], opsets=[("", opset)])

    assert from_onnx(relu_file("newest.onnx", newest)).meta["opset"] == newest
    path = relu_file("future.onnx", 999)
    with pytest.raises(ValueError) as e:
        from_onnx(path)
    assert str(e.value).startswith(f"ONNX file {str(path)!r}: opset 999 is newer than opset "
                                   f"{newest}, the newest the installed onnx "
                                   f"{onnx.__version__} knows")
    assert "\n" not in str(e.value)


def test_an_op_of_another_domain_is_refused_by_name(tmp_path: Path) -> None:
    path = _saved(tmp_path, "contrib.onnx",
                  [helper.make_node("FusedMatMul", ["x", "x"], ["y"], name="/fused",
                                    domain="com.microsoft")],
                  [_vi("x", [3, 3])], [_vi("y", [3, 3])],
                  opsets=[("", OPSET), ("com.microsoft", 1)])
    with pytest.raises(ValueError, match=r": unsupported ONNX ops: FusedMatMul x1 \(node "
                                         r"'/fused': domain 'com.microsoft'\)$"):
        from_onnx(path)
