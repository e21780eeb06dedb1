"""Fuzzing the ONNX importer with hostile files (``pyparbench.graph.from_onnx``).

A valid small network (convolution, pooling, a residual add, Split, a
strided Slice, Pad, Concat, Reshape, Transpose, Gemm, Softmax) is damaged two ways:

* as bytes: cut short, bytes flipped, junk spliced in, so the protobuf
  itself is broken or says something else;
* as a model: an attribute, an input shape, an initializer or a node's
  wiring set to a hostile value (huge or negative dims, zero strides,
  kernels larger than the image, permutations that are not ones, a node
  reading its own output, a shape op asked for 2**40 elements, ...).

The importer must give a graph or one clear ValueError (one line), never
crash, hang or allocate what the hostile value asks for; a graph it gives
must compile and run, its outputs equal to the numpy reference's.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from _fuzz import attempt  # noqa: E402
from pyparbench.executor import compile_graph  # noqa: E402
from pyparbench.graph import from_onnx  # noqa: E402
from pyparbench.reference import reference_forward  # noqa: E402

# Slow (many inputs): left out of the quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

# The attributes each op of the network takes (others the checker refuses first).
ATTRS = {"Conv": ["pads", "strides", "kernel_shape", "dilations", "group"],
         "MaxPool": ["pads", "strides", "kernel_shape", "dilations", "ceil_mode"],
         "Split": ["axis"], "Concat": ["axis"], "Softmax": ["axis"], "Transpose": ["perm"],
         "Gemm": ["transA", "transB"]}
HOSTILE_INTS = [0, -1, -7, 1, 3, 1 << 20, 1 << 40, (1 << 63) - 1, -(1 << 63)]


def _valid() -> Any:
    rng = np.random.default_rng(0)

    def w(*shape: int) -> np.ndarray:
        return rng.uniform(-1, 1, size=shape).astype(np.float32)

    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("w1", w(8, 3, 3, 3)), ("b1", w(8)), ("w2", w(4, 4, 3, 3)), ("fc", w(10, 64)),
        ("fb", w(10)), ("sizes", np.array([4, 4], np.int64)),
        ("st", np.array([0], np.int64)), ("en", np.array([2], np.int64)),
        ("ax", np.array([2], np.int64)), ("step", np.array([2], np.int64)),
        ("shape", np.array([0, -1], np.int64)),
        ("pads", np.array([0, 0, 1, 0, 0, 0, 0, 2], np.int64)))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2],
                         name="pool1"),
        helper.make_node("Split", ["p1", "sizes"], ["s0", "s1"], axis=1, name="split"),
        helper.make_node("Conv", ["s0", "w2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Concat", ["c2", "s1"], ["cat"], axis=1, name="cat"),
        helper.make_node("Add", ["cat", "p1"], ["res"], name="residual"),
        helper.make_node("Slice", ["res", "st", "en", "ax", "step"], ["sl"], name="slice"),
        helper.make_node("Transpose", ["sl"], ["t"], perm=[0, 1, 3, 2], name="transpose"),
        helper.make_node("Pad", ["t", "pads"], ["tp"], name="pad"),
        helper.make_node("GlobalAveragePool", ["tp"], ["g"], name="gap"),
        helper.make_node("Reshape", ["g", "shape"], ["flat"], name="flat"),
        helper.make_node("Concat", ["flat"] * 8, ["wide"], axis=1, name="wide"),
        helper.make_node("Gemm", ["wide", "fc", "fb"], ["logits"], transB=1, name="fc"),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1, name="softmax"),
    ]
    g = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


VALID = _valid()
VALID_BYTES = VALID.SerializeToString()


def _import(data: Any, batch: int | None = 2) -> Any:
    """The file as a graph (at ``batch``; None: the file's own)."""
    try:
        return from_onnx(data, batch=batch, max_bytes=1 << 20)
    except ValueError as e:
        assert "\n" not in str(e).strip(), f"not one line: {e}"
        raise


def _import_and_run(data: Any, target: str, batch: int | None = 2) -> bool:
    """Import, then (for a graph) run against the reference; whether it imported."""
    graph = attempt(target, lambda: _import(data, batch), clear=(ValueError,))
    if graph is None:
        return False
    ins = graph.random_inputs(3)
    cg = compile_graph(graph)
    cg.set_inputs(ins)
    cg.run(repeats=1, warmup=0)
    got = cg.outputs()
    for name, want in reference_forward(graph, ins).items():
        np.testing.assert_allclose(got[name], want, rtol=2e-4, atol=2e-5 * max(
            1.0, float(np.abs(want).max())))
    return True


def test_the_valid_file_imports_and_runs() -> None:
    # The fuzzed files start from one that works.
    assert _import_and_run(VALID, "onnx-valid")


@given(st.data())
def test_fuzz_damaged_bytes(data: st.DataObject) -> None:
    raw = bytearray(VALID_BYTES)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["cut", "flip", "splice"]))
        at = data.draw(st.integers(0, max(0, len(raw) - 1)))
        if kind == "cut":
            raw = raw[:at]
        elif kind == "flip" and raw:
            raw[at] ^= data.draw(st.integers(1, 255))
        else:
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=32))
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "damaged.onnx"
        f.write_bytes(bytes(raw))
        _import_and_run(f, "onnx-bytes")


def _set_attr(node: Any, name: str, value: Any) -> None:
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(name, value))


@given(st.data())
def test_fuzz_hostile_models(data: st.DataObject) -> None:
    m = onnx.ModelProto()
    m.CopyFrom(VALID)
    g = m.graph
    what = data.draw(st.sampled_from(["attr", "dim", "init", "wire", "shape-op"]))
    if what == "attr":
        node = data.draw(st.sampled_from([n for n in g.node if n.op_type in ATTRS]))
        name = data.draw(st.sampled_from(ATTRS[node.op_type]))
        many = name in ("pads", "strides", "kernel_shape", "dilations", "perm", "split")
        value: Any = (data.draw(st.lists(st.sampled_from(HOSTILE_INTS), min_size=1,
                                         max_size=5)) if many
                      else data.draw(st.sampled_from(HOSTILE_INTS)))
        _set_attr(node, name, value)
    elif what == "dim":
        dim = g.input[0].type.tensor_type.shape.dim[data.draw(st.integers(0, 3))]
        dim.dim_value = data.draw(st.sampled_from([0, 1, 5, 1 << 20, 1 << 40]))
    elif what == "init":
        i = data.draw(st.integers(0, len(g.initializer) - 1))
        t = g.initializer[i]
        arr = numpy_helper.to_array(t)
        choice = data.draw(st.sampled_from(["drop", "shape", "values", "dtype"]))
        if choice == "drop":
            del g.initializer[i]
        elif choice == "shape":
            t.dims[:] = [data.draw(st.sampled_from([0, 1, 7, 1 << 31]))] * max(1, arr.ndim)
        elif choice == "values":
            hostile = data.draw(st.sampled_from(HOSTILE_INTS))
            t.CopyFrom(numpy_helper.from_array(np.full(arr.shape, hostile).astype(arr.dtype)
                                               if arr.dtype == np.int64 else
                                               np.full(arr.shape, np.nan, arr.dtype), t.name))
        else:
            t.CopyFrom(numpy_helper.from_array(arr.astype(np.float64), t.name))
    elif what == "wire":
        node = data.draw(st.sampled_from(list(g.node)))
        k = data.draw(st.integers(0, len(node.input) - 1))
        node.input[k] = data.draw(st.sampled_from(
            [node.output[0], "nowhere", "y", "x", "sizes", "w1"]))
    else:
        # Shape arithmetic asking for a huge constant, folded at import.
        g.initializer.append(numpy_helper.from_array(
            np.array([1 << data.draw(st.integers(10, 40))], np.int64), "huge"))
        g.node.insert(0, helper.make_node("ConstantOfShape", ["huge"], ["big"]))
        g.node.insert(1, helper.make_node("ReduceSum", ["big"], ["bsum"], keepdims=0))
        g.node.append(helper.make_node("Add", ["y", "bsum"], ["y2"]))
        g.output[0].name = "y2"
    _import_and_run(m, "onnx-model")


# ------------------------------------------------- a transformer's decode step

# The hostile decode-step files: what is changed, and the error that names it.
DECODE_STEP_DAMAGE = {
    # attention_mask (1, P + 1) declared with another rank
    "mask-rank": r"mask computation of the int64 input 'attention_mask' of shape \(",
    # a layer's past keys with other heads than the new keys
    "past-heads": "concat along axis 2 needs equal other dims",
    # the int64 ids declared as floats
    "ids-dtype": r"by an int64 graph input map|input 'input_ids' is double: only float32",
}


@pytest.fixture(scope="module")
def decode_step(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A Llama decode step (transformers' own class, 4 past tokens, the
    dynamo exporter) as a model."""
    pytest.importorskip("torch")
    from _transformers import export_decode_step

    path = export_decode_step("llama", tmp_path_factory.mktemp("step") / "step.onnx", 4, True)
    return onnx.load(str(path))


def _damaged_step(step: Any, damage: str, value: int) -> Any:
    m = onnx.ModelProto()
    m.CopyFrom(step)
    by_name = {i.name: i for i in m.graph.input}
    if damage == "mask-rank":  # value: extra leading axes of 1, or axes removed
        dims = by_name["attention_mask"].type.tensor_type.shape.dim
        if value > 0:
            for _ in range(value):
                dims.insert(0, onnx.TensorShapeProto.Dimension(dim_value=1))
        else:
            del dims[0]
    elif damage == "past-heads":  # value: the past's heads
        by_name["past_key_values.0.key"].type.tensor_type.shape.dim[1].dim_value = value
    else:  # value: the ids' element type, a float one
        by_name["input_ids"].type.tensor_type.elem_type = value
    return m


@pytest.mark.parametrize("damage,value", [("mask-rank", 1), ("mask-rank", 2),
                                          ("mask-rank", -1), ("past-heads", 3), ("past-heads", 1),
                                          ("ids-dtype", TensorProto.FLOAT),
                                          ("ids-dtype", TensorProto.DOUBLE)])
def test_hostile_decode_step_is_one_clear_error(decode_step: Any, damage: str,
                                                value: int) -> None:
    assert _import_and_run(decode_step, "onnx-decode-step", None)  # undamaged, it runs
    m = _damaged_step(decode_step, damage, value)
    with pytest.raises(ValueError, match=DECODE_STEP_DAMAGE[damage]) as e:
        _import(m, None)
    assert "\n" not in str(e.value).strip()


@given(st.data())
def test_fuzz_hostile_decode_steps(decode_step: Any, data: st.DataObject) -> None:
    damage = data.draw(st.sampled_from(sorted(DECODE_STEP_DAMAGE)))
    value = data.draw({"mask-rank": st.sampled_from([-1, 1, 2, 3]),
                       "past-heads": st.sampled_from([1, 3, 4, 1 << 20]),
                       "ids-dtype": st.sampled_from([TensorProto.FLOAT, TensorProto.DOUBLE,
                                                     TensorProto.FLOAT16])}[damage])
    assert not _import_and_run(_damaged_step(decode_step, damage, value), "onnx-decode-step",
                               None)
