"""Greedy generation by the built-in decoder on a key / value cache the
executor keeps in place.

Two compiled steps of :func:`pyparbench.models.llama.llama_step` share one
:class:`KVCache`: the prompt step (S = P new tokens) fills rows 0 .. P - 1
of each layer's cache and gives the first token; each token step (S = 1)
appends one row at the current length. The cache is allocated once (64-byte
aligned, to the context) and bound to both plans without a copy
(:meth:`~pyparbench.executor.CompiledGraph.bind_state`); a step copies in
only its token ids and the length (one int64), which its attention and
rotary nodes read when they run, so no step copies the past or re-plans.

The weights are drawn once (the token step's graph takes the prompt step's
arrays) and held as ``weights`` says: with ``"copies"`` each step packs its
own copy of the matrices (oneDNN's layout for the prompt's products, the
streamed product's panels for the one-row token step: the fastest steps);
with ``"packed"`` only the token step packs, the prompt step's products
reading the arrays where they are; with ``"in-place"`` both steps read them
there, the weights held once (:func:`~pyparbench.executor.compile_graph`'s
``weights_in_place``); ``"auto"`` takes the fastest of these whose memory
(:func:`weights_memory`) the machine has available. Either way the logits
are the same bits. Where the prompt step's matmul cannot read them in place
(oneDNN picks a blocked layout, on AVX-512) it packs its own copy and, under
``"packed"``, the token step then reads the arrays in place: one packed copy
at most.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from pyparbench import ops
from pyparbench.executor import CompiledGraph, compile_graph
from pyparbench.graph import Graph
from pyparbench.frameworks.generation import (
    NATIVE_WEIGHTS,
    GenerationRecord,
    GenerationRequest,
    checked_prompts,
    prompt_ids,
    record_from_times,
    timed_steps,
)
from pyparbench.memory import aligned_empty, available_bytes
from pyparbench.models.llama import CACHE_LENGTH, LlamaConfig, cache_names, config_of, llama_step
from pyparbench.settings import Settings

__all__ = ["CachedDecoder", "KVCache", "generate", "resolve_weights", "weights_memory"]


def _sharing_weights(graph: Graph, source: Graph) -> Graph:
    """``graph`` with each node's parameters taken from ``source``'s node of
    the same name and shapes: the two steps draw the same weights (seeded by
    name), and held once a 1B decoder's 6 GB are not made twice."""
    by_name = {node.name: node for node in source.nodes}
    nodes = []
    for node in graph.nodes:
        twin = by_name.get(node.name)
        if twin is not None and len(node.params) and twin.params.shapes == node.params.shapes:
            node = dataclasses.replace(node, params=twin.params)
        nodes.append(node)
    return Graph(graph.name, nodes, graph.outputs, graph.meta)


def _matmuls_read_in_place(step: CompiledGraph, settings: Settings) -> bool:
    """Whether every linear node of ``step`` that oneDNN's matmul runs under
    ``settings`` (more rows than the streamed product takes) reads its
    weights in place when asked (``ops.Linear(weights_in_place=True)``
    granted: the matmul keeps them plain, gemm:jit). False where one packs a
    copy of its own anyway (a blocked layout, on AVX-512), or where the
    products run on another library or precision (each packs or reads as
    it does)."""
    if settings.library != "onednn" or settings.precision != "fp32":
        return False
    g = step.optimized(settings)
    asked = set()
    for node in g.nodes:
        if node.op != "linear":
            continue
        x = g[node.inputs[0]].shape
        rows, (n, k) = int(np.prod(x[:-1])), node.params.shapes["weight"]
        activation = "relu" if node.attrs.get("relu") else node.attrs.get("activation") or None
        if rows > ops.STREAMED_MAX_ROWS or activation is not None:  # else streamed: in place
            asked.add((rows, n, k, "bias" in node.params, activation))
    return all(ops.Linear(rows, n, k, bias=bias, activation=activation,
                          threads=settings.intra_op, weights_in_place=True).weights_in_place
               for rows, n, k, bias, activation in asked)


def weights_memory(step: Graph, batch: int, context: int) -> dict[str, int]:
    """Bytes a native generation with prompt or token step ``step`` holds
    under each way of holding the weights but "auto": its parameters (every
    matrix, the embedding table, norms and rotary tables), the copies of the
    matrices that way packs, and the cache."""
    cfg = config_of(step)
    matrices = sum(4 * n.num_params for n in step.nodes if n.op == "linear")
    held = 4 * step.num_params + 4 * 2 * cfg.layers * batch * cfg.kv_heads * cfg.head_dim * context
    return {"copies": held + 2 * matrices, "packed": held + matrices, "in-place": held}


def resolve_weights(weights: str, step: Graph, batch: int, context: int,
                    available: int | None = None) -> str:
    """``weights`` itself, or for "auto" the fastest way whose memory
    (:func:`weights_memory`), with a tenth to spare, fits ``available``
    (MemAvailable by default; "copies" where it is unknown), else
    "in-place". ValueError naming any other."""
    if weights not in NATIVE_WEIGHTS:
        raise ValueError(f"weights {weights!r} is not one of {', '.join(NATIVE_WEIGHTS)}")
    if weights != "auto":
        return weights
    room = available_bytes() if available is None else available
    need = weights_memory(step, batch, context)
    return next((w for w in ("copies", "packed") if room is None or 1.1 * need[w] <= room),
                "in-place")


class KVCache:
    """Each layer's keys and values (batch, kv_heads, context, head_dim),
    float32, zeroed, the first :attr:`length` rows filled."""

    def __init__(self, config: LlamaConfig, batch: int, context: int) -> None:
        if context < 1 or batch < 1:
            raise ValueError(f"a cache needs batch and context >= 1, got {batch} and {context}")
        shape = (batch, config.kv_heads, context, config.head_dim)
        self.context = context
        self.length = 0
        self.names = cache_names(config.layers)
        self.layers: list[tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]] = []
        for _ in range(config.layers):
            k, v = aligned_empty(shape), aligned_empty(shape)
            k.fill(0)
            v.fill(0)
            self.layers.append((k, v))

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.layers)

    def bind(self, step: CompiledGraph) -> None:
        """Point ``step``'s cache inputs at these buffers (no copy)."""
        for (k_name, v_name), (k, v) in zip(self.names, self.layers, strict=True):
            step.bind_state(k_name, k)
            step.bind_state(v_name, v)

    def reserve(self, rows: int) -> npt.NDArray[np.int64]:
        """The length input of a step appending ``rows`` rows; ValueError
        naming the length and the context when they do not fit."""
        if self.length + rows > self.context:
            raise ValueError(f"a step of {rows} token(s) at length {self.length} runs past the "
                             f"cache's context of {self.context}")
        return np.array([self.length], dtype=np.int64)


class CachedDecoder:
    """The prompt step and the token step of a built-in decoder on one
    :class:`KVCache`, run under ``settings``, the weights held as
    ``weights`` says (the module docstring; ValueError naming any other)."""

    def __init__(self, batch: int, *, size: str, prompt: int, context: int,
                 settings: Settings | None = None, seed: int = 0, hidden: int | None = None,
                 layers: int | None = None, heads: int | None = None,
                 kv_heads: int | None = None, intermediate: int | None = None,
                 vocab: int | None = None, weights: str = "auto") -> None:
        if weights not in NATIVE_WEIGHTS:
            raise ValueError(f"weights {weights!r} is not one of {', '.join(NATIVE_WEIGHTS)}")
        self.settings = settings or Settings()
        self.prompt = prompt

        def step_graph(new_tokens: int) -> Graph:
            return llama_step(batch, size=size, new_tokens=new_tokens, context=context,
                              seed=seed, hidden=hidden, layers=layers, heads=heads,
                              kv_heads=kv_heads, intermediate=intermediate, vocab=vocab)

        prompt_graph = step_graph(prompt)  # its weights are made when first read
        self.config = config_of(prompt_graph)
        # The way the weights are held: "copies", "packed" or "in-place".
        self.weights = resolve_weights(weights, prompt_graph, batch, context)
        copies = self.weights == "copies"
        self.prompt_step = compile_graph(prompt_graph, weights_in_place=not copies)
        # Under "packed" the token step packs only where the prompt step keeps no copy.
        packs = copies or (self.weights == "packed"
                           and _matmuls_read_in_place(self.prompt_step, self.settings))
        self.token_step = compile_graph(_sharing_weights(step_graph(1), prompt_graph),
                                        weights_in_place=not packs)
        self.cache = KVCache(self.config, batch, context)
        for step in (self.prompt_step, self.token_step):
            self.cache.bind(step)
        # The setting resolved once: a step then costs its run alone.
        self._runs = {id(step): step.stepper(self.settings)
                      for step in (self.prompt_step, self.token_step)}

    def _run(self, step: CompiledGraph, ids: npt.ArrayLike) -> npt.NDArray[np.float32]:
        tokens = np.asarray(ids, dtype=np.int64)
        length = self.cache.reserve(tokens.shape[-1])
        step.set_inputs({"input_ids": tokens, CACHE_LENGTH: length})
        self._runs[id(step)]()
        self.cache.length += tokens.shape[-1]
        (logits,) = step.outputs().values()
        return logits

    def prefill(self, ids: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """A new sequence per row of ``ids`` (batch, prompt): the cache
        restarts, and the last prompt token's logits (batch, vocab) come back."""
        self.cache.length = 0
        return self._run(self.prompt_step, ids)

    def decode(self, ids: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """One more token per sequence, ``ids`` (batch, 1), against the
        cache: its logits (batch, vocab)."""
        if self.cache.length == 0:
            raise RuntimeError("decode before prefill: start the sequences with prefill()")
        return self._run(self.token_step, ids)

    def greedy(self, ids: npt.ArrayLike, new: int
               ) -> tuple[npt.NDArray[np.int64], float, list[float]]:
        """``new`` tokens per row of the prompts ``ids`` (batch, prompt),
        each the previous step's most likely one: the tokens (batch, new),
        the seconds of the prompt step with the first token's choice, and
        of each later token step."""
        prompt = checked_prompts(ids, new)
        tokens, ttft, steps = timed_steps(
            lambda: np.argmax(self.prefill(prompt), axis=-1)[:, None],
            lambda token: np.argmax(self.decode(token), axis=-1)[:, None], new)
        return np.concatenate(tokens, axis=1).astype(np.int64), ttft, steps


def generate(request: GenerationRequest, *, warm: bool = True) -> GenerationRecord:
    """``request`` generated natively on ``request.threads`` intra-op
    threads; ``warm``: one generation first, untimed (the kernels'
    preparation and first touches)."""
    settings = Settings(intra_op=request.threads)
    cfg = request.config
    decoder = CachedDecoder(request.batch, size=request.model, prompt=request.prompt,
                            context=request.prompt + request.new, settings=settings,
                            weights=request.weights)
    ids = prompt_ids(request.batch, request.prompt, cfg.vocab)
    if warm:
        decoder.greedy(ids, request.new)
    tokens, ttft, steps = decoder.greedy(ids, request.new)
    described: dict[str, Any] = {"intra_op": request.threads, "weights": decoder.weights}
    return record_from_times(request, described, tokens, ttft, steps)
