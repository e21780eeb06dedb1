"""A Llama-style decoder's weights as the GGUF file llama.cpp loads.

The weights come in ``transformers``' names and layouts (``LlamaForCausalLM``'s
``state_dict``: ``model.layers.{i}.self_attn.q_proj.weight`` as
(out_features, in_features)), which is also how the built-in decoder hands
them out, and are written with the ``gguf`` package (the one llama.cpp's own
converter uses) under llama.cpp's tensor names and ``llama.*`` metadata.

Two layouts differ. ``transformers`` rotates the two halves of each head
(rotate-half); llama.cpp's ``llama`` architecture rotates adjacent pairs, so
the rows of the query and key projections are permuted per head, as
llama.cpp's converter does. The file has no vocabulary (tokenizer model
``none``): the benchmark feeds token ids, never text.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pyparbench.models.llama import LlamaConfig

__all__ = ["GGUF_PRECISIONS", "weight_shapes", "write_llama_gguf"]

# The precisions a GGUF written here stores its matrices in (norm weights
# stay f32, as llama.cpp's converter writes them).
GGUF_PRECISIONS = ("fp32", "bf16", "fp16")


def _pairs_from_halves(w: npt.NDArray[Any], heads: int) -> npt.NDArray[Any]:
    """Rows of a query / key projection reordered from rotate-half to
    adjacent-pair rotary: within each head, row j of the first half and row
    j of the second become rows 2j and 2j + 1."""
    out = w.shape[0]
    return np.ascontiguousarray(
        w.reshape(heads, 2, out // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def weight_shapes(shape: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Every weight of the decoder by its name in transformers'
    ``LlamaForCausalLM`` (untied lm_head), with its shape."""
    h, kv, ff = shape.hidden, shape.kv_heads * shape.head_dim, shape.intermediate
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (shape.vocab, h)}
    for i in range(shape.layers):
        p = f"model.layers.{i}."
        out |= {p + "input_layernorm.weight": (h,), p + "self_attn.q_proj.weight": (h, h),
                p + "self_attn.k_proj.weight": (kv, h), p + "self_attn.v_proj.weight": (kv, h),
                p + "self_attn.o_proj.weight": (h, h),
                p + "post_attention_layernorm.weight": (h,), p + "mlp.gate_proj.weight": (ff, h),
                p + "mlp.up_proj.weight": (ff, h), p + "mlp.down_proj.weight": (h, ff)}
    return out | {"model.norm.weight": (h,), "lm_head.weight": (shape.vocab, h)}


# transformers' name (after "model.layers.{i}.") -> llama.cpp's (after "blk.{i}.").
_BLOCK_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
                "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
                "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
_TOP_NAMES = {"model.embed_tokens.weight": "token_embd.weight",
              "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}


def _tensors(shape: LlamaConfig, weights: Mapping[str, npt.NDArray[Any]]
             ) -> list[tuple[str, npt.NDArray[Any]]]:
    """(llama.cpp name, float32 array) for every tensor, in the file's order;
    KeyError naming a missing weight, ValueError naming a misshapen one."""
    out = []
    for name, want in weight_shapes(shape).items():
        if name not in weights:
            raise KeyError(f"weight {name!r} is missing (transformers' LlamaForCausalLM names)")
        a = np.asarray(weights[name], dtype=np.float32)
        if a.shape != want:
            raise ValueError(f"weight {name!r} has shape {a.shape}, expected {want}")
        if name in _TOP_NAMES:
            out.append((_TOP_NAMES[name], a))
            continue
        layer, rest = name.removeprefix("model.layers.").split(".", 1)
        part = rest.removesuffix(".weight")
        if part == "self_attn.q_proj":
            a = _pairs_from_halves(a, shape.heads)
        elif part == "self_attn.k_proj":
            a = _pairs_from_halves(a, shape.kv_heads)
        out.append((f"blk.{layer}.{_BLOCK_NAMES[part]}.weight", a))
    return out


def write_llama_gguf(path: str | Path, shape: LlamaConfig,
                     weights: Mapping[str, npt.NDArray[Any]], *, context: int,
                     precision: str = "fp32", name: str = "pyparbench-llama") -> Path:
    """Write ``weights`` (transformers' names: :func:`weight_shapes`) of a
    decoder of configuration ``shape`` as a llama.cpp GGUF file at ``path``
    for a context of ``context`` tokens, its matrices in ``precision``
    ("fp32", "bf16" or "fp16"; norm weights always f32). Returns the path."""
    import gguf  # noqa: PLC0415 (the llm extra; imported where a file is written)

    if precision not in GGUF_PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(GGUF_PRECISIONS)}")
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise ValueError(f"context must be an integer >= 1, got {context!r}")
    tensors = _tensors(shape, weights)  # every check before the file is opened
    matrix_type = {"fp32": gguf.GGMLQuantizationType.F32, "bf16": gguf.GGMLQuantizationType.BF16,
                   "fp16": gguf.GGMLQuantizationType.F16}[precision]
    file_type = {"fp32": gguf.LlamaFileType.ALL_F32, "bf16": gguf.LlamaFileType.MOSTLY_BF16,
                 "fp16": gguf.LlamaFileType.MOSTLY_F16}[precision]
    path = Path(path)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_context_length(context)
    w.add_embedding_length(shape.hidden)
    w.add_block_count(shape.layers)
    w.add_feed_forward_length(shape.intermediate)
    w.add_rope_dimension_count(shape.head_dim)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.kv_heads)
    w.add_layer_norm_rms_eps(shape.eps)
    w.add_rope_freq_base(shape.rope_theta)
    w.add_vocab_size(shape.vocab)
    w.add_file_type(file_type)
    w.add_tokenizer_model("none")
    for tensor_name, a in tensors:
        if a.ndim == 1 or matrix_type == gguf.GGMLQuantizationType.F32:
            w.add_tensor(tensor_name, a)
        else:
            w.add_tensor(tensor_name, gguf.quantize(a, matrix_type), raw_dtype=matrix_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
