"""Hugging Face encoders exported to ONNX as a user would: a tiny random
configuration of each family (nothing downloaded), wrapped so that its
inputs are (input_ids, attention_mask) and its output the last hidden
state, through either of torch's exporters."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from pyparbench.frameworks.torch.hf_transformers import import_transformers  # noqa: E402


def _import_transformers() -> Any:
    """transformers (the package's import, which copes with a torchvision
    built against another torch), or the module skipped without it."""
    try:
        return import_transformers()
    except ImportError as e:
        pytest.skip(f"transformers is not installed ({e})", allow_module_level=True)


transformers = _import_transformers()

VOCAB = 100
# RoBERTa's padding id (its configuration's default): positions skip it.
ROBERTA_PAD = 1
HIDDEN = 32
_COMMON = {"hidden_size": HIDDEN, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 64, "vocab_size": VOCAB, "max_position_embeddings": 64}
# Each family's (config class, model class, configuration).
FAMILIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "bert": ("BertConfig", "BertModel", _COMMON),
    "distilbert": ("DistilBertConfig", "DistilBertModel",
                   {"dim": HIDDEN, "n_layers": 2, "n_heads": 2, "hidden_dim": 64,
                    "vocab_size": VOCAB, "max_position_embeddings": 64}),
    "electra": ("ElectraConfig", "ElectraModel", {**_COMMON, "embedding_size": 16}),
    "albert": ("AlbertConfig", "AlbertModel", {**_COMMON, "embedding_size": 16}),
    "roberta": ("RobertaConfig", "RobertaModel", _COMMON),
}


class _Encoder(torch.nn.Module):  # type: ignore[misc]
    """The model called with named inputs, its last hidden state returned."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Any, attention_mask: Any) -> Any:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def export_encoder(family: str, path: Path, seq: int, dynamo: bool) -> Path:
    """``family``'s tiny random model (seeded) exported to ``path`` for
    (1, seq) int64 ids and mask, by the TorchScript exporter (opset 17) or
    the dynamo one (opset 18, its own)."""
    config_name, model_name, config = FAMILIES[family]
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**config))
    encoder = _Encoder(model.eval()).eval()
    ids = torch.randint(0, VOCAB, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(encoder, (ids, mask), str(path), dynamo=dynamo,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"],
                          opset_version=18 if dynamo else 17)
    return path


_DECODER = {"hidden_size": HIDDEN, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "intermediate_size": 64, "vocab_size": VOCAB,
            "max_position_embeddings": 64}
# Each decoder family's (config class, model class, configuration): grouped-query
# attention (4 query heads sharing 2 key / value heads) where the family has it.
DECODERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", "LlamaModel", _DECODER),
    "qwen2": ("Qwen2Config", "Qwen2Model", _DECODER),
    "gpt2": ("GPT2Config", "GPT2Model",
             {"n_embd": HIDDEN, "n_layer": 2, "n_head": 4, "n_inner": 64, "vocab_size": VOCAB,
              "n_positions": 64}),
}


class _Decoder(torch.nn.Module):  # type: ignore[misc]
    """The model's prefill: named inputs, no cache, the last hidden state."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Any, attention_mask: Any) -> Any:
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          use_cache=False).last_hidden_state


class _DecoderWithPositions(_Decoder):
    """The prefill with the positions an input of its own (as generation
    passes them: left padding's positions start past the pads)."""

    def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any) -> Any:
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          position_ids=position_ids, use_cache=False).last_hidden_state


def export_decoder(family: str, path: Path, seq: int, dynamo: bool,
                   position_ids: bool = False) -> Path:
    """``family``'s tiny random decoder (seeded) exported to ``path`` for its
    prefill of (1, seq) int64 ids and mask (and (1, seq) int64 position ids
    where ``position_ids``), by either exporter (as :func:`export_encoder`)."""
    config_name, model_name, config = DECODERS[family]
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**config))
    decoder = (_DecoderWithPositions if position_ids else _Decoder)(model.eval()).eval()
    ids = torch.randint(0, VOCAB, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    positions = [torch.arange(seq)[None]] if position_ids else []
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(decoder, (ids, mask, *positions), str(path), dynamo=dynamo,
                          input_names=["input_ids", "attention_mask",
                                       *(["position_ids"] if position_ids else [])],
                          output_names=["last_hidden_state"],
                          opset_version=18 if dynamo else 17)
    return path


class _DecodeStep(torch.nn.Module):  # type: ignore[misc]
    """The model's decode step: named inputs (the new ids, the mask over the
    past and the new token, each layer's past keys and values), the last
    hidden state and each layer's present keys and values out. The cache is
    transformers' own (DynamicCache); the positions follow from the past's
    length, as generation computes them."""

    def __init__(self, model: Any, layers: int) -> None:
        super().__init__()
        self.model = model
        self.layers = layers

    def forward(self, input_ids: Any, attention_mask: Any, *past: Any) -> Any:
        cache = transformers.DynamicCache(
            ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(self.layers)],
            config=self.model.config)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         past_key_values=cache, use_cache=True)
        present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
        return (out.last_hidden_state, *present)


class _DecodeStepWithPositions(_DecodeStep):
    """The decode step with the new token's positions (B, 1) an input too
    (as Optimum's exports take them: past length less the left pads)."""

    def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any,
                *past: Any) -> Any:
        cache = transformers.DynamicCache(
            ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(self.layers)],
            config=self.model.config)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache, use_cache=True)
        present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
        return (out.last_hidden_state, *present)


def decode_step_names(layers: int, position_ids: bool = False
                      ) -> tuple[list[str], list[str]]:
    """The inputs' and outputs' names of an exported decode step, as
    Hugging Face's own ONNX exports name them (``position_ids`` after the
    mask where the step takes them)."""
    past = [f"past_key_values.{i}.{w}" for i in range(layers) for w in ("key", "value")]
    present = [f"present.{i}.{w}" for i in range(layers) for w in ("key", "value")]
    positions = ["position_ids"] if position_ids else []
    return ["input_ids", "attention_mask", *positions, *past], ["last_hidden_state", *present]


def export_decode_step(family: str, path: Path, past: int, dynamo: bool,
                       symbolic: bool = False, position_ids: bool = False) -> Path:
    """``family``'s tiny random decoder (seeded) exported to ``path`` for
    one decode step of batch 1 after ``past`` tokens: (1, 1) ids, a (1, past
    + 1) mask, past keys / values (1, kv heads, past, head size) per layer,
    by either exporter (as :func:`export_encoder`). ``symbolic`` (the
    TorchScript exporter's dynamic axes): the past's length named
    "past_len" and the mask's "total_len" in the file. ``position_ids``:
    the new token's (1, 1) positions an input too, after the mask."""
    config_name, model_name, config = DECODERS[family]
    # Positions up to the past's length plus the new token (at least 128: a
    # symbolic past is sized at import up to that).
    positions = "n_positions" if "n_positions" in config else "max_position_embeddings"
    config = {**config, positions: max(config[positions], past + 1, 128)}
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**config))
    text = model.config.get_text_config()
    layers = text.num_hidden_layers
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    step = (_DecodeStepWithPositions if position_ids else _DecodeStep)(model.eval(), layers)
    step = step.eval()
    cache = [torch.randn(1, kv_heads, past, HIDDEN // heads) for _ in range(2 * layers)]
    ids = torch.randint(0, VOCAB, (1, 1))
    mask = torch.ones(1, past + 1, dtype=torch.int64)
    position_feed = [torch.full((1, 1), past, dtype=torch.int64)] if position_ids else []
    inputs, outputs = decode_step_names(layers, position_ids)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        dynamic = ({n: {2: "past_len"} for n in inputs if n.startswith("past")}
                   | {"attention_mask": {1: "total_len"}} if symbolic else None)
        torch.onnx.export(step, (ids, mask, *position_feed, *cache), str(path), dynamo=dynamo,
                          input_names=inputs, output_names=outputs,
                          opset_version=18 if dynamo else 17, dynamic_axes=dynamic)
    return path


# T5 (relu feed-forward) and flan-T5 / T5 v1.1 (gated GELU): relative
# position buckets (8) rather than position embeddings, heads of d_kv 8.
T5_FEED_FORWARDS = ("relu", "gated-gelu")
_T5 = {"d_model": HIDDEN, "d_kv": 8, "num_heads": 4, "d_ff": 64, "num_layers": 2,
       "num_decoder_layers": 2, "relative_attention_num_buckets": 8, "vocab_size": VOCAB,
       "decoder_start_token_id": 0}


class _EncoderDecoder(torch.nn.Module):  # type: ignore[misc]
    """An encoder-decoder called with named inputs, no cache, the decoder's
    last hidden state returned."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Any, attention_mask: Any, decoder_input_ids: Any) -> Any:
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          decoder_input_ids=decoder_input_ids, use_cache=False).last_hidden_state


def t5_input_names(encoder_only: bool) -> list[str]:
    """The inputs of an exported T5 (:func:`export_t5`)."""
    return ["input_ids", "attention_mask", *([] if encoder_only else ["decoder_input_ids"])]


def export_t5(feed_forward: str, path: Path, seq: int, dynamo: bool, encoder_only: bool,
              decoder_seq: int = 0, attention: str = "eager") -> Path:
    """A tiny random T5 (seeded) of ``feed_forward`` exported to ``path``: its
    encoder alone (T5EncoderModel) for (1, seq) ids and mask, or the whole
    T5Model with (1, decoder_seq) decoder ids as well, by either exporter
    (as :func:`export_encoder`), its attention transformers' ``attention``
    implementation ("eager" or "sdpa", transformers' default). torch.export
    fails to decompose the "sdpa" one (a view of the transposed output of
    torch's scaled_dot_product_attention): a user's dynamo export runs the
    eager one."""
    if dynamo and attention != "eager":
        raise ValueError(f"the dynamo exporter exports T5's eager attention alone, got "
                         f"{attention!r}")
    config = {**_T5, "feed_forward_proj": feed_forward, "attn_implementation": attention}
    torch.manual_seed(0)
    t5_config = transformers.T5Config(**config)
    model = (_Encoder(transformers.T5EncoderModel(t5_config).eval()) if encoder_only
             else _EncoderDecoder(transformers.T5Model(t5_config).eval())).eval()
    args = [torch.randint(0, VOCAB, (1, seq)), torch.ones(1, seq, dtype=torch.int64)]
    if not encoder_only:
        args.append(torch.randint(0, VOCAB, (1, decoder_seq)))
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(args), str(path), dynamo=dynamo,
                          input_names=t5_input_names(encoder_only),
                          output_names=["last_hidden_state"],
                          opset_version=18 if dynamo else 17)
    return path
