"""A Llama-style decoder's prefill (Touvron et al. 2023; Llama 3's shapes).

The prompt's P token ids are embedded (an embedding lookup per token), then
each of L layers is pre-norm: x += o(attention(rotary(q(n)), rotary(k(n)),
v(n))) with n = RMSNorm(x), causal and grouped-query (``kv_heads`` key /
value heads, each read by heads / kv_heads query heads, never repeated);
then x += down(SiLU(gate(m)) * up(m)) with m = RMSNorm(x). A final RMSNorm
and the vocabulary projection (``lm_head``) give the logits of the prompt's
last token (the next token's distribution, all a generation's prefill
computes), or with ``all_logits`` those of every position (what
``transformers``' ``LlamaForCausalLM`` returns by default). No biases, as
Llama. Node names follow ``transformers``' parameter names (``layers.0`` /
``self_attn.q_proj`` for ``model.layers.0.self_attn.q_proj``).

Weights are seeded random (nothing is downloaded): projections into a
layer at std 1 / sqrt(fan in), the attention's and the feed-forward's
output projections further by 1 / sqrt(2 L) so that the residual stream
stays O(1) through the layers, RMSNorm scales uniform in [0.5, 1.5]. The
rotary tables are Llama's plain RoPE with ``rope_theta`` (Llama 3's
long-context frequency scaling changes their values, not the shapes or the
cost); they are made on first read, so building and listing a graph of the
8B shape allocates nothing. The 1B and 3B models tie ``lm_head`` to the
embedding table; the graph holds them as two arrays (its parameters count
both).

The named sizes (:data:`LLAMA_SIZES`) fix the prompt length too: a built-in
model's only size knob on the command line is ``--batch`` (prompts per
pass), and the builder's ``prompt`` (and each configuration field) resizes
it from Python.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pyparbench.graph import Graph, GraphBuilder, LazyParams
from pyparbench.graph.node import F32Array
from pyparbench.graph.transformer_math import rope_tables
from pyparbench.models._blocks import check_batch

__all__ = ["CACHE_LENGTH", "LLAMA_SIZES", "LlamaConfig", "LlamaSize", "cache_names", "config_of",
           "llama_decode", "llama_prefill", "llama_step", "transformers_weights"]

# The int64 (1,) input of a step on a cache kept in place: the tokens cached.
CACHE_LENGTH = "cache_length"


@dataclass(frozen=True)
class LlamaConfig:
    """The decoder's shape, as ``transformers``' ``LlamaConfig`` names it."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    rope_theta: float = 10000.0
    eps: float = 1e-5

    def __post_init__(self) -> None:
        sizes = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                 if f.type == "int"}
        bad = {k: v for k, v in sizes.items()
               if isinstance(v, bool) or not isinstance(v, int) or v < 1}
        if bad:
            raise ValueError(f"llama sizes must be integers >= 1, got {bad}")
        if self.hidden % self.heads or self.heads % self.kv_heads \
                or (self.hidden // self.heads) % 2:
            raise ValueError(f"llama needs heads dividing hidden into an even head size and "
                             f"kv_heads dividing heads, got hidden {self.hidden}, heads "
                             f"{self.heads}, kv_heads {self.kv_heads}")
        if not (self.rope_theta > 1 and math.isfinite(self.rope_theta)):
            raise ValueError(f"llama rope_theta must be finite and > 1, got {self.rope_theta}")
        if not (self.eps >= 0 and math.isfinite(self.eps)):
            raise ValueError(f"llama eps must be finite and >= 0, got {self.eps}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads



@dataclass(frozen=True)
class LlamaSize:
    """A named size: its configuration, prompt length, and the most
    positions a generation may take (prompt and new tokens)."""

    config: LlamaConfig
    prompt: int
    description: str
    context: int = 4096


_LLAMA3_VOCAB, _LLAMA3_THETA = 128256, 500000.0
LLAMA_SIZES: dict[str, LlamaSize] = {
    # A few ms per prefill on 2 cores: small enough for a default suite.
    "llama-tiny": LlamaSize(LlamaConfig(hidden=256, layers=2, heads=8, kv_heads=2,
                                        intermediate=704, vocab=2048), 32,
                            "Llama-style decoder prefill, 2 layers of 256, prompt 32", 512),
    # 0.5 GB of weights (424 MB read per decoded token, the embedding table
    # aside): over 4x a server's last-level cache, where decoding is bound by
    # memory bandwidth.
    "llama-bandwidth": LlamaSize(LlamaConfig(hidden=1024, layers=8, heads=16, kv_heads=4,
                                             intermediate=2816, vocab=16384), 128,
                                 "Llama-style decoder prefill, 8 layers of 1024 (0.5 GB), "
                                 "prompt 128", 2048),
    "llama-3.2-1b": LlamaSize(LlamaConfig(hidden=2048, layers=16, heads=32, kv_heads=8,
                                          intermediate=8192, vocab=_LLAMA3_VOCAB,
                                          rope_theta=_LLAMA3_THETA), 128,
                              "Llama 3.2 1B's shapes, prefill of 128 tokens (6.0 GB)", 131072),
    "llama-3.2-3b": LlamaSize(LlamaConfig(hidden=3072, layers=28, heads=24, kv_heads=8,
                                          intermediate=8192, vocab=_LLAMA3_VOCAB,
                                          rope_theta=_LLAMA3_THETA), 128,
                              "Llama 3.2 3B's shapes, prefill of 128 tokens (14.4 GB)", 131072),
    "llama-3.1-8b": LlamaSize(LlamaConfig(hidden=4096, layers=32, heads=32, kv_heads=8,
                                          intermediate=14336, vocab=_LLAMA3_VOCAB,
                                          rope_theta=_LLAMA3_THETA), 128,
                              "Llama 3.1 8B's shapes, prefill of 128 tokens (32.1 GB)", 131072),
}


@lru_cache(maxsize=8)
def _rope(positions: int, head_dim: int, theta: float) -> dict[str, F32Array]:
    """Float32 rotary tables, one pair shared by every rotary node of a graph."""
    out: dict[str, F32Array] = {}
    for name, table in zip(("cos", "sin"), rope_tables(positions, head_dim, theta),
                           strict=True):
        arr = np.ascontiguousarray(table, dtype=np.float32)
        arr.flags.writeable = False
        out[name] = arr
    return out


def _heads(b: GraphBuilder, x: int, n: int, seq: int, heads: int, name: str) -> int:
    """(n, seq, heads * d) -> (n, heads, seq, d)."""
    y = b.reshape(x, (n, seq, heads, -1), name=f"{name}_split")
    return b.transpose(y, (0, 2, 1, 3), name=f"{name}_heads")


def llama_prefill(batch: int = 1, *, size: str = "llama-tiny", prompt: int | None = None,
                  hidden: int | None = None, layers: int | None = None,
                  heads: int | None = None, kv_heads: int | None = None,
                  intermediate: int | None = None, vocab: int | None = None,
                  all_logits: bool = False, seed: int = 0) -> Graph:
    """The prefill of named size ``size`` on int64 ``input_ids`` (batch, prompt).

    Parameters
    ----------
    batch
        Prompts per pass (>= 1).
    size
        A key of :data:`LLAMA_SIZES`.
    prompt
        Tokens per prompt (default: the size's).
    hidden, layers, heads, kv_heads, intermediate, vocab
        Replace the size's configuration field of that name (a small copy
        of a large shape, for tests).
    all_logits
        Logits of every position (batch, prompt, vocab) instead of the last
        one's (batch, vocab).
    seed
        Seed of the random weights.

    Raises
    ------
    ValueError
        An unknown size, a prompt below 1 or a configuration that does not
        fit (heads not dividing hidden into an even head size, kv_heads not
        dividing heads).
    """
    cfg = _config(size, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
                  intermediate=intermediate, vocab=vocab)
    seq = LLAMA_SIZES[size].prompt if prompt is None else prompt
    _check_count("prompt", seq, 1)
    return _decoder(check_batch(batch), seq, 0, cfg, all_logits, seed)


def llama_decode(batch: int = 1, *, size: str = "llama-tiny", past: int | None = None,
                 hidden: int | None = None, layers: int | None = None,
                 heads: int | None = None, kv_heads: int | None = None,
                 intermediate: int | None = None, vocab: int | None = None,
                 seed: int = 0) -> Graph:
    """The decode step of named size ``size``: one new token per sequence,
    int64 ``input_ids`` (batch, 1) at position ``past``, against the keys
    and values of the ``past`` tokens before it, float32 inputs
    ``past_key_values.{i}.key`` / ``.value`` (batch, kv_heads, past,
    head_dim) per layer (rotary applied to the keys, as ``transformers``
    caches them). Outputs: the new token's logits (batch, vocab), then per
    layer the new key and value rows (batch, kv_heads, 1, head_dim), which a
    server appends to its cache. The weights are those of
    :func:`llama_prefill` with the same size and seed (keyed by node name).

    ``past`` defaults to the size's prompt (the step right after its
    prefill); the configuration fields resize the size as in
    :func:`llama_prefill`. ValueError as there, and for a ``past`` below 1.
    """
    cfg = _config(size, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
                  intermediate=intermediate, vocab=vocab)
    cached = LLAMA_SIZES[size].prompt if past is None else past
    _check_count("past", cached, 1)
    return _decoder(check_batch(batch), 1, cached, cfg, False, seed)


def llama_step(batch: int = 1, *, size: str = "llama-tiny", new_tokens: int = 1,
               context: int | None = None, hidden: int | None = None,
               layers: int | None = None, heads: int | None = None,
               kv_heads: int | None = None, intermediate: int | None = None,
               vocab: int | None = None, all_logits: bool = False, seed: int = 0) -> Graph:
    """A step of named size ``size`` on a cache kept in place: ``new_tokens``
    (S) tokens per sequence, int64 ``input_ids`` (batch, S), appended to
    per-layer caches preallocated to ``context`` (C) positions, float32
    inputs ``cache.{i}.key`` / ``.value`` (batch, kv_heads, C, head_dim)
    (:func:`cache_names`), whose first L rows are filled, L the int64 (1,)
    input :data:`CACHE_LENGTH`. The step writes the new rows at L in place
    and its tokens take positions L .. L + S - 1 (the rotary rows too), all
    read when it runs: one compiled step serves every length, and a prompt
    step (S = P) and a token step (S = 1) bound to the same caches make a
    generation (pyparbench.frameworks.native.generation). Outputs the logits
    of the last new token (batch, vocab), or with ``all_logits`` of each
    (batch, S, vocab). The weights are those of :func:`llama_prefill` with the
    same size and seed (keyed by node name).

    ``context`` defaults to the size's prompt plus ``new_tokens``;
    ValueError as :func:`llama_prefill`, and for ``new_tokens`` below 1 or a
    context shorter than it.
    """
    cfg = _config(size, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
                  intermediate=intermediate, vocab=vocab)
    _check_count("new_tokens", new_tokens, 1)
    c = LLAMA_SIZES[size].prompt + new_tokens if context is None else context
    _check_count("context", c, new_tokens)
    return _decoder(check_batch(batch), new_tokens, 0, cfg, all_logits, seed, context=c)


def cache_names(layers: int) -> list[tuple[str, str]]:
    """The key and value cache inputs of each layer of :func:`llama_step`."""
    return [(f"cache.{i}.key", f"cache.{i}.value") for i in range(layers)]


def _config(size: str, **given: int | None) -> LlamaConfig:
    named = LLAMA_SIZES.get(size)
    if named is None:
        raise ValueError(f"unknown llama size {size!r}; valid sizes: {', '.join(LLAMA_SIZES)}")
    return dataclasses.replace(named.config, **{k: v for k, v in given.items() if v is not None})


def _check_count(what: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"llama {what} must be an integer >= {least}, got {value!r}")


def _decoder(n: int, seq: int, past: int, cfg: LlamaConfig, all_logits: bool,
             seed: int, context: int = 0) -> Graph:
    """The prefill (``past`` 0: ``seq`` prompt tokens, causal attention among
    them), a decode step (``seq`` new tokens after ``past`` cached ones), or
    with ``context`` a step on caches of that many positions kept in place."""
    d = cfg.head_dim
    kv = cfg.kv_heads * d
    # Weights keyed by node name: the prefill (last position's logits or
    # every position's) and the decode step share one set of weights.
    b = GraphBuilder("llama", seed, params_by_name=True)
    ids = b.input("input_ids", (n, seq), "int64")
    caches = [tuple(b.input(f"past_key_values.{i}.{part}", (n, cfg.kv_heads, past, d))
                    for part in ("key", "value")) for i in range(cfg.layers)] if past else []
    length = b.input(CACHE_LENGTH, (1,), "int64") if context else None
    if context:
        caches = [tuple(b.input(name, (n, cfg.kv_heads, context, d)) for name in pair)
                  for pair in cache_names(cfg.layers)]
    tokens = b.reshape(ids, (n * seq, 1), name="token_ids")
    x = b.embedding_bag(tokens, cfg.vocab, cfg.hidden, name="embed_tokens")
    x = b.reshape(x, (n, seq, cfg.hidden), name="embedded")
    rows = context or seq
    table_shape = {"cos": (rows, d), "sin": (rows, d)}

    def rope_params() -> dict[str, F32Array]:
        if context:  # every position of the context, picked by the length at run time
            return _rope(context, d, cfg.rope_theta)
        if not past:
            return _rope(seq, d, cfg.rope_theta)
        # The rows of positions past .. past + seq - 1.
        return {k: v[past:] for k, v in _rope(past + seq, d, cfg.rope_theta).items()}

    # Projections into a layer at std 1 / sqrt(fan in) (the builder's is
    # sqrt(2 / fan in)); out of a layer smaller still, by 1 / sqrt(2 L).
    into = math.sqrt(0.5)
    out_of = into / math.sqrt(2 * cfg.layers)
    new_rows: list[int] = []
    for i in range(cfg.layers):
        with b.scope(f"layers.{i}"):
            h = b.rms_norm(x, eps=cfg.eps, name="input_layernorm")
            q, k, v = (_heads(b, b.linear(h, width, bias=False, weight_scale=into,
                                          name=f"self_attn.{p}_proj"),
                              n, seq, count, f"self_attn.{p}")
                       for p, width, count in (("q", cfg.hidden, cfg.heads),
                                               ("k", kv, cfg.kv_heads),
                                               ("v", kv, cfg.kv_heads)))
            q, k = (b.rotary(t, length, context=context or None, name=f"self_attn.{p}_rotary")
                    for p, t in (("q", q), ("k", k)))
            for t in (q, k):
                b.set_weights(t, LazyParams(table_shape, rope_params))
            if context:
                assert length is not None
                cache_k, cache_v = caches[i]
                ctx = b.decode_attention_in_place(q, k, v, cache_k, cache_v, length,
                                                  name="self_attn.attention")
            elif past:
                new_rows += [k, v]
                ctx = b.decode_attention(q, k, v, *caches[i], name="self_attn.attention")
            else:
                ctx = b.attention(q, k, v, causal=True, name="self_attn.attention")
            ctx = b.transpose(ctx, (0, 2, 1, 3), name="self_attn.context_tokens")
            ctx = b.reshape(ctx, (n, seq, cfg.hidden), name="self_attn.context_merge")
            o = b.linear(ctx, cfg.hidden, bias=False, weight_scale=out_of,
                         name="self_attn.o_proj")
            x = b.add(x, o, name="attn_residual")
            h = b.rms_norm(x, eps=cfg.eps, name="post_attention_layernorm")
            gate = b.linear(h, cfg.intermediate, bias=False, weight_scale=into,
                            name="mlp.gate_proj")
            up = b.linear(h, cfg.intermediate, bias=False, weight_scale=into,
                          name="mlp.up_proj")
            down = b.linear(b.glu(gate, up, "swish", name="mlp.act"), cfg.hidden, bias=False,
                            weight_scale=out_of, name="mlp.down_proj")
            x = b.add(x, down, name="mlp_residual")
    if not all_logits and seq > 1:
        # The last position of each prompt: tokens first, then its rows.
        x = b.transpose(x, (1, 0, 2), name="positions_first")
        x = b.slice(x, seq - 1, 1, name="last_position")
        x = b.reshape(x, (n, cfg.hidden), name="last_hidden")
    x = b.rms_norm(x, eps=cfg.eps, name="norm")
    logits = b.linear(x, cfg.vocab, bias=False, weight_scale=into, name="lm_head")
    if not all_logits and seq == 1:
        logits = b.reshape(logits, (n, cfg.vocab), name="logits")
    meta = {"batch": n, "prompt": seq, "all_logits": all_logits, **dataclasses.asdict(cfg)}
    if past:
        meta["past"] = past
    if context:
        meta["context"] = context
    return b.build([logits, *new_rows], meta)


def config_of(graph: Graph) -> LlamaConfig:
    """The configuration a built-in decoder graph was built with (its meta);
    ValueError for any other graph."""
    fields = [f.name for f in dataclasses.fields(LlamaConfig)]
    if graph.name != "llama" or any(f not in graph.meta for f in fields):
        raise ValueError(f"graph {graph.name!r} is not a built-in decoder "
                         f"(pyparbench.models.llama): its meta lacks {fields}")
    return LlamaConfig(**{f: graph.meta[f] for f in fields})


# A decoder node's op -> the parameter name of its one array.
_WEIGHT_OF = {"embedding_bag": "table", "rms_norm": "scale", "linear": "weight"}


def transformers_weights(graph: Graph) -> dict[str, F32Array]:
    """A built-in decoder's weights under the parameter names of
    ``transformers``' ``LlamaForCausalLM`` (``model.layers.0.self_attn.q_proj.weight``,
    (out_features, in_features), untied ``lm_head.weight``): what PyTorch
    loads and what llama.cpp's GGUF file is written from."""
    config_of(graph)
    out: dict[str, F32Array] = {}
    for node in graph.nodes:
        key = _WEIGHT_OF.get(node.op)
        if key is None:
            continue
        name = node.name.replace("/", ".")
        prefix = "" if name == "lm_head" else "model."
        out[f"{prefix}{name}.weight"] = np.asarray(node.params[key])
    return out
