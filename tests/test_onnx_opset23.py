"""ONNX's own transformer ops of opset 23 (Attention, RMSNormalization,
RotaryEmbedding) import as the native fused kernels and match ONNX Runtime
on the same file, where the installed onnx and ONNX Runtime know opset 23."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pyparbench.executor import compile_graph  # noqa: E402
from pyparbench.graph import from_onnx  # noqa: E402
from pyparbench.settings import Settings  # noqa: E402

if onnx.defs.onnx_opset_version() < 23:
    pytest.skip("the installed onnx predates opset 23", allow_module_level=True)

B, H, HKV, S, D = 1, 4, 2, 6, 8


def _file(tmp_path: Path) -> Path:
    """x (B, S, H*D) -> RMSNormalization -> q, k, v heads -> RotaryEmbedding of q
    and k -> Attention (grouped-query, causal) -> (B, H, S, D)."""
    rng = np.random.default_rng(0)
    half = np.outer(np.arange(S), 1.0 / 10000 ** (np.arange(D // 2) * 2 / D))
    consts = {
        "w": rng.uniform(0.5, 1.5, H * D), "cos": np.cos(half)[None], "sin": np.sin(half)[None],
        "q_shape": np.array([B, S, H, D]), "kv_shape": np.array([B, S, HKV, D]),
        "kv_w": rng.standard_normal((H * D, HKV * D)) / 6}
    inits = [numpy_helper.from_array(v.astype(np.int64 if v.dtype.kind == "i" else np.float32),
                                     k) for k, v in consts.items()]
    nodes = [
        helper.make_node("RMSNormalization", ["x", "w"], ["n"], epsilon=1e-5, axis=-1),
        helper.make_node("Reshape", ["n", "q_shape"], ["q4"]),
        helper.make_node("Transpose", ["q4"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["n", "kv_w"], ["kv"]),
        helper.make_node("Reshape", ["kv", "kv_shape"], ["k4"]),
        helper.make_node("Transpose", ["k4"], ["k"], perm=[0, 2, 1, 3]),
        helper.make_node("RotaryEmbedding", ["q", "cos", "sin"], ["qr"]),
        helper.make_node("RotaryEmbedding", ["k", "cos", "sin"], ["kr"]),
        helper.make_node("Attention", ["qr", "kr", "k"], ["y"], is_causal=1),
    ]
    graph = helper.make_graph(
        nodes, "opset23", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, H * D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, H, S, D])], inits)
    path = tmp_path / "opset23.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]), path)
    return path


def test_opset23_transformer_ops_match_onnx_runtime(tmp_path: Path) -> None:
    path = _file(tmp_path)
    try:
        sess = ort.InferenceSession(str(path))
    except Exception as e:  # an ONNX Runtime without opset 23's kernels
        pytest.skip(f"ONNX Runtime cannot run opset 23's transformer ops: {e}")
    g = from_onnx(path)
    assert {"rms_norm", "rotary", "attention"} <= {n.op for n in g.nodes}
    x = np.random.default_rng(1).standard_normal((B, S, H * D)).astype(np.float32)
    want = sess.run(None, {"x": x})[0]
    cg = compile_graph(g)
    cg.set_inputs({"x": x})
    cg.run(repeats=1)
    (got,) = cg.outputs().values()
    assert np.abs(got - want).max() / np.abs(want).max() <= 1e-4


def test_attention_of_another_domain_is_refused_by_name(tmp_path: Path) -> None:
    path = _file(tmp_path)
    model = onnx.load(str(path))
    model.graph.node[-1].domain = "com.microsoft"
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, tmp_path / "domain.onnx")
    with pytest.raises(ValueError, match=r"Attention x1 .*domain 'com.microsoft'"):
        from_onnx(tmp_path / "domain.onnx")


def _positions_file(tmp_path: Path, context: int) -> Path:
    """RotaryEmbedding of x (2, H, S, D) by caches (context, D / 2) read at
    an int64 input position_ids (2, S)."""
    half = np.outer(np.arange(context), 1.0 / 10000 ** (np.arange(D // 2) * 2 / D))
    inits = [numpy_helper.from_array(f(half).astype(np.float32), w)
             for w, f in (("cos", np.cos), ("sin", np.sin))]
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "position_ids"], ["y"])
    graph = helper.make_graph(
        [node], "positions",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, H, S, D]),
         helper.make_tensor_value_info("position_ids", TensorProto.INT64, [2, S])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, H, S, D])], inits)
    path = tmp_path / "positions.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]), path)
    return path


def test_rotary_embedding_with_position_ids_matches_onnx_runtime(tmp_path: Path) -> None:
    """The caches' rows at each position, as ONNX Runtime reads them; a
    position past the caches is refused when the graph runs."""
    path = _positions_file(tmp_path, 40)
    try:
        sess = ort.InferenceSession(str(path))
    except Exception as e:  # an ONNX Runtime without opset 23's kernels
        pytest.skip(f"ONNX Runtime cannot run opset 23's RotaryEmbedding: {e}")
    g = from_onnx(path)
    (rotary,) = [n for n in g.nodes if n.op == "rotary"]
    assert rotary.params["cos"].shape == (40, D)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, H, S, D)).astype(np.float32)
    cg = compile_graph(g)
    # Left padding's positions (clipped at 0) in one row, an offset in the other.
    positions = np.array([[0, 0, 0, 1, 2, 3], [30, 31, 32, 33, 34, 35]], np.int64)
    want = sess.run(None, {"x": x, "position_ids": positions})[0]
    for settings in (Settings(intra_op=1), Settings(intra_op=2),
                     Settings(intra_op=2, operator="framework")):
        cg.set_inputs({"x": x, "position_ids": positions})
        cg.run(settings, repeats=1, warmup=0)
        (got,) = cg.outputs().values()
        assert np.abs(got - want).max() / np.abs(want).max() <= 1e-6, settings.label()
    cg.set_inputs({"x": x, "position_ids": positions + 10})
    with pytest.raises(ValueError, match="position 40 is outside its tables' 40 rows"):
        cg.run(repeats=1, warmup=0)
