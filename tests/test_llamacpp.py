"""A Llama decoder written as GGUF (pyparbench.frameworks.llamacpp.gguf_file)
and run by llama.cpp: its prefill logits and four decode steps against
transformers' LlamaForCausalLM on the same weights; the writer's and the
runner's errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _transformers import transformers  # noqa: F401 (the torchvision stub first)

from pyparbench.frameworks.llamacpp.gguf_file import write_llama_gguf
from pyparbench.frameworks.llamacpp.runtime import LlamaCppDecoder
from pyparbench.executor import compile_graph
from pyparbench.models import build
from pyparbench.models.llama import LlamaConfig, config_of, transformers_weights
from pyparbench.settings import Settings

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf", reason="writing GGUF needs the gguf package (the llm extra)")

SHAPE = LlamaConfig(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, vocab=100,
                    rope_theta=10000.0, eps=1e-5)
CONTEXT = 64
PROMPT = [3, 17, 42, 5, 99, 0, 61, 8, 23, 77, 14]
# llama.cpp multiplies f32 weights in f32 (its own summation order); bf16 and
# f16 files round activations to the weights' type before each product.
TOLERANCE = {"fp32": 1e-5, "fp16": 5e-3, "bf16": 2e-2}  # measured 5e-7, 1.3e-3, 6.6e-3


def _round(w: np.ndarray, precision: str) -> np.ndarray:
    if precision == "fp32" or w.ndim == 1:
        return w
    if precision == "fp16":
        return w.astype(np.float16).astype(np.float32)
    t = torch.from_numpy(w).to(torch.bfloat16).to(torch.float32)
    return t.numpy()


@pytest.fixture(scope="module")
def model() -> Any:
    cfg = transformers.LlamaConfig(
        hidden_size=SHAPE.hidden, num_hidden_layers=SHAPE.layers,
        num_attention_heads=SHAPE.heads, num_key_value_heads=SHAPE.kv_heads,
        intermediate_size=SHAPE.intermediate, vocab_size=SHAPE.vocab,
        max_position_embeddings=CONTEXT, rope_theta=SHAPE.rope_theta,
        rms_norm_eps=SHAPE.eps, tie_word_embeddings=False)
    torch.manual_seed(7)
    m = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # weights of a trained model's scale, not init's tiny ones
        for p in m.parameters():
            if p.ndim == 2:
                p.normal_(0.0, 0.08)
            else:
                p.uniform_(0.5, 1.5)
    return m


def _weights(m: Any, precision: str = "fp32") -> dict[str, np.ndarray]:
    return {k: _round(v.detach().numpy().copy(), precision) for k, v in m.state_dict().items()}


def _torch_logits(m: Any, ids: list[int], precision: str) -> np.ndarray:
    ref = type(m)(m.config).eval()
    ref.load_state_dict({k: torch.from_numpy(v) for k, v in _weights(m, precision).items()})
    with torch.no_grad():
        return ref(torch.tensor([ids])).logits[0].numpy()  # type: ignore[no-any-return]


def _error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_llama_cpp_matches_transformers_on_prefill_and_four_decode_steps(
        model: Any, precision: str, threads: int, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the llm extra) is not installed")
    path = write_llama_gguf(tmp_path / "m.gguf", SHAPE, _weights(model), context=CONTEXT,
                            precision=precision)
    llm = LlamaCppDecoder(path, context=CONTEXT, threads=threads, cache=precision)
    assert llm.vocab == SHAPE.vocab
    got = llm.prefill(PROMPT)
    ids = list(PROMPT)
    for _ in range(4):  # greedy, each step's token from llama.cpp's own logits
        ids.append(int(np.argmax(got[-1])))
        got = np.vstack([got, llm.decode(ids[-1])])
    want = _torch_logits(model, ids, precision)
    assert got.shape == want.shape == (len(PROMPT) + 4, SHAPE.vocab)
    # A file whose rotary layout were left as transformers' would miss by O(1).
    assert _error(got, want) <= TOLERANCE[precision], (precision, _error(got, want))


def test_the_writer_names_a_missing_or_misshapen_weight(model: Any, tmp_path: Path) -> None:
    w = _weights(model)
    del w["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(KeyError, match=r"model\.layers\.1\.mlp\.up_proj\.weight"):
        write_llama_gguf(tmp_path / "a.gguf", SHAPE, w, context=CONTEXT)
    w = _weights(model)
    w["model.layers.0.self_attn.k_proj.weight"] = w["model.layers.0.self_attn.q_proj.weight"]
    with pytest.raises(ValueError, match=r"k_proj.weight' has shape \(64, 64\), expected \(32, 64\)"):
        write_llama_gguf(tmp_path / "b.gguf", SHAPE, w, context=CONTEXT)
    with pytest.raises(ValueError, match="precision 'int4'"):
        write_llama_gguf(tmp_path / "c.gguf", SHAPE, _weights(model), context=CONTEXT,
                         precision="int4")
    with pytest.raises(ValueError, match="context must be an integer >= 1, got 0"):
        write_llama_gguf(tmp_path / "d.gguf", SHAPE, _weights(model), context=0)
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_the_file_is_llama_metadata_and_adjacent_pair_rotary(model: Any, tmp_path: Path) -> None:
    """What llama.cpp reads: the llama.* keys, and the query rows of each head
    reordered from rotate-half halves to adjacent pairs."""
    path = write_llama_gguf(tmp_path / "m.gguf", SHAPE, _weights(model), context=CONTEXT)
    r = gguf.GGUFReader(str(path))

    def value(key: str) -> Any:
        f = r.fields[key]
        return f.parts[f.data[0]].tolist()

    assert bytes(value("general.architecture")).decode() == "llama"
    assert value("llama.attention.head_count_kv") == [2]
    assert value("llama.rope.dimension_count") == [16]
    q = {t.name: t for t in r.tensors}["blk.0.attn_q.weight"]
    rows = np.asarray(q.data).reshape(64, 64)
    src = _weights(model)["model.layers.0.self_attn.q_proj.weight"]
    # Head 1 (rows 16-31): its row pairs (2j, 2j + 1) are rows j and 8 + j.
    np.testing.assert_array_equal(rows[16 + 2 * 3], src[16 + 3])
    np.testing.assert_array_equal(rows[16 + 2 * 3 + 1], src[16 + 8 + 3])


def test_the_runner_refuses_bad_ids_and_a_decode_before_prefill(model: Any,
                                                                 tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the llm extra) is not installed")
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        LlamaCppDecoder(tmp_path / "none.gguf", context=8, threads=1)
    path = write_llama_gguf(tmp_path / "m.gguf", SHAPE, _weights(model), context=CONTEXT)
    with pytest.raises(ValueError, match="numa 'everywhere'"):
        LlamaCppDecoder(path, context=8, threads=1, numa="everywhere")
    llm = LlamaCppDecoder(path, context=8, threads=1)
    with pytest.raises(RuntimeError, match="decode before prefill"):
        llm.decode(3)
    with pytest.raises(ValueError, match="token id 100 is outside the vocabulary of 100"):
        llm.prefill([1, 100])
    with pytest.raises(ValueError, match="a prompt of 9 tokens does not fit the context of 8"):
        llm.prefill(list(range(9)))
    llm.prefill(list(range(7)))
    llm.decode(1)
    with pytest.raises(ValueError, match="context of 8 tokens is full"):
        llm.decode(2)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_built_in_decoder_and_llama_cpp_agree_on_its_weights(threads: int,
                                                                 tmp_path: Path) -> None:
    """llama-tiny's prefill through the native executor and through llama.cpp
    on the GGUF file written from the graph's own weights: every position's
    logits within 1e-4 of the largest."""
    g = build("llama-tiny", 1, all_logits=True, prompt=12)
    path = write_llama_gguf(tmp_path / "tiny.gguf", config_of(g), transformers_weights(g),
                            context=CONTEXT)
    ids = g.random_inputs(seed=5)["input_ids"]
    cg = compile_graph(g)
    cg.set_inputs({"input_ids": ids})
    cg.run(Settings(intra_op=threads), repeats=1, warmup=0)
    (native,) = cg.outputs().values()
    llm = LlamaCppDecoder(path, context=CONTEXT, threads=threads)
    theirs = llm.prefill(ids[0].tolist())
    assert native.shape == (1, 12, g.meta["vocab"])
    assert _error(native[0], theirs) <= 1e-4, _error(native[0], theirs)


def test_last_logits_only_are_the_last_row_of_all(model: Any, tmp_path: Path) -> None:
    """Without all_logits llama.cpp computes the last position's logits alone
    (what a generation and the built-in graph's default need): the same row."""
    path = write_llama_gguf(tmp_path / "m.gguf", SHAPE, _weights(model), context=CONTEXT)
    every = LlamaCppDecoder(path, context=CONTEXT, threads=1)
    last = LlamaCppDecoder(path, context=CONTEXT, threads=1, all_logits=False)
    want = every.prefill(PROMPT)
    got = last.prefill(PROMPT)
    assert got.shape == (1, SHAPE.vocab)
    np.testing.assert_allclose(got[0], want[-1], rtol=0, atol=1e-6)
    np.testing.assert_allclose(last.decode(7), every.decode(7), rtol=0, atol=1e-6)
