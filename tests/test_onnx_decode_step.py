"""Hugging Face decoders' decode step as users export it (past keys and
values in, present keys and values out; both of torch's exporters, past
lengths 1 and 100) imports with from_onnx as native decode_attention nodes
and matches ONNX Runtime on the same file and inputs, with left padding and
without."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from _transformers import VOCAB, decode_step_names, export_decode_step  # noqa: E402

from pyparbench.executor import compile_graph  # noqa: E402
from pyparbench.graph import Graph, from_onnx  # noqa: E402

pytestmark = pytest.mark.slow
LAYERS = 2


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("past", [1, 100])
@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_decode_step_matches_onnx_runtime(tmp_path: Path, family: str, past: int,
                                          dynamo: bool) -> None:
    path = export_decode_step(family, tmp_path / f"{family}.onnx", past, dynamo)
    _check_step(path, from_onnx(path), family, past)


@pytest.fixture(scope="module")
def symbolic_steps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each family's step with a symbolic past (exported after 5 tokens)."""
    out = tmp_path_factory.mktemp("symbolic")
    return {f: export_decode_step(f, out / f"{f}.onnx", 5, False, symbolic=True)
            for f in ("llama", "gpt2")}


@pytest.mark.parametrize("past", [1, 100])
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_a_symbolic_past_is_sized_at_import(symbolic_steps: dict[str, Path], family: str,
                                            past: int) -> None:
    """One file for every past length: the sizes are given by the file's
    names of its symbolic dimensions (the shape arithmetic on them,
    positions included, is folded at import)."""
    path = symbolic_steps[family]
    with pytest.raises(ValueError, match="past_len"):
        from_onnx(path)
    g = from_onnx(path, shapes={"past_len": past, "total_len": past + 1})
    _check_step(path, g, family, past)


def _check_step(path: Path, g: Graph, family: str, past: int) -> None:
    inputs, outputs = decode_step_names(LAYERS)
    # The file's interface keeps its names.
    shapes = {g.nodes[i].name: g.nodes[i].shape for i in g.inputs}
    assert set(shapes) == set(inputs)
    assert shapes["input_ids"] == (1, 1) and shapes["attention_mask"] == (1, past + 1)
    assert [g.nodes[o].name for o in g.outputs] == outputs
    # Each layer's attention is one decode_attention node reading the past
    # where it is; the present is one copy (a concat), never a repeat.
    ops = [n.op for n in g.nodes]
    assert ops.count("decode_attention") == LAYERS and "attention" not in ops
    for o in g.outputs[1:]:
        assert g.nodes[o].op == "concat" and g.nodes[o].shape[2] == past + 1
    rng = np.random.default_rng(past)
    feeds: dict[str, np.ndarray] = {"input_ids": rng.integers(0, VOCAB, (1, 1)).astype(np.int64)}
    for name in inputs[2:]:
        feeds[name] = rng.standard_normal(shapes[name]).astype(np.float32)
    left_padded = np.ones((1, past + 1), np.int64)
    left_padded[0, :max(1, past // 2)] = 0
    cg = compile_graph(g)
    sess = ort.InferenceSession(str(path))
    hidden = []
    for mask in (left_padded, np.ones((1, past + 1), np.int64)):
        feeds["attention_mask"] = mask
        want = dict(zip(outputs, sess.run(outputs, feeds), strict=True))
        cg.set_inputs(feeds)
        cg.run(repeats=1)
        got = cg.outputs()
        for name in outputs:
            assert got[name].shape == want[name].shape, name
            err = np.abs(got[name] - want[name]).max() / np.abs(want[name]).max()
            assert err <= 1e-4, f"{family} {name}: max |native - ORT| / max |ORT| = {err:.3g}"
        hidden.append(want["last_hidden_state"])
    # The mask is data: padding changes the output as it changes ORT's.
    assert np.abs(hidden[0] - hidden[1]).max() > 1e-4
