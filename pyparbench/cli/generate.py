"""``pyparbench generate MODEL``: LLM inference by a built-in decoder,
greedy decoding of ``--prompt`` tokens then ``--new`` tokens per sequence,
natively (a key / value cache the executor keeps in place), in llama.cpp on
the same weights (a GGUF file), in PyTorch (transformers' LlamaForCausalLM
on its DynamicCache) or in ONNX Runtime (that model exported with its
cache), in a fresh pinned child: time to first token, time per output
token, tokens/s and bytes read per token."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from pyparbench.child_process import ChildFailed
from pyparbench.cli._common import positive_int, print_json
from pyparbench.frameworks.generation import (
    GENERATION_FRAMEWORKS,
    NATIVE_WEIGHTS,
    GenerationRecord,
    GenerationRequest,
)
from pyparbench.frameworks.generation_run import run_generation
from pyparbench.models import MODELS
from pyparbench.models.llama import LLAMA_SIZES

__all__ = ["add_command"]

_DEFAULT_NEW = 16
# Each runtime's name for its threads, as its record's settings hold them.
_THREADS_KNOBS = ("intra_op", "n_threads", "num_threads", "intra_op_num_threads")


def _request(args: argparse.Namespace) -> GenerationRequest:
    """The request the options name; ValueError naming a model that is not a
    built-in decoder (or no model at all)."""
    if args.model not in LLAMA_SIZES:
        what = "is not a decoder" if args.model in MODELS else "is not a model"
        raise ValueError(f"model {args.model!r} {what}; generate takes the built-in "
                         f"decoders: {', '.join(LLAMA_SIZES)}")
    prompt = LLAMA_SIZES[args.model].prompt if args.prompt is None else args.prompt
    return GenerationRequest(args.model, prompt, args.new, batch=args.batch,
                             threads=args.threads, framework=args.framework,
                             weights=args.weights)


def _table(record: GenerationRecord) -> Table:
    table = Table(title=f"{record.model}: {record.batch} x ({record.prompt} prompt + "
                        f"{record.new} new tokens), {record.framework}", title_style="bold")
    for col in ("threads", "TTFT ms", "TPOT ms", "tokens/s", "MB/token", "GB/s"):
        table.add_column(col, justify="right", no_wrap=True)
    tpot = record.tpot_ms
    threads = next((record.settings[k] for k in _THREADS_KNOBS if k in record.settings), "?")
    table.add_row(str(threads), f"{record.ttft_ms:.2f}",
                  "-" if tpot is None else f"{tpot:.3f}", f"{record.tokens_per_s:.1f}",
                  f"{record.bytes_per_token / 1e6:.2f}",
                  "-" if tpot is None else f"{record.bytes_per_token / tpot / 1e6:.2f}")
    return table


def _cmd_generate(args: argparse.Namespace) -> int:
    request = _request(args)
    record = run_generation(request)
    if args.json:
        print_json({**record.as_dict(), "tokens_count": sum(len(r) for r in record.tokens)})
        return 0
    console = Console()
    console.print(_table(record))
    console.print(f"tokens: {record.tokens}")
    held = record.settings.get("weights")
    if held:  # native: how its steps held the weights
        console.print(f"weights: {held} (--weights {args.weights})")
    console.print("TTFT: the prompt's step and the first token; TPOT: median time per "
                  "output token after it; GB/s: bytes per token / TPOT")
    return 0


def add_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``generate``."""
    p = subparsers.add_parser(
        "generate", help="LLM inference: greedy generation by a built-in decoder (native, "
                         "llama.cpp, PyTorch or ONNX Runtime): time to first token, per "
                         "output token, tokens/s",
        description=__doc__)
    p.add_argument("model", help=f"a built-in decoder: {', '.join(LLAMA_SIZES)}")
    p.add_argument("--prompt", type=positive_int("--prompt"), metavar="P",
                   help="prompt tokens per sequence (default: the model's prompt)")
    p.add_argument("--new", type=positive_int("--new"), default=_DEFAULT_NEW, metavar="N",
                   help=f"tokens generated per sequence (default {_DEFAULT_NEW})")
    p.add_argument("--threads", type=positive_int("--threads"), default=1, metavar="T",
                   help="threads (native: intra-op; llama.cpp: -t and -tb; torch: "
                        "set_num_threads, interop 1; onnxruntime: intra_op_num_threads, "
                        "inter 1), pinned compact")
    p.add_argument("--batch", type=positive_int("--batch"), default=1, metavar="B",
                   help="sequences generated together (llama.cpp: 1)")
    p.add_argument("--framework", choices=GENERATION_FRAMEWORKS, default="native",
                   help="the runtime (llamacpp: a GGUF file of the same weights; torch: "
                        "transformers' LlamaForCausalLM on them; onnxruntime: that model "
                        "exported to ONNX with its cache)")
    p.add_argument("--weights", choices=NATIVE_WEIGHTS, default="auto",
                   help="native: how the weights are held (copies: each step packs its own "
                        "copy, the fastest steps, about three times the weights' memory; "
                        "packed: only the token step does, about twice; in-place: both steps "
                        "read the one copy, slower; auto (default): the fastest that fits the "
                        "memory available; the same tokens every way)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_generate, user_errors=(ValueError, MemoryError, ChildFailed))
