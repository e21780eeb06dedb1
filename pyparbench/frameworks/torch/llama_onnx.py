"""A built-in decoder's ``LlamaForCausalLM`` exported to ONNX with its key /
value cache, as a user exports a decoder for ONNX Runtime: the new token
ids and each layer's past keys and values in, the last position's logits
and each layer's present keys and values (the past with the new rows
appended) out.

One file serves the prefill and every decode step: TorchScript's exporter
(opset 17) with the batch, the new tokens and the past's length symbolic;
the prefill feeds a past of length 0. The exporter traces an example of 3
new tokens after a past of 4, so neither the causal mask of a prompt nor
the single row of a step is folded in as a constant. (torch's dynamo
exporter refuses these symbolic shapes in transformers' cache code.)

Weights over 2 GB (a protobuf's cap: Llama 3.2 1B's are 6.0 GB) go to one
external data file beside the ``.onnx`` (``<file>.onnx.data``,
:mod:`pyparbench.frameworks.onnx_external_data`), which ONNX Runtime reads
from the model's folder. The model shares the graph's weights (no copy);
the exporter's peak on the 1B decoder was 9.9 GB.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

import torch

from pyparbench.frameworks.onnx_external_data import external_data_files, weights_to_one_file
from pyparbench.frameworks.torch.hf_transformers import import_transformers
from pyparbench.frameworks.torch.llama import cache_argument, llama_for_causal_lm
from pyparbench.graph import Graph

__all__ = ["PROTOBUF_WEIGHTS_LIMIT", "cached_decoder_names", "export_cached_decoder"]

# The exporter's opset (TorchScript's exporter writes up to 20; 17 is the
# newest every supported ONNX Runtime runs).
_OPSET = 17
# Weights above this many bytes go to an external data file: a protobuf
# message (the whole .onnx) cannot pass 2 GiB, and the graph's structure
# needs a little of it.
PROTOBUF_WEIGHTS_LIMIT = 2**31 - 2**26


def cached_decoder_names(layers: int) -> tuple[list[str], list[str]]:
    """An exported decoder's input and output names: ``input_ids`` and
    ``past_key_values.{i}.key|value`` in, ``logits`` and
    ``present.{i}.key|value`` out (Hugging Face's own exports' names)."""
    past = [f"past_key_values.{i}.{w}" for i in range(layers) for w in ("key", "value")]
    present = [f"present.{i}.{w}" for i in range(layers) for w in ("key", "value")]
    return ["input_ids", *past], ["logits", *present]


class _CachedStep(torch.nn.Module):
    """The model's forward on a ``DynamicCache`` made of the past tensors:
    the last position's logits, then the cache's tensors after the step."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model
        self.layers = int(model.config.num_hidden_layers)
        self._transformers = import_transformers()
        self._cache_arg = cache_argument(model)

    def forward(self, input_ids: torch.Tensor, *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        cache = self._transformers.DynamicCache(
            ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(self.layers)],
            config=self.model.config)
        out = self.model(input_ids=input_ids, use_cache=True, logits_to_keep=1,
                         **{self._cache_arg: cache})
        present = [t for layer in cache.layers for t in (layer.keys, layer.values)]
        return (out.logits[:, -1], *present)


def export_cached_decoder(graph: Graph, path: Path, *,
                          external_data_above: int = PROTOBUF_WEIGHTS_LIMIT) -> Path:
    """``graph`` (a built-in decoder, :func:`llama_for_causal_lm`) exported
    to ``path`` with its cache (see the module docstring); ``path`` back.
    Where its weights pass ``external_data_above`` bytes (or the exporter
    wrote them out itself), they are in ``<path>.data`` beside it.

    Raises
    ------
    ValueError
        A graph that is not a built-in decoder, or an ``external_data_above``
        that is not an integer >= 0.
    """
    if isinstance(external_data_above, bool) or not isinstance(external_data_above, int) \
            or external_data_above < 0:
        raise ValueError(f"external_data_above must be an integer >= 0 (bytes), got "
                         f"{external_data_above!r}")
    model = llama_for_causal_lm(graph)
    meta = graph.meta
    layers, kv_heads = int(meta["layers"]), int(meta["kv_heads"])
    head_dim = int(meta["hidden"]) // int(meta["heads"])
    inputs, outputs = cached_decoder_names(layers)
    ids = torch.zeros(2, 3, dtype=torch.int64)
    past = [torch.zeros(2, kv_heads, 4, head_dim) for _ in range(2 * layers)]
    dynamic = ({"input_ids": {0: "batch", 1: "new"}, "logits": {0: "batch"}}
               | {n: {0: "batch", 2: "past"} for n in inputs[1:]}
               | {n: {0: "batch", 2: "total"} for n in outputs[1:]})
    # The exporter's tracer warnings and deprecation notes are about
    # transformers' Python branches it records as traced: not the user's.
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings(), \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(_CachedStep(model).eval(), (ids, *past), str(path), dynamo=False,
                          input_names=inputs, output_names=outputs, dynamic_axes=dynamic,
                          opset_version=_OPSET)
    if 4 * graph.num_params > external_data_above or external_data_files(path):
        weights_to_one_file(path)
    return path
