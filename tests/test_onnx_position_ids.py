"""A decoder's prefill exported with ``position_ids`` an input of the file
(as generation passes them: left padding's positions start past the pads)
imports with from_onnx and matches ONNX Runtime on the same file and
inputs, the positions data: GPT-2's learned position table is an embedding
lookup of them; rotary decoders' (Llama's, Qwen2's) cos / sin computed
from them are one native rotary node with positions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from _transformers import (  # noqa: E402
    VOCAB,
    decode_step_names,
    export_decode_step,
    export_decoder,
)

from pyparbench.executor import compile_graph  # noqa: E402
from pyparbench.graph import from_onnx  # noqa: E402
from pyparbench.settings import Settings  # noqa: E402

pytestmark = pytest.mark.slow

SEQ = 8
LAYERS = 2


def _left_padded(pads: int, offset: int) -> dict[str, np.ndarray]:
    """Ids, a mask of ``pads`` leading zeros and the positions generation
    gives them (0 from the first token, the pads' clipped to 0), plus
    ``offset`` (positions not starting at 0)."""
    rng = np.random.default_rng(pads + offset)
    mask = np.ones((1, SEQ), np.int64)
    mask[0, :pads] = 0
    positions = np.clip(np.cumsum(mask, axis=-1) - 1, 0, None) + offset
    return {"input_ids": rng.integers(0, VOCAB, (1, SEQ)).astype(np.int64),
            "attention_mask": mask, "position_ids": positions.astype(np.int64)}


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2"])
def test_positions_input_matches_onnx_runtime(tmp_path: Path, family: str,
                                              dynamo: bool) -> None:
    path = export_decoder(family, tmp_path / f"{family}.onnx", SEQ, dynamo, position_ids=True)
    g = from_onnx(path)
    if family != "gpt2":
        # Each layer's q and k rotated by tables of the input positions.
        rotary = [n for n in g.nodes if n.op == "rotary"]
        assert rotary and all("inv_freq" in n.params for n in rotary)
    assert {g.nodes[i].name: (g.nodes[i].shape, g.nodes[i].dtype) for i in g.inputs} == {
        n: ((1, SEQ), "int64") for n in ("input_ids", "attention_mask", "position_ids")}
    session = ort.InferenceSession(str(path))
    cg = compile_graph(g)
    wants = []
    for pads, offset in ((0, 0), (3, 0), (3, 5)):
        feeds = _left_padded(pads, offset)
        want = session.run(None, feeds)[0]
        wants.append(want)
        cg.set_inputs(feeds)
        for settings in (Settings(intra_op=1), Settings(intra_op=2),
                         Settings(intra_op=2, operator="framework")):
            cg.run(settings, repeats=1, warmup=0)
            (got,) = cg.outputs().values()
            err = np.abs(got - want).max() / np.abs(want).max()
            assert err <= 1e-4, (pads, offset, settings.label(), float(err))
    # The positions are data: shifted ones change the output as they change ORT's.
    assert np.abs(wants[2] - wants[1]).max() > 1e-3


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("past", [1, 100])
@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_decode_step_positions_input_matches_onnx_runtime(tmp_path: Path, family: str,
                                                          past: int, dynamo: bool) -> None:
    """A decode step taking the new token's positions: past length less
    the left pads, as generation gives them."""
    path = export_decode_step(family, tmp_path / f"{family}.onnx", past, dynamo,
                              position_ids=True)
    g = from_onnx(path)
    inputs, outputs = decode_step_names(LAYERS, position_ids=True)
    shapes = {g.nodes[i].name: g.nodes[i].shape for i in g.inputs}
    assert set(shapes) == set(inputs) and shapes["position_ids"] == (1, 1)
    assert [n.op for n in g.nodes].count("decode_attention") == LAYERS
    if family != "gpt2":
        rotary = [n for n in g.nodes if n.op == "rotary"]
        assert rotary and all("inv_freq" in n.params for n in rotary)
    rng = np.random.default_rng(past)
    feeds = {"input_ids": rng.integers(0, VOCAB, (1, 1)).astype(np.int64)}
    for name in inputs[3:]:
        feeds[name] = rng.standard_normal(shapes[name]).astype(np.float32)
    session = ort.InferenceSession(str(path))
    cg = compile_graph(g)
    hidden = []
    for pads in (0, max(1, past // 2)):
        mask = np.ones((1, past + 1), np.int64)
        mask[0, :pads] = 0
        feeds["attention_mask"] = mask
        feeds["position_ids"] = np.array([[past - pads]], np.int64)
        want = dict(zip(outputs, session.run(outputs, feeds), strict=True))
        hidden.append(want["last_hidden_state"])
        cg.set_inputs(feeds)
        for settings in (Settings(intra_op=1), Settings(intra_op=2),
                         Settings(intra_op=2, operator="framework")):
            cg.run(settings, repeats=1, warmup=0)
            got = cg.outputs()
            for name in outputs:
                err = np.abs(got[name] - want[name]).max() / np.abs(want[name]).max()
                assert err <= 1e-4, (family, name, pads, settings.label(), float(err))
    assert np.abs(hidden[0] - hidden[1]).max() > 1e-4


def test_rotary_positions_of_another_form_are_refused_by_name(tmp_path: Path) -> None:
    """Angles not of the form position * inv_freq (here position² *
    inv_freq) are no rotary with positions: the import is refused, naming
    the input."""
    path = export_decoder("llama", tmp_path / "llama.onnx", SEQ, False, position_ids=True)
    model = onnx.load(str(path))
    nodes = list(model.graph.node)
    (cast,) = [n for n in nodes if n.op_type == "Cast"
               and n.input[0].startswith("/model/rotary_emb/Unsqueeze")]
    (angle,) = [n for n in nodes if n.op_type == "Mul" and cast.output[0] in n.input]
    square = onnx.helper.make_node("Mul", [cast.output[0], cast.output[0]], ["squared"])
    angle.input[list(angle.input).index(cast.output[0])] = "squared"
    model.graph.node.insert(nodes.index(cast) + 1, square)
    onnx.save(model, str(tmp_path / "squared.onnx"))
    with pytest.raises(ValueError, match="int64 input 'position_ids'"):
        from_onnx(tmp_path / "squared.onnx")
