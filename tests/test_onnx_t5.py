"""Hugging Face T5 as users export it (its encoder alone and the whole
encoder-decoder, relu and gated-GELU feed-forwards, both of torch's
exporters, two sequence lengths and a decoder length of its own) imports
with from_onnx onto the native fused ops and matches ONNX Runtime on the
same file and inputs, at 1 and 2 threads and in framework mode."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from _transformers import T5_FEED_FORWARDS, VOCAB, export_t5, t5_input_names  # noqa: E402

from pyparbench.executor import compile_graph  # noqa: E402
from pyparbench.graph import from_onnx  # noqa: E402
from pyparbench.settings import Settings  # noqa: E402

pytestmark = pytest.mark.slow

LAYERS = 2
# What the import leaves of T5: no matmul and softmax of an unfused
# attention, no affine or other op of a scalar chain (the position bias's
# bucketing folds into a constant).
_MAPPED = {"input", "reshape", "transpose", "embedding_bag", "rms_norm", "linear", "constant",
           "add", "attention", "eltwise", "glu"}


def _feeds(names: list[str], seq: int, decoder_seq: int, full_mask: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seq + decoder_seq)
    mask = np.ones((1, seq), np.int64)
    if not full_mask:
        mask[0, seq // 2 + 1:] = 0  # padding at the end
        mask[0, 1] = 0
    feeds = {"input_ids": rng.integers(0, VOCAB, (1, seq)).astype(np.int64),
             "attention_mask": mask,
             "decoder_input_ids": rng.integers(0, VOCAB, (1, decoder_seq)).astype(np.int64)}
    return {k: feeds[k] for k in names}


# (dynamo, transformers' attention): the TorchScript exporter writes the
# default "sdpa" (scores scaled on q and k) and "eager" (the scores scaled,
# then the bias and the mask added one after the other) apart; the dynamo
# one exports the eager attention alone.
_EXPORTS = [(False, "sdpa"), (False, "eager"), (True, "eager")]


@pytest.mark.parametrize("dynamo,attention", _EXPORTS,
                         ids=["torchscript-sdpa", "torchscript-eager", "dynamo-eager"])
@pytest.mark.parametrize("seq,decoder_seq", [(8, 5), (16, 7)])
@pytest.mark.parametrize("feed_forward", T5_FEED_FORWARDS)
@pytest.mark.parametrize("encoder_only", [True, False], ids=["encoder", "encoder-decoder"])
def test_t5_matches_onnx_runtime(tmp_path: Path, encoder_only: bool, feed_forward: str,
                                 seq: int, decoder_seq: int, dynamo: bool,
                                 attention: str) -> None:
    path = export_t5(feed_forward, tmp_path / "t5.onnx", seq, dynamo, encoder_only,
                     decoder_seq, attention)
    g = from_onnx(path)
    names = t5_input_names(encoder_only)
    lengths = {"input_ids": seq, "attention_mask": seq, "decoder_input_ids": decoder_seq}
    assert {g.nodes[i].name: (g.nodes[i].shape, g.nodes[i].dtype) for i in g.inputs} == {
        n: ((1, lengths[n]), "int64") for n in names}
    assert [g.nodes[o].name for o in g.outputs] == ["last_hidden_state"]
    ops = Counter(n.op for n in g.nodes)
    assert set(ops) <= _MAPPED, ops
    # One fused attention per attention block: the encoder's self-attention;
    # the decoder's self- and cross-attention.
    assert ops["attention"] == LAYERS * (1 if encoder_only else 3), ops
    # T5LayerNorm before each sublayer and after each stack.
    assert ops["rms_norm"] == 2 * LAYERS + 1 + (0 if encoder_only else 3 * LAYERS + 1), ops
    if feed_forward == "gated-gelu":
        assert ops["glu"] == LAYERS * (1 if encoder_only else 2) and not ops["eltwise"], ops
    else:
        assert ops["eltwise"] == LAYERS * (1 if encoder_only else 2) and not ops["glu"], ops
    session = ort.InferenceSession(str(path))
    cg = compile_graph(g)
    wants = []
    for full_mask in (False, True):
        feeds = _feeds(names, seq, decoder_seq, full_mask)
        want = session.run(None, feeds)[0]
        wants.append(want)
        cg.set_inputs(feeds)
        for settings in (Settings(intra_op=1), Settings(intra_op=2),
                         Settings(intra_op=2, operator="framework")):
            cg.run(settings, repeats=1, warmup=0)
            (got,) = cg.outputs().values()
            assert got.shape == want.shape
            err = np.abs(got - want).max() / np.abs(want).max()
            assert err <= 1e-4, (f"{feed_forward}, {settings.label()}: max |native - ORT| / "
                                 f"max |ORT| = {err:.3g}")
    # The mask is data: the padding changes the output as it changes ORT's.
    assert np.abs(wants[1] - wants[0]).max() > 1e-3
