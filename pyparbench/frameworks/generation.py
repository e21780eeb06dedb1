"""A generation's request and record, whichever runtime decodes: greedy
decoding of ``prompt`` tokens then ``new`` tokens per sequence by a
built-in decoder (:mod:`pyparbench.models.llama`), and the figures of LLM
inference taken from its step times.

* ``ttft_ms``: time to first token, the prompt's step and the choice of the
  first new token;
* ``tpot_ms``: time per output token after the first, the median of the
  token steps (None when ``new`` is 1: no such step);
* ``tokens_per_s``: the tokens a token step gives (one per sequence) per
  second of that median; with ``new`` 1, the tokens per second of the whole
  generation;
* ``bytes_per_token``: the bytes a token step reads, each weight matrix and
  norm once, one embedding row per sequence, and the cached keys and values
  at the mean length the token steps attend to (``prompt`` + ``new`` / 2).

The messages between the command and its child are these dataclasses,
parsed once at the boundary (:meth:`GenerationRequest.from_dict`,
:meth:`GenerationRecord.from_dict`). Nothing here loads the native core or a
framework: every framework's child imports it too.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from pyparbench.models.llama import LLAMA_SIZES, LlamaConfig

__all__ = ["GENERATION_FRAMEWORKS", "NATIVE_WEIGHTS", "GenerationRecord", "GenerationRequest",
           "bytes_per_token", "checked_prompts", "prompt_ids", "record_from_times",
           "timed_steps"]

# A runtime's state between steps (its last token, and what it carries on).
State = TypeVar("State")

# The runtimes a generation runs in: the native executor, llama.cpp on a GGUF
# file of the same weights, transformers' LlamaForCausalLM on them in PyTorch,
# or ONNX Runtime on that model exported with its cache.
GENERATION_FRAMEWORKS = ("native", "llamacpp", "torch", "onnxruntime")
Framework = Literal["native", "llamacpp", "torch", "onnxruntime"]

# How the native runtime holds the weights (frameworks.native.generation),
# fastest first: "copies", each step packs its own copy of the matrices (the
# fastest steps, the weights' memory about three times); "packed", the token
# step streams its own packed copy and the prompt step reads the weights
# where they are (about twice); "in-place", both steps read that one copy
# (once; slower steps); "auto", the fastest whose memory this machine has.
NATIVE_WEIGHTS = ("auto", "copies", "packed", "in-place")


@dataclass(frozen=True)
class GenerationRequest:
    """What one child generates: ``batch`` sequences of ``prompt`` tokens
    (:func:`prompt_ids`) and ``new`` greedy tokens each, on ``threads``
    threads. ``gguf``: the llama.cpp model file (llamacpp only); ``onnx``:
    the decoder exported with its cache (onnxruntime only); ``weights``: how
    the native runtime holds the weights, one of :data:`NATIVE_WEIGHTS`
    (native only)."""

    model: str
    prompt: int
    new: int
    batch: int = 1
    threads: int = 1
    framework: str = "native"
    gguf: str | None = None
    onnx: str | None = None
    weights: str = "auto"

    def __post_init__(self) -> None:
        size = LLAMA_SIZES.get(self.model)
        if size is None:
            raise ValueError(f"model {self.model!r} is not a built-in decoder; generate takes "
                             f"{', '.join(LLAMA_SIZES)}")
        for name in ("prompt", "new", "batch", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.prompt + self.new > size.context:
            raise ValueError(f"prompt {self.prompt} + new {self.new} = "
                             f"{self.prompt + self.new} tokens exceed {self.model}'s context "
                             f"of {size.context}")
        if self.framework not in GENERATION_FRAMEWORKS:
            raise ValueError(f"framework {self.framework!r} is not one of "
                             f"{', '.join(GENERATION_FRAMEWORKS)}")
        if self.weights not in NATIVE_WEIGHTS:
            raise ValueError(f"weights {self.weights!r} is not one of {', '.join(NATIVE_WEIGHTS)}")
        if self.weights != "auto" and self.framework != "native":
            raise ValueError(f"weights {self.weights!r}: only the native runtime's weights are "
                             f"held one way or another, not {self.framework}'s")
        if self.framework == "llamacpp" and self.batch != 1:
            raise ValueError(f"batch {self.batch}: llama.cpp generates one sequence here "
                             "(batch 1)")

    @property
    def config(self) -> LlamaConfig:
        return LLAMA_SIZES[self.model].config

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenerationRequest:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@dataclass(frozen=True)
class GenerationRecord:
    """A generation's figures (see the module docstring), its tokens
    (batch, new), each token step's ms, and the setting it ran under."""

    model: str
    framework: str
    batch: int
    prompt: int
    new: int
    settings: dict[str, Any]
    tokens: list[list[int]]
    ttft_ms: float
    tpot_ms: float | None
    tokens_per_s: float
    bytes_per_token: int
    step_ms: list[float]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenerationRecord:
        """Raises KeyError for a missing field, TypeError / ValueError for one
        that does not read."""
        tpot = d["tpot_ms"]
        return cls(model=str(d["model"]), framework=str(d["framework"]), batch=int(d["batch"]),
                   prompt=int(d["prompt"]), new=int(d["new"]), settings=dict(d["settings"]),
                   tokens=[[int(t) for t in row] for row in d["tokens"]],
                   ttft_ms=float(d["ttft_ms"]), tpot_ms=None if tpot is None else float(tpot),
                   tokens_per_s=float(d["tokens_per_s"]),
                   bytes_per_token=int(d["bytes_per_token"]),
                   step_ms=[float(x) for x in d["step_ms"]])


def prompt_ids(batch: int, prompt: int, vocab: int) -> npt.NDArray[np.int64]:
    """The prompts generated from: (batch, prompt) token ids, a different
    sequence per row, the same on every runtime."""
    rows = np.arange(batch, dtype=np.int64)[:, None]
    cols = np.arange(prompt, dtype=np.int64)[None, :]
    return (7 * cols + 11 * rows + 3) % vocab


def bytes_per_token(cfg: LlamaConfig, batch: int, prompt: int, new: int) -> int:
    """Bytes a token step reads (float32): every weight but the embedding
    table once, one embedding row per sequence, and each layer's cached keys
    and values at the token steps' mean length, prompt + new / 2 (the step
    making token t attends to prompt + t - 1 keys, t = 2 .. new)."""
    d, kv = cfg.head_dim, cfg.kv_heads * cfg.head_dim
    per_layer = (cfg.hidden * (cfg.hidden + 2 * kv)  # q, k, v
                 + cfg.hidden * cfg.hidden  # o
                 + 3 * cfg.hidden * cfg.intermediate  # gate, up, down
                 + 2 * cfg.hidden)  # the two norms
    weights = cfg.layers * per_layer + cfg.hidden + cfg.vocab * cfg.hidden  # final norm, lm_head
    mean_keys = prompt + new / 2
    cache = 2 * cfg.layers * batch * cfg.kv_heads * d * mean_keys
    return int(4 * (weights + batch * cfg.hidden + cache))


def checked_prompts(ids: npt.ArrayLike, new: int) -> npt.NDArray[np.int64]:
    """``ids`` as (batch, prompt) int64 token ids; ValueError naming a bad
    shape or a ``new`` below 1."""
    if new < 1:
        raise ValueError(f"new must be >= 1, got {new}")
    prompt = np.ascontiguousarray(ids, dtype=np.int64)
    if prompt.ndim != 2 or prompt.shape[1] < 1:
        raise ValueError(f"prompts must be (batch, prompt) token ids, got shape {prompt.shape}")
    return prompt


def timed_steps(first: Callable[[], State], then: Callable[[State], State], new: int
                ) -> tuple[list[State], float, list[float]]:
    """Greedy decoding's steps, timed alike in every runtime: ``first()``
    (the prompt's step and the first token's choice), then ``then`` on the
    last state for each of the ``new - 1`` later tokens. The states, the
    seconds of the first step and of each later one."""
    t0 = time.perf_counter()
    state = first()
    ttft = time.perf_counter() - t0
    states, steps = [state], []
    for _ in range(new - 1):
        t0 = time.perf_counter()
        state = then(state)
        steps.append(time.perf_counter() - t0)
        states.append(state)
    return states, ttft, steps


def record_from_times(request: GenerationRequest, settings: dict[str, Any],
                      tokens: npt.NDArray[np.int64], ttft_s: float,
                      steps_s: list[float]) -> GenerationRecord:
    """The record of a generation whose prompt step (with the first token's
    choice) took ``ttft_s`` and each later token step ``steps_s``."""
    if len(steps_s) != request.new - 1:
        raise ValueError(f"{request.new} new tokens take {request.new - 1} token steps, got "
                         f"{len(steps_s)} times")
    tpot = statistics.median(steps_s) if steps_s else None
    per_s = (request.batch / tpot if tpot is not None
             else request.batch * request.new / ttft_s)
    return GenerationRecord(
        model=request.model, framework=request.framework, batch=request.batch,
        prompt=request.prompt, new=request.new, settings=settings,
        tokens=[[int(t) for t in row] for row in tokens], ttft_ms=ttft_s * 1e3,
        tpot_ms=None if tpot is None else tpot * 1e3, tokens_per_s=per_s,
        bytes_per_token=bytes_per_token(request.config, request.batch, request.prompt,
                                        request.new),
        step_ms=[s * 1e3 for s in steps_s])
