"""Generation on a key / value cache the executor keeps in place
(models.llama.llama_step, frameworks.native.generation): its steps against
the decode step fed its past and the prefill of every position, greedy
tokens against transformers' generate, no copy and no re-plan per step,
and ``pyparbench generate`` natively and in llama.cpp."""

from __future__ import annotations

import importlib.util
import json
import math
from typing import Any

import numpy as np
import pytest

from pyparbench.cli import main
from pyparbench.executor import compile_graph
from pyparbench.frameworks.generation import GenerationRequest, bytes_per_token, prompt_ids
from pyparbench.frameworks.generation_run import run_generation
from pyparbench.frameworks.native.generation import (
    CachedDecoder,
    KVCache,
    resolve_weights,
    weights_memory,
)
from pyparbench.models.llama import (
    CACHE_LENGTH,
    LLAMA_SIZES,
    cache_names,
    config_of,
    llama_decode,
    llama_prefill,
    llama_step,
)
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

# A small copy of llama-tiny: the steps' checks stay fast.
SMALL = {"hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 96, "vocab": 128}
PROMPT = [3, 10, 17, 24, 31]


def _error(got: np.ndarray, want: np.ndarray) -> float:
    """Largest difference relative to the largest value."""
    return float(np.max(np.abs(got.astype(np.float64) - want)) / np.max(np.abs(want)))


def _run(cg: Any, feeds: dict[str, Any], threads: int) -> list[np.ndarray]:
    cg.set_inputs(feeds)
    cg.run(Settings(intra_op=threads), repeats=1, warmup=0)
    return list(cg.outputs().values())


@pytest.mark.parametrize("threads", [1, 2])
def test_steps_in_place_match_the_prefill_and_the_decode_step_fed_its_past(
        threads: int) -> None:
    """A prompt step of 5 tokens then two token steps on one cache: each
    position's logits as the prefill of all 7 computes them, the first token
    step's as llama_decode fed the cache's 5 rows as its past (and the rows it
    appends are the decode step's new key / value outputs)."""
    ids = np.array([PROMPT + [40, 77]])
    context = 9
    prompt_step = compile_graph(llama_step(1, new_tokens=5, context=context, all_logits=True,
                                           **SMALL))
    token_step = compile_graph(llama_step(1, new_tokens=1, context=context, **SMALL))
    cache = KVCache(config_of(prompt_step.graph), 1, context)
    for step in (prompt_step, token_step):
        cache.bind(step)
    (full,) = _run(compile_graph(llama_prefill(1, prompt=7, all_logits=True, **SMALL)),
                   {"input_ids": ids}, threads)
    full = full.astype(np.float64)
    (first,) = _run(prompt_step, {"input_ids": ids[:, :5], CACHE_LENGTH: [0]}, threads)
    assert first.shape == (1, 5, 128)
    assert _error(first, full[:, :5]) <= 1e-5
    past = {f"past_key_values.{i}.{part}": np.ascontiguousarray(arr[:, :, :5])
            for i, pair in enumerate(cache.layers) for part, arr in zip(("key", "value"), pair,
                                                                         strict=True)}
    decoded = _run(compile_graph(llama_decode(1, past=5, **SMALL)),
                   {"input_ids": ids[:, 5:6], **past}, threads)
    for at in (5, 6):
        (logits,) = _run(token_step, {"input_ids": ids[:, at:at + 1], CACHE_LENGTH: [at]},
                         threads)
        assert _error(logits, full[:, at]) <= 1e-5, at
        if at == 5:
            assert _error(logits, decoded[0].astype(np.float64)) <= 1e-5
            for i, (k, v) in enumerate(cache.layers):
                np.testing.assert_allclose(k[:, :, 5:6], decoded[1 + 2 * i], rtol=0, atol=1e-5)
                np.testing.assert_allclose(v[:, :, 5:6], decoded[2 + 2 * i], rtol=0, atol=1e-5)
    # Rows past the length are never written.
    assert all(not k[:, :, 7:].any() and not v[:, :, 7:].any() for k, v in cache.layers)


def test_the_reference_reads_the_cache_up_to_its_length() -> None:
    """The numpy reference of a token step: attention over the cache's
    first ``length`` rows, positions from the length, as the native plan."""
    g = llama_step(1, new_tokens=1, context=6, **SMALL)
    rng = np.random.default_rng(0)
    feeds: dict[str, Any] = {"input_ids": np.array([[9]]), CACHE_LENGTH: np.array([3])}
    for k_name, v_name in cache_names(g.meta["layers"]):
        feeds[k_name] = rng.standard_normal((1, 2, 6, 16)).astype(np.float32)
        feeds[v_name] = rng.standard_normal((1, 2, 6, 16)).astype(np.float32)
    want = next(iter(reference_forward(g, feeds).values()))
    cg = compile_graph(g)
    cache = {name: feeds[name].copy() for pair in cache_names(g.meta["layers"]) for name in pair}
    for name, arr in cache.items():
        cg.bind_state(name, arr)
    (got,) = _run(cg, {"input_ids": feeds["input_ids"], CACHE_LENGTH: feeds[CACHE_LENGTH]}, 1)
    assert _error(got, want) <= 1e-5
    # The step wrote its row at the length, nowhere else.
    for name, arr in cache.items():
        np.testing.assert_array_equal(arr[:, :, :3], feeds[name][:, :, :3])
        np.testing.assert_array_equal(arr[:, :, 4:], feeds[name][:, :, 4:])
        assert not np.array_equal(arr[:, :, 3], feeds[name][:, :, 3])


def test_greedy_generation_matches_transformers_generate() -> None:
    """5 prompt tokens then 4 greedy ones on llama-tiny: the token ids of
    transformers' LlamaForCausalLM.generate on the same weights, each step's
    logits within 1e-4 of its scores."""
    from _transformers import torch  # noqa: PLC0415 (optional: skips this test alone)
    from pyparbench.frameworks.torch.llama import llama_for_causal_lm  # noqa: PLC0415 (needs torch)

    model = llama_for_causal_lm(llama_prefill(1, size="llama-tiny"))
    ids = np.array([PROMPT])
    with torch.inference_mode():
        out = model.generate(torch.from_numpy(ids), max_new_tokens=4, do_sample=False,
                             output_logits=True, return_dict_in_generate=True,
                             pad_token_id=0, eos_token_id=None)
    want_tokens = out.sequences[0, 5:].numpy()
    decoder = CachedDecoder(1, size="llama-tiny", prompt=5, context=9)
    logits = [decoder.prefill(ids)]
    tokens = [int(np.argmax(logits[-1]))]
    for _ in range(3):
        logits.append(decoder.decode([[tokens[-1]]]))
        tokens.append(int(np.argmax(logits[-1])))
    np.testing.assert_array_equal(tokens, want_tokens)
    for got, want in zip(logits, out.logits, strict=True):
        assert _error(got, want.numpy().astype(np.float64)) <= 1e-4
    again, _, steps = decoder.greedy(ids, 4)
    np.testing.assert_array_equal(again[0], want_tokens)
    assert len(steps) == 3


@pytest.mark.parametrize("settings", [
    Settings(intra_op=2, operator="framework"),  # the steps cut into blocks of the batch
    Settings(graph_opt="none"),
], ids=["framework-2", "no-passes"])
def test_greedy_tokens_do_not_depend_on_the_setting(settings: Settings) -> None:
    """Two sequences: the tokens of the default setting, in framework mode
    (each block of the batch its slice of the cache, one length for all)
    and without the graph passes."""
    ids = np.array([PROMPT, [5, 9, 2, 44, 8]])
    want, _, _ = CachedDecoder(2, size="llama-tiny", prompt=5, context=9).greedy(ids, 4)
    got, _, _ = CachedDecoder(2, size="llama-tiny", prompt=5, context=9,
                              settings=settings).greedy(ids, 4)
    np.testing.assert_array_equal(got, want)


def test_steps_neither_copy_the_cache_nor_re_plan() -> None:
    """The cache's buffers are the ones the plan writes (their data
    pointers and the plan object unchanged across steps), the length
    advances by the tokens of each step, and a step past the context is
    refused naming the length and the context."""
    decoder = CachedDecoder(2, size="llama-tiny", prompt=4, context=6, **SMALL)
    step = decoder.token_step
    pointers = [(k.ctypes.data, v.ctypes.data) for k, v in decoder.cache.layers]
    assert all(p % 64 == 0 for pair in pointers for p in pair)
    decoder.prefill(np.array([PROMPT[:4], PROMPT[1:]]))
    assert decoder.cache.length == 4
    plan = step._plan
    for length in (5, 6):
        decoder.decode([[1], [2]])
        assert decoder.cache.length == length
        assert step._plan is plan
        assert [(k.ctypes.data, v.ctypes.data) for k, v in decoder.cache.layers] == pointers
        # The row written in place, in the caller's buffer.
        assert all(k[:, :, length - 1].any() for k, _ in decoder.cache.layers)
    with pytest.raises(ValueError, match=r"at length 6 .* context of 6"):
        decoder.decode([[1], [2]])
    assert decoder.cache.length == 6


def test_a_length_past_the_context_is_refused_by_the_plan() -> None:
    """A length fed by hand past the context: the native step refuses it
    (its rotary and attention nodes check it when they run)."""
    g = llama_step(1, new_tokens=2, context=4, **SMALL)
    cg = compile_graph(g)
    caches = {name: np.zeros((1, 2, 4, 16), np.float32)
              for pair in cache_names(g.meta["layers"]) for name in pair}
    cg.set_inputs({"input_ids": np.array([[1, 2]]), CACHE_LENGTH: np.array([3]), **caches})
    with pytest.raises(ValueError, match="length 3 plus 2"):
        cg.run(Settings(), repeats=1, warmup=0)


def test_a_bound_cache_is_not_held_twice() -> None:
    """Binding a cache input frees the plan's own buffer of it: the plan's
    memory drops by the caches' bytes (a large model's cache is GBs)."""
    g = llama_step(1, new_tokens=1, context=64, **SMALL)
    names = [name for pair in cache_names(g.meta["layers"]) for name in pair]
    rng = np.random.default_rng(0)
    caches = {n: rng.standard_normal((1, 2, 64, 16)).astype(np.float32) for n in names}
    feeds = {"input_ids": np.array([[9]]), CACHE_LENGTH: np.array([3])}
    buffer_bytes = []
    outputs = []
    for bound in (False, True):
        cg = compile_graph(g)
        if bound:
            for n, arr in caches.items():
                cg.bind_state(n, arr.copy())
            cg.set_inputs(feeds)
        else:
            cg.set_inputs({**feeds, **caches})
        res = cg.run(Settings(), repeats=1, warmup=0)
        buffer_bytes.append(res.resolved["graph_opt"]["buffer_bytes"])
        outputs.append(next(iter(cg.outputs().values())))
    assert buffer_bytes[0] - buffer_bytes[1] == sum(a.nbytes for a in caches.values())
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_the_two_steps_hold_one_set_of_weights() -> None:
    """The token step reads the prompt step's arrays, not a second drawing
    of the same values: a 1B decoder's weights are made once."""
    decoder = CachedDecoder(1, size="llama-tiny", prompt=4, context=6)
    prompt, token = decoder.prompt_step.graph, decoder.token_step.graph
    weighted = [node.name for node in token.nodes if node.op in ("linear", "embedding_bag",
                                                                  "rms_norm", "rotary")]
    assert len(weighted) == 2 * 11 + 3  # per layer 7 matrices, 2 norms, 2 rotary tables
    for name in weighted:
        assert token[name].params is prompt[name].params, name


@pytest.mark.parametrize("threads", [1, 2])
def test_how_the_weights_are_held_changes_no_bit(threads: int) -> None:
    """Each way of holding the weights (the token step packing its own copy
    or reading the prompt step's arrays in place; the prompt step always in
    place) gives the logits of steps whose kernels each pack their own
    copies, bit for bit, and the same greedy tokens."""
    ids = np.array([PROMPT, [5, 9, 2, 44, 8]])
    settings = Settings(intra_op=threads)
    prompt_graph = llama_step(2, size="llama-tiny", new_tokens=5, context=9)
    packed = [compile_graph(prompt_graph),
              compile_graph(llama_step(2, size="llama-tiny", new_tokens=1, context=9))]
    cache = KVCache(config_of(prompt_graph), 2, 9)
    for step in packed:
        cache.bind(step)
    (want_first,) = _run(packed[0], {"input_ids": ids, CACHE_LENGTH: [0]}, threads)
    (want_next,) = _run(packed[1], {"input_ids": [[1], [2]], CACHE_LENGTH: [5]}, threads)
    tokens = []
    for weights in ("copies", "packed", "in-place"):
        decoder = CachedDecoder(2, size="llama-tiny", prompt=5, context=9, settings=settings,
                                weights=weights)
        assert decoder.weights == weights
        assert decoder.prompt_step.weights_in_place == (weights != "copies")
        assert decoder.token_step.weights_in_place == (weights == "in-place")
        np.testing.assert_array_equal(decoder.prefill(ids), want_first)
        np.testing.assert_array_equal(decoder.decode([[1], [2]]), want_next)
        tokens.append(decoder.greedy(ids, 4)[0])
    np.testing.assert_array_equal(tokens[0], tokens[1])
    np.testing.assert_array_equal(tokens[0], tokens[2])


def test_auto_holds_the_weights_the_fastest_way_the_memory_allows() -> None:
    """"auto" takes "copies" where their bytes and a tenth fit the memory
    available, else "packed", else "in-place"; the bytes count every
    matrix (lm_head's too), the embedding table and the cache."""
    cfg = LLAMA_SIZES["llama-3.2-1b"].config
    # The step's own graph (its weights made only when read: none here).
    g = llama_step(1, size="llama-3.2-1b", new_tokens=1, context=160)
    need = weights_memory(g, 1, 160)
    matrices = sum(4 * n.num_params for n in g.nodes if n.op == "linear")
    cache = 4 * 2 * cfg.layers * cfg.kv_heads * cfg.head_dim * 160
    assert need["in-place"] == 4 * g.num_params + cache
    assert need["packed"] - need["in-place"] == need["copies"] - need["packed"] == matrices
    # 6.0 GB of weights, 5.0 GB of them the products' matrices (lm_head's 1.05 GB too).
    assert 5.9e9 < need["in-place"] < 6.1e9 and 4.9e9 < matrices < 5.0e9
    for room, want in ((int(1.1 * need["copies"]) + 1, "copies"),
                       (int(1.1 * need["copies"]) - 1, "packed"),
                       (int(1.1 * need["packed"]) - 1, "in-place"), (1, "in-place")):
        assert resolve_weights("auto", g, 1, 160, available=room) == want, room
    assert resolve_weights("packed", g, 1, 160, available=1) == "packed"
    with pytest.raises(ValueError, match="weights 'twice' is not one of auto, copies"):
        resolve_weights("twice", g, 1, 160)


def test_the_token_step_packs_only_where_the_prompt_step_keeps_no_copy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the prompt step's matmul packs a copy of its own (a blocked
    layout, on AVX-512), the packed token step reads the arrays in place
    instead: one packed copy at most. The probe asks ops.Linear the node's
    own question."""
    from pyparbench import ops  # noqa: PLC0415
    from pyparbench.frameworks.native import generation  # noqa: PLC0415

    decoder = CachedDecoder(1, size="llama-tiny", prompt=5, context=9, weights="packed")
    plain = ops.Linear(5, 256, 256, weights_in_place=True).weights_in_place
    assert decoder.token_step.weights_in_place == (not plain)
    monkeypatch.setattr(generation, "_matmuls_read_in_place", lambda step, settings: False)
    decoder = CachedDecoder(1, size="llama-tiny", prompt=5, context=9, weights="packed")
    assert decoder.prompt_step.weights_in_place and decoder.token_step.weights_in_place
    with pytest.raises(ValueError, match="weights 'twice' is not one of auto, copies, packed"):
        CachedDecoder(1, size="llama-tiny", prompt=5, context=9, weights="twice")


# Drawn, compiled and run in a fresh process: RSS (resident pages) after
# the imports, and after a prompt step and two token steps, in bytes.
_RSS_SCRIPT = """
import json, os, sys
import numpy as np
from pyparbench.frameworks.native.generation import CachedDecoder
from pyparbench.settings import Settings

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

start = rss()
d = CachedDecoder(1, size="llama-bandwidth", prompt=32, context=40, layers=3, vocab=4096,
                  settings=Settings(), weights=sys.argv[1])
d.prefill(np.arange(32)[None] % 4096)
d.decode([[1]])
d.decode([[2]])
g = d.prompt_step.graph
print(json.dumps({"growth": rss() - start, "weights": 4 * g.num_params,
                  "matrices": sum(4 * n.num_params for n in g.nodes if n.op == "linear")}))
"""


@pytest.mark.parametrize("weights", ["packed", "in-place"])
def test_running_both_steps_holds_the_weights_at_most_once_more(weights: str) -> None:
    """A decoder of 167 MB of weights (151 MB of matrices), both steps run
    in a fresh process: its RSS grows by under 1.2x the weights with the
    weights read in place, and by under 1.2x the weights and one copy of
    the matrices with the token step's packed copy (20 % for the rest: the
    panels rounded to whole huge pages, the plans' buffers, oneDNN's code).
    Each step packing its own copies, as before, grew it by 2.9x the
    weights."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    done = subprocess.run([sys.executable, "-P", "-c", _RSS_SCRIPT, weights], check=True,
                          capture_output=True, text=True, timeout=300)
    got = json.loads(done.stdout)
    assert 140e6 < got["matrices"] < got["weights"] < 180e6
    held = got["weights"] + (got["matrices"] if weights == "packed" else 0)
    assert got["weights"] <= got["growth"] < 1.2 * held, got


def test_bind_state_refuses_what_it_cannot_bind() -> None:
    cg = compile_graph(llama_step(1, new_tokens=1, context=4, **SMALL))
    with pytest.raises(ValueError, match="only a float32 graph input"):
        cg.bind_state(CACHE_LENGTH, np.zeros(1, np.float32))
    read_only = np.zeros((1, 2, 4, 16), np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cg.bind_state("cache.0.key", read_only)
    with pytest.raises(ValueError, match=r"shape"):
        cg.bind_state("cache.0.key", np.zeros((1, 2, 5, 16), np.float32))
    cg.bind_state("cache.0.key", np.zeros((1, 2, 4, 16), np.float32))
    with pytest.raises(ValueError, match="bound to buffers"):
        cg.set_inputs({"cache.0.key": np.zeros((1, 2, 4, 16), np.float32)})


def test_llama_step_refuses_bad_sizes() -> None:
    with pytest.raises(ValueError, match="new_tokens must be an integer >= 1, got 0"):
        llama_step(1, new_tokens=0)
    with pytest.raises(ValueError, match="context must be an integer >= 5, got 4"):
        llama_step(1, new_tokens=5, context=4)


def test_bytes_per_token_counts_weights_embedding_row_and_mean_cache() -> None:
    cfg = LLAMA_SIZES["llama-tiny"].config
    g = llama_prefill(1, size="llama-tiny")
    weights = sum(4 * int(np.prod(n.params.shapes[k])) for n in g.nodes for k in n.params.shapes
                  if n.op in ("linear", "rms_norm"))
    cache = 2 * cfg.layers * cfg.kv_heads * cfg.head_dim * 4 * (32 + 16 / 2)
    assert bytes_per_token(cfg, 1, 32, 16) == int(weights + 4 * cfg.hidden + cache)


def _generate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["generate", "llama-tiny", *args, "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_generate_json_has_the_figures(capsys: pytest.CaptureFixture[str]) -> None:
    out = _generate_json(capsys, "--prompt", "8", "--new", "4")
    for key in ("ttft_ms", "tpot_ms", "tokens_per_s", "bytes_per_token"):
        assert math.isfinite(out[key]) and out[key] > 0, key
    assert (out["model"], out["prompt"], out["new"], out["batch"], out["framework"]) == \
        ("llama-tiny", 8, 4, 1, "native")
    assert out["settings"]["intra_op"] == 1 and len(out["settings"]["process_cpus"]) == 1
    assert out["settings"]["weights"] == "copies"  # "auto": llama-tiny fits every way
    assert len(out["tokens"]) == 1 and len(out["tokens"][0]) == 4
    assert len(out["step_ms"]) == 3
    # The same tokens as an in-process greedy generation of the same prompt.
    decoder = CachedDecoder(1, size="llama-tiny", prompt=8, context=12)
    tokens, _, _ = decoder.greedy(prompt_ids(1, 8, 2048), 4)
    assert out["tokens"] == tokens.tolist()
    # And with the weights read in place by both steps.
    in_place = _generate_json(capsys, "--prompt", "8", "--new", "4", "--weights", "in-place")
    assert in_place["settings"]["weights"] == "in-place"
    assert in_place["tokens"] == out["tokens"]
    # The table names the way taken.
    assert main(["generate", "llama-tiny", "--prompt", "8", "--new", "4"]) == 0
    assert "weights: copies (--weights auto)" in capsys.readouterr().out


@pytest.mark.parametrize("args, named", [
    (["llama-tiny", "--prompt", "0"], "--prompt must be >= 1, got 0"),
    (["llama-tiny", "--new", "0"], "--new must be >= 1, got 0"),
    (["llama-tiny", "--prompt", "500", "--new", "13"], "513 tokens exceed llama-tiny's context "
                                                       "of 512"),
    (["no-such-model"], "'no-such-model' is not a model"),
    (["mlp-512"], "'mlp-512' is not a decoder"),
    (["llama-tiny", "--framework", "llamacpp", "--batch", "2"], "batch 2"),
    (["llama-tiny", "--weights", "twice"], "invalid choice: 'twice'"),
    (["llama-tiny", "--framework", "torch", "--weights", "in-place"],
     "only the native runtime's weights"),
])
def test_generate_refuses_bad_arguments_by_name(args: list[str], named: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["generate", *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err


def test_llama_cpp_generates_the_native_tokens() -> None:
    """llama.cpp on the GGUF written from the same weights (f32 matrices and
    cache) picks the native greedy tokens: 8 prompt tokens, 4 new."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("llama-cpp-python and gguf (the llm extra) are not installed")
    native = run_generation(GenerationRequest("llama-tiny", 8, 4))
    cpp = run_generation(GenerationRequest("llama-tiny", 8, 4, framework="llamacpp"))
    assert cpp.tokens == native.tokens
    assert cpp.settings["n_threads"] == 1 and cpp.tpot_ms is not None and cpp.tpot_ms > 0
