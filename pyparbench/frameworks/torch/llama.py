"""A built-in decoder graph (:mod:`pyparbench.models.llama`) as ``transformers``'
``LlamaForCausalLM``: the same configuration and the graph's own weights,
what a PyTorch user of the model runs. The graph's node names are the
model's parameter names (``layers.0/self_attn.q_proj`` holds
``model.layers.0.self_attn.q_proj.weight``)."""

from __future__ import annotations

import importlib
import inspect
import warnings
from typing import Any

import torch

from pyparbench.graph import Graph
from pyparbench.frameworks.torch.hf_transformers import import_transformers
from pyparbench.models.llama import transformers_weights

__all__ = ["cache_argument", "llama_for_causal_lm", "state_dict_of"]


def cache_argument(model: Any) -> str:
    """The name ``model``'s forward takes its key / value cache by:
    transformers 5 names it ``cache``, earlier releases (and the deprecated
    spelling) ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def state_dict_of(graph: Graph) -> dict[str, torch.Tensor]:
    """The graph's weights under ``LlamaForCausalLM``'s parameter names,
    sharing the graph's arrays rather than copying them: a 1B decoder's
    6 GB are held once. The arrays are read-only and nothing writes a model's
    weights at inference, so torch's warning that it cannot enforce that is
    not shown."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return {k: torch.from_numpy(v) for k, v in transformers_weights(graph).items()}


def llama_for_causal_lm(graph: Graph, attn_implementation: str = "sdpa") -> Any:
    """``transformers.LlamaForCausalLM`` with ``graph``'s configuration (its
    ``meta``, as :func:`pyparbench.models.llama.llama_prefill` records it)
    and weights, in eval mode. Its logits are every position's; the
    graph's, unless built with ``all_logits``, the last one's.

    Raises
    ------
    ValueError
        A graph that is not a built-in decoder, or weights the model does
        not take (named, with the model's missing or unexpected names).
    """
    meta = graph.meta
    fields = ("hidden", "layers", "heads", "kv_heads", "intermediate", "vocab", "rope_theta",
              "eps", "prompt")
    if graph.name != "llama" or any(f not in meta for f in fields):
        raise ValueError(f"graph {graph.name!r} is not a built-in decoder "
                         f"(pyparbench.models.llama): its meta lacks {fields}")
    transformers = import_transformers()
    settings: dict[str, Any] = dict(
        hidden_size=meta["hidden"], num_hidden_layers=meta["layers"],
        num_attention_heads=meta["heads"], num_key_value_heads=meta["kv_heads"],
        intermediate_size=meta["intermediate"], vocab_size=meta["vocab"],
        rope_theta=meta["rope_theta"], rms_norm_eps=meta["eps"],
        max_position_embeddings=max(meta["prompt"], 2048), tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False, hidden_act="silu",
        attn_implementation=attn_implementation)
    # Built without drawing its own weights (their memory is never touched),
    # then given the graph's tensors in their place (assign): the model adds
    # no copy of the weights, and no seconds of initialising 1B of them.
    initialization = importlib.import_module("transformers.initialization")
    with initialization.no_init_weights():
        model: Any = transformers.LlamaForCausalLM(transformers.LlamaConfig(**settings))
    missing, unexpected = model.load_state_dict(state_dict_of(graph), strict=False,
                                                assign=True)
    if missing or unexpected:
        raise ValueError(f"graph {graph.name!r}'s weights do not fit LlamaForCausalLM: "
                         f"missing {missing}, unexpected {unexpected}")
    return model.eval()
