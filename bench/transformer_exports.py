"""Hugging Face encoders (T5's included) and decoders' prefill exported to ONNX as a user
would: each family's own classes at a size nearer real use than the tests'
(hidden 256, 4 layers, intermediate 4x hidden, random seeded weights,
nothing downloaded), called with int64 (input_ids, attention_mask) of
(1, seq) and returning the last hidden state, through either of torch's
exporters."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

from pyparbench.frameworks.torch.hf_transformers import import_transformers

VOCAB = 8000
HIDDEN = 256
LAYERS = 4
HEADS = 4
# Sequence of the encoders' input and the decoders' prefill.
SEQ = 128
_ENCODER = {"hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
            "intermediate_size": 4 * HIDDEN, "vocab_size": VOCAB, "max_position_embeddings": 512}
# Grouped-query attention where the family has it: 8 query heads of 32
# sharing 2 key / value heads.
_GQA = {"hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": 8,
        "num_key_value_heads": 2, "intermediate_size": 4 * HIDDEN, "vocab_size": VOCAB,
        "max_position_embeddings": 512}
# Each family's (config class, model class, configuration, is a decoder).
FAMILIES: dict[str, tuple[str, str, dict[str, Any], bool]] = {
    "bert": ("BertConfig", "BertModel", _ENCODER, False),
    "roberta": ("RobertaConfig", "RobertaModel", _ENCODER, False),
    "distilbert": ("DistilBertConfig", "DistilBertModel",
                   {"dim": HIDDEN, "n_layers": LAYERS, "n_heads": HEADS,
                    "hidden_dim": 4 * HIDDEN, "vocab_size": VOCAB,
                    "max_position_embeddings": 512}, False),
    "llama": ("LlamaConfig", "LlamaModel", _GQA, True),
    "qwen2": ("Qwen2Config", "Qwen2Model", _GQA, True),
    "gpt2": ("GPT2Config", "GPT2Model",
             {"n_embd": HIDDEN, "n_layer": LAYERS, "n_head": HEADS, "n_inner": 4 * HIDDEN,
              "vocab_size": VOCAB, "n_positions": 512,
              # GPT-2's own token 50256 is past this vocabulary.
              "bos_token_id": VOCAB - 1, "eos_token_id": VOCAB - 1}, True),
    # flan-T5's encoder (gated GELU, relative position buckets); eager
    # attention: torch.export fails to decompose T5's through
    # scaled_dot_product_attention.
    "t5-encoder": ("T5Config", "T5EncoderModel",
                   {"d_model": HIDDEN, "d_kv": HIDDEN // HEADS, "num_heads": HEADS,
                    "d_ff": 4 * HIDDEN, "num_layers": LAYERS, "vocab_size": VOCAB,
                    "relative_attention_num_buckets": 32, "feed_forward_proj": "gated-gelu",
                    "attn_implementation": "eager"}, False),
}
EXPORTERS = ("dynamo", "torchscript")


def _wrapped(model: Any, decoder: bool) -> Any:
    """The model called with named inputs, its last hidden state returned
    (a decoder's prefill: no cache)."""
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            extra = {"use_cache": False} if decoder else {}
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              **extra).last_hidden_state

    return LastHiddenState().eval()


def export(family: str, exporter: str, out: Path) -> Path:
    """``family``'s random model (seeded) exported to ``out`` for (1, SEQ)
    int64 ids and mask by ``exporter``: the dynamo exporter (opset 18) or
    the TorchScript one (opset 17). A file already there is reused."""
    if family not in FAMILIES:
        raise ValueError(f"unknown transformer family {family!r}; valid: {', '.join(FAMILIES)}")
    if exporter not in EXPORTERS:
        raise ValueError(f"unknown exporter {exporter!r}; valid: {', '.join(EXPORTERS)}")
    path = out / f"{family}-{exporter}.onnx"
    if path.is_file():
        return path
    import torch

    transformers = import_transformers()
    config_name, model_name, config, decoder = FAMILIES[family]
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**config))
    wrapped = _wrapped(model.eval(), decoder)
    ids = torch.randint(0, VOCAB, (1, SEQ))
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    dynamo = exporter == "dynamo"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapped, (ids, mask), str(path), dynamo=dynamo,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"],
                          opset_version=18 if dynamo else 17, external_data=False)
    return path


def feeds(seed: int = 0) -> dict[str, Any]:
    """Inputs as a tokenizer gives them: ids within the vocabulary (above
    RoBERTa's padding id 1, so every position counts) and a mask of ones."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return {"input_ids": rng.integers(2, VOCAB, size=(1, SEQ), dtype=np.int64),
            "attention_mask": np.ones((1, SEQ), dtype=np.int64)}


# The decoders' decode step: one new token after PAST tokens (a context of
# SEQ), each layer's past keys / values in, present out.
PAST = SEQ - 1
STEPS = {f"{family}-step": family for family, (*_, decoder) in FAMILIES.items() if decoder}


def _step_wrapped(model: Any, layers: int) -> Any:
    """The model's decode step on transformers' own cache (DynamicCache):
    (input_ids, attention_mask, past keys / values per layer) in, the last
    hidden state and the present keys / values per layer out."""
    import torch

    transformers = import_transformers()

    class DecodeStep(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, *past: Any) -> Any:
            cache = transformers.DynamicCache(
                ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(layers)],
                config=self.model.config)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             past_key_values=cache, use_cache=True)
            present = [t for layer in out.past_key_values.layers
                       for t in (layer.keys, layer.values)]
            return (out.last_hidden_state, *present)

    return DecodeStep().eval()


def export_step(step: str, exporter: str, out: Path) -> Path:
    """The decode step ``step`` (a decoder family's name + "-step") of the
    family's random model (seeded) exported to ``out`` for batch 1 after PAST
    tokens, by ``exporter`` (as :func:`export`). A file already there is
    reused."""
    if step not in STEPS:
        raise ValueError(f"unknown decode step {step!r}; valid: {', '.join(STEPS)}")
    if exporter not in EXPORTERS:
        raise ValueError(f"unknown exporter {exporter!r}; valid: {', '.join(EXPORTERS)}")
    path = out / f"{step}-{exporter}.onnx"
    if path.is_file():
        return path
    import torch

    transformers = import_transformers()
    config_name, model_name, config, _ = FAMILIES[STEPS[step]]
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**config))
    text = model.config.get_text_config()
    layers, heads = text.num_hidden_layers, text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    wrapped = _step_wrapped(model.eval(), layers)
    past = [torch.randn(1, kv_heads, PAST, HIDDEN // heads) for _ in range(2 * layers)]
    ids = torch.randint(0, VOCAB, (1, 1))
    mask = torch.ones(1, PAST + 1, dtype=torch.int64)
    names = [f"past_key_values.{i}.{w}" for i in range(layers) for w in ("key", "value")]
    present = [f"present.{i}.{w}" for i in range(layers) for w in ("key", "value")]
    dynamo = exporter == "dynamo"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapped, (ids, mask, *past), str(path), dynamo=dynamo,
                          input_names=["input_ids", "attention_mask", *names],
                          output_names=["last_hidden_state", *present],
                          opset_version=18 if dynamo else 17, external_data=False)
    return path


def step_feeds(seed: int = 0) -> dict[str, Any]:
    """A decode step's token and mask as generation gives them: one id in
    the vocabulary, a mask of ones over the past and the new token (the past
    keys / values are the graph's random inputs)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return {"input_ids": rng.integers(2, VOCAB, size=(1, 1), dtype=np.int64),
            "attention_mask": np.ones((1, PAST + 1), dtype=np.int64)}
