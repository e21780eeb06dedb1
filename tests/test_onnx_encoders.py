"""Hugging Face encoders as users export them (both of torch's exporters, two
sequence lengths) import with from_onnx and match ONNX Runtime on the same
file and inputs: random ids and a mask with zeros."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from _transformers import ROBERTA_PAD, VOCAB, export_encoder  # noqa: E402

from pyparbench.executor import compile_graph  # noqa: E402
from pyparbench.graph import from_onnx  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("seq", [8, 16])
@pytest.mark.parametrize("family", ["bert", "distilbert", "electra", "albert", "roberta"])
def test_encoder_matches_onnx_runtime(tmp_path: Path, family: str, seq: int,
                                      dynamo: bool) -> None:
    path = export_encoder(family, tmp_path / f"{family}.onnx", seq, dynamo)
    g = from_onnx(path)
    assert g.meta["onnx_input_shapes"] == {"input_ids": [1, seq], "attention_mask": [1, seq]}
    # The file's interface: names, shapes and dtypes.
    assert {g.nodes[i].name: (g.nodes[i].shape, g.nodes[i].dtype) for i in g.inputs} == {
        "input_ids": ((1, seq), "int64"), "attention_mask": ((1, seq), "int64")}
    assert [g.nodes[o].name for o in g.outputs] == ["last_hidden_state"]
    rng = np.random.default_rng(seq)
    ids = rng.integers(0, VOCAB, (1, seq)).astype(np.int64)
    ids[0, 2] = ROBERTA_PAD  # RoBERTa's positions skip its padding id: they follow the ids
    mask = np.ones((1, seq), np.int64)
    mask[0, seq // 2 + 1:] = 0  # padding at the end
    mask[0, 1] = 0
    want = ort.InferenceSession(str(path)).run(
        None, {"input_ids": ids, "attention_mask": mask})[0]
    cg = compile_graph(g)
    cg.set_inputs({"input_ids": ids, "attention_mask": mask})
    cg.run(repeats=1)
    (got,) = cg.outputs().values()
    assert got.shape == want.shape
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 1e-4, f"{family}: max |native - ORT| / max |ORT| = {err:.3g}"
    # The mask is data: another mask changes the output as it changes ORT's.
    mask2 = np.ones((1, seq), np.int64)
    want2 = ort.InferenceSession(str(path)).run(
        None, {"input_ids": ids, "attention_mask": mask2})[0]
    cg.set_inputs({"input_ids": ids, "attention_mask": mask2})
    cg.run(repeats=1)
    (got2,) = cg.outputs().values()
    assert np.abs(got2 - want2).max() / np.abs(want2).max() <= 1e-4
    assert np.abs(want2 - want).max() > 1e-3
    # The ids are data too: other ids (RoBERTa's positions follow them) as ORT.
    ids3 = np.where(np.arange(seq) % 3 == 0, ROBERTA_PAD, ids).astype(np.int64)
    want3 = ort.InferenceSession(str(path)).run(
        None, {"input_ids": ids3, "attention_mask": mask2})[0]
    cg.set_inputs({"input_ids": ids3, "attention_mask": mask2})
    cg.run(repeats=1)
    (got3,) = cg.outputs().values()
    assert np.abs(got3 - want3).max() / np.abs(want3).max() <= 1e-4
