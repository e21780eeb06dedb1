"""A GGUF decoder run by llama.cpp (through ``llama-cpp-python``), token ids
in and logits out, under llama.cpp's own thread knobs.

llama.cpp's knobs are the study's layers under its own names: ``-t``
(``n_threads``, the decode step's team) and ``-tb`` (``n_threads_batch``,
the prefill's), and ``--numa`` (a NUMA policy for the weights' pages).
Imported only where llama.cpp runs (its ggml thread pool never shares a
process with the native core's OpenMP when timed).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["CACHE_TYPES", "NUMA_POLICIES", "LlamaCppDecoder"]

# llama.cpp's --numa values (ggml_numa_strategy); "off" leaves the pages where
# the first touch put them.
NUMA_POLICIES = {"off": 0, "distribute": 1, "isolate": 2, "numactl": 3, "mirror": 4}
# The key / value cache's ggml type per precision (ggml_type numbers): llama.cpp
# keeps an f16 cache unless told, which alone moves f32 logits by ~4e-4.
CACHE_TYPES = {"fp32": 0, "fp16": 1, "bf16": 30}


class LlamaCppDecoder:
    """A GGUF file loaded by llama.cpp with its context preallocated to
    ``context`` tokens and its key / value cache in ``cache``'s type. :meth:`prefill` starts a sequence and returns every
    prompt position's logits; :meth:`decode` appends one token against the
    cache and returns its logits."""

    def __init__(self, path: str | Path, *, context: int, threads: int,
                 batch_threads: int | None = None, numa: str = "off",
                 cache: str = "fp32", all_logits: bool = True) -> None:
        import llama_cpp  # noqa: PLC0415 (the llm extra; imported where llama.cpp runs)

        if context < 1:
            raise ValueError(f"context must be >= 1, got {context}")
        if threads < 1 or (batch_threads is not None and batch_threads < 1):
            raise ValueError(f"threads must be >= 1, got {threads} and {batch_threads}")
        if numa not in NUMA_POLICIES:
            raise ValueError(f"numa {numa!r} is not one of {', '.join(NUMA_POLICIES)}")
        if cache not in CACHE_TYPES:
            raise ValueError(f"cache {cache!r} is not one of {', '.join(CACHE_TYPES)}")
        if not Path(path).is_file():
            raise FileNotFoundError(f"no GGUF file at {path}")
        self.threads = threads
        self.batch_threads = batch_threads or threads
        self.context = context
        self._llm: Any = llama_cpp.Llama(
            model_path=str(path), n_ctx=context, n_batch=context, n_ubatch=context,
            n_threads=threads, n_threads_batch=self.batch_threads, logits_all=all_logits,
            numa=NUMA_POLICIES[numa] if numa != "off" else False,
            type_k=CACHE_TYPES[cache], type_v=CACHE_TYPES[cache], verbose=False)
        self.vocab = int(self._llm.n_vocab())
        self.all_logits = all_logits

    def _check(self, ids: Sequence[int]) -> list[int]:
        out = [int(i) for i in ids]
        bad = [i for i in out if not 0 <= i < self.vocab]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary of {self.vocab}")
        return out

    def prefill(self, ids: Sequence[int]) -> npt.NDArray[np.float32]:
        """A new sequence of the prompt ``ids``: logits (len(ids), vocab), or
        without ``all_logits`` the last position's alone (1, vocab), all a
        generation needs (llama.cpp then skips the other positions' vocabulary
        projection, as the built-in decoder's default graph does)."""
        tokens = self._check(ids)
        if not 1 <= len(tokens) <= self.context:
            raise ValueError(f"a prompt of {len(tokens)} tokens does not fit the context of "
                             f"{self.context}")
        self._llm.reset()
        self._llm.eval(tokens)
        if not self.all_logits:
            return self._last_logits()[None, :]
        return np.array(self._llm.scores[: len(tokens)], dtype=np.float32)

    def decode(self, token: int) -> npt.NDArray[np.float32]:
        """One more token against the cache: its logits (vocab,)."""
        (t,) = self._check([token])
        n = int(self._llm.n_tokens)
        if n == 0:
            raise RuntimeError("decode before prefill: start a sequence with prefill()")
        if n >= self.context:
            raise ValueError(f"the context of {self.context} tokens is full")
        self._llm.eval([t])
        if not self.all_logits:
            return self._last_logits()
        return np.array(self._llm.scores[n], dtype=np.float32)

    def _last_logits(self) -> npt.NDArray[np.float32]:
        """The last evaluated position's logits, read from llama.cpp's context
        (the Python binding keeps none without ``logits_all``)."""
        import llama_cpp  # noqa: PLC0415 (imported where llama.cpp runs)

        ptr = llama_cpp.llama_get_logits_ith(self._llm.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.vocab,)).astype(np.float32)

    def greedy(self, prompt: Sequence[int], new: int) -> tuple[list[int], float, list[float]]:
        """``new`` tokens after ``prompt``, each the previous step's most
        likely one: the tokens, the seconds of the prefill with the first
        token's choice, and of each of the ``new`` - 1 decode steps after it
        (the last token is chosen, never fed)."""
        t0 = time.perf_counter()
        token = int(np.argmax(self.prefill(prompt)[-1]))
        ttft = time.perf_counter() - t0
        tokens, steps = [token], []
        for _ in range(new - 1):
            t0 = time.perf_counter()
            token = int(np.argmax(self.decode(token)))
            steps.append(time.perf_counter() - t0)
            tokens.append(token)
        return tokens, ttft, steps

    def time_generation(self, prompt: Sequence[int], new: int) -> tuple[float, list[float]]:
        """Seconds of the prompt's prefill and of each of ``new`` decode steps
        (greedy: each step feeds the previous step's most likely token)."""
        t0 = time.perf_counter()
        logits = self.prefill(prompt)[-1]
        ttft = time.perf_counter() - t0
        steps = []
        for _ in range(new):
            t0 = time.perf_counter()
            logits = self.decode(int(np.argmax(logits)))
            steps.append(time.perf_counter() - t0)
        return ttft, steps
