"""Hugging Face decoders' prefill as users export it (both of torch's
exporters, two sequence lengths) imports with from_onnx and matches ONNX
Runtime on the same file and inputs: random ids, a mask with left padding
(as batched generation pads) and one without."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from _transformers import VOCAB, export_decoder  # noqa: E402

from pyparbench.executor import compile_graph  # noqa: E402
from pyparbench.graph import from_onnx  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("seq", [8, 16])
@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_decoder_prefill_matches_onnx_runtime(tmp_path: Path, family: str, seq: int,
                                              dynamo: bool) -> None:
    path = export_decoder(family, tmp_path / f"{family}.onnx", seq, dynamo)
    g = from_onnx(path)
    # The file's interface: names, shapes and dtypes.
    assert {g.nodes[i].name: (g.nodes[i].shape, g.nodes[i].dtype) for i in g.inputs} == {
        "input_ids": ((1, seq), "int64"), "attention_mask": ((1, seq), "int64")}
    assert [g.nodes[o].name for o in g.outputs] == ["last_hidden_state"]
    # Every input's shape in the file, ids read as integers (GPT-2's) included.
    assert g.meta["onnx_input_shapes"] == {"input_ids": [1, seq], "attention_mask": [1, seq]}
    # The fused kernels run the decoder: RMSNorm, rotary positions,
    # attention with its grouped-query heads never repeated, SwiGLU.
    ops = {n.op for n in g.nodes}
    assert {"attention", *(("layer_norm",) if family == "gpt2" else
                           ("rms_norm", "rotary", "glu"))} <= ops
    rng = np.random.default_rng(seq)
    ids = rng.integers(0, VOCAB, (1, seq)).astype(np.int64)
    left_padded = np.ones((1, seq), np.int64)
    left_padded[0, :3] = 0
    cg = compile_graph(g)
    sess = ort.InferenceSession(str(path))
    outs = []
    for mask in (left_padded, np.ones((1, seq), np.int64)):
        want = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        cg.set_inputs({"input_ids": ids, "attention_mask": mask})
        cg.run(repeats=1)
        (got,) = cg.outputs().values()
        assert got.shape == want.shape
        err = np.abs(got - want).max() / np.abs(want).max()
        assert err <= 1e-4, f"{family}: max |native - ORT| / max |ORT| = {err:.3g}"
        outs.append(want)
    # The mask is data: padding changes the output as it changes ORT's.
    assert np.abs(outs[0] - outs[1]).max() > 1e-3
