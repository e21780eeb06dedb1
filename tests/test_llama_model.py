"""The built-in Llama-style decoder's prefill against ``transformers``'
``LlamaForCausalLM`` given the same configuration and weights, and the
native executor against the graph's float64 reference."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pytest

from pyparbench.executor import compile_graph
from pyparbench.graph import Graph
from pyparbench.models import build
from pyparbench.models.llama import llama_decode, transformers_weights
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

from _transformers import torch

from pyparbench.frameworks.torch.llama import llama_for_causal_lm, state_dict_of

# Beside llama-tiny (rope_theta 10000, 4 query heads per key / value head):
# Llama 3.1 8B's configuration (rope_theta 500000, eps 1e-5) scaled down.
SHAPES: dict[str, dict[str, Any]] = {
    "tiny": {"size": "llama-tiny"},
    "tiny-all-logits": {"size": "llama-tiny", "all_logits": True},
    "8b-shaped": {"size": "llama-3.1-8b", "layers": 2, "hidden": 128, "heads": 8,
                  "kv_heads": 2, "intermediate": 320, "vocab": 512, "prompt": 24},
}
BATCH = 2
# max |ours - theirs| / max |theirs|, as the issue states it.
TOLERANCE = 1e-4


@cache
def _graph(shape: str) -> Graph:
    kw = dict(SHAPES[shape])
    return build(str(kw.pop("size")), BATCH, **kw)


def _ids(g: Graph) -> np.ndarray:
    ids = g.random_inputs(seed=3)["input_ids"]
    assert ids.dtype == np.int64 and ids.shape == (BATCH, g.meta["prompt"])
    return ids


@cache
def _torch_logits(shape: str, attn_implementation: str) -> np.ndarray:
    g = _graph(shape)
    model = llama_for_causal_lm(g, attn_implementation)
    with torch.inference_mode():
        logits = model(input_ids=torch.from_numpy(_ids(g)), use_cache=False).logits
    out = logits.numpy() if g.meta["all_logits"] else logits[:, -1].numpy()
    return np.asarray(out, dtype=np.float64)


def _native(g: Graph, threads: int) -> np.ndarray:
    cg = compile_graph(g)
    cg.set_inputs({"input_ids": _ids(g)})
    cg.run(Settings(intra_op=threads), repeats=1, warmup=0)
    (out,) = cg.outputs().values()
    return np.asarray(out, dtype=np.float64)


def _error(got: np.ndarray, want: np.ndarray) -> float:
    assert got.shape == want.shape
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_prefill_logits_match_transformers(shape: str, threads: int) -> None:
    g = _graph(shape)
    want = _torch_logits(shape, "eager")
    assert _error(_native(g, threads), want) <= TOLERANCE
    # Logits of O(1), not saturated: the seeded weights keep activations sane.
    assert 0.3 < float(want.std()) < 10


def test_transformers_attention_kernels_agree() -> None:
    # The comparison does not hang on transformers' eager attention.
    assert _error(_torch_logits("tiny", "sdpa"), _torch_logits("tiny", "eager")) <= 1e-5


@pytest.mark.parametrize("shape", ["tiny", "8b-shaped"])
def test_native_matches_the_reference(shape: str) -> None:
    g = _graph(shape)
    (want,) = reference_forward(g, {"input_ids": _ids(g)}).values()
    assert _error(_native(g, 2), np.asarray(want)) <= TOLERANCE


def test_last_token_logits_are_the_last_row_of_all() -> None:
    last, every = _graph("tiny"), _graph("tiny-all-logits")
    assert last.nodes[last.outputs[0]].shape == (BATCH, 2048)
    assert every.nodes[every.outputs[0]].shape == (BATCH, 32, 2048)
    np.testing.assert_allclose(_native(last, 1), _native(every, 1)[:, -1], rtol=0, atol=1e-5)


def test_every_weight_has_a_transformers_name() -> None:
    g = _graph("tiny")
    names = set(state_dict_of(g))
    assert len(names) == 1 + 2 * 9 + 2  # embedding, 2 layers of 9 arrays, norm, lm_head
    assert {"model.embed_tokens.weight", "model.layers.1.mlp.down_proj.weight",
            "model.norm.weight", "lm_head.weight"} <= names


def test_a_graph_other_than_the_decoder_is_refused() -> None:
    with pytest.raises(ValueError, match="'transformer' is not a built-in decoder"):
        llama_for_causal_lm(build("transformer", 1, seq_len=8))


def test_rotary_tables_are_made_once_on_first_read() -> None:
    g = build("llama-tiny", 1, seed=9)
    rotary = [n for n in g if n.op == "rotary"]
    assert len(rotary) == 4 and not any(n.params.materialized for n in rotary)
    tables = [n.params["cos"] for n in rotary]
    assert all(t is tables[0] for t in tables)  # one array, shared
    positions = np.arange(32)[:, None]
    inv_freq = 10000.0 ** (-np.arange(0, 32, 2) / 32)
    np.testing.assert_allclose(tables[0][:, :16], np.cos(positions * inv_freq), atol=1e-6)
    np.testing.assert_allclose(tables[0][:, 16:], tables[0][:, :16])


def _past_of(cache: Any, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """A layer's cached keys and values out of transformers' cache."""
    entry = cache.layers[layer]
    return entry.keys.numpy(), entry.values.numpy()


@pytest.mark.parametrize("past", [1, 13])
@pytest.mark.parametrize("threads", [1, 2])
def test_decode_step_matches_transformers_with_its_cache(past: int, threads: int) -> None:
    """The decode step after ``past`` tokens, fed transformers' own cache of
    them: the next token's logits within 1e-4, and the new key / value rows
    its cache then holds, on the prefill's weights."""
    kw = {"hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 96, "vocab": 128}
    g = build("llama-tiny", 1, **kw)  # the prefill, for its weights
    step = llama_decode(1, past=past, **kw)
    assert {k: v.shape for k, v in transformers_weights(step).items()} == \
        {k: v.shape for k, v in transformers_weights(g).items()}
    for k, w in transformers_weights(g).items():
        np.testing.assert_array_equal(transformers_weights(step)[k], w, err_msg=k)
    model = llama_for_causal_lm(g)
    rng = np.random.default_rng(past)
    ids = rng.integers(0, 128, size=(1, past + 1))
    with torch.inference_mode():
        first = model(input_ids=torch.from_numpy(ids[:, :past]), use_cache=True)
        nxt = model(input_ids=torch.from_numpy(ids[:, past:]), use_cache=True,
                    cache=first.cache)
    feeds: dict[str, np.ndarray] = {"input_ids": ids[:, past:]}
    cache = nxt.cache
    for i in range(g.meta["layers"]):
        keys, values = _past_of(cache, i)
        feeds[f"past_key_values.{i}.key"] = np.ascontiguousarray(keys[:, :, :past])
        feeds[f"past_key_values.{i}.value"] = np.ascontiguousarray(values[:, :, :past])
    cg = compile_graph(step)
    cg.set_inputs(feeds)
    cg.run(Settings(intra_op=threads), repeats=1, warmup=0)
    outs = list(cg.outputs().values())
    want = nxt.logits[:, -1].numpy().astype(np.float64)
    assert outs[0].shape == (1, 128)
    assert _error(outs[0].astype(np.float64), want) <= TOLERANCE
    for i in range(g.meta["layers"]):  # the rows the step adds to the cache
        keys, values = _past_of(cache, i)
        np.testing.assert_allclose(outs[1 + 2 * i], keys[:, :, past:], rtol=0, atol=1e-4)
        np.testing.assert_allclose(outs[2 + 2 * i], values[:, :, past:], rtol=0, atol=1e-4)


def test_decode_step_past_must_be_positive() -> None:
    with pytest.raises(ValueError, match="llama past must be an integer >= 1, got 0"):
        llama_decode(1, past=0)
