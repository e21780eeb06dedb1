"""The built-in decoder's decode step natively and in llama.cpp on the same
weights, side by side: median ms per generated token after a cache of
``--past`` tokens, tokens/s, the bytes a step reads (every weight matrix
once, one embedding row, the cached keys and values) and that over the
step's time against the STREAM-triad bandwidth ``peak`` measures at the
same thread count.

Each runtime runs in a fresh process pinned to its first T CPUs. Native: the
step graph (:func:`pyparbench.models.llama.llama_decode`) fed a random cache
of ``past`` tokens. llama.cpp: the GGUF file written from the same weights
(f32, f32 cache), a prefill of ``past`` tokens then ``--tokens`` greedy
steps, each timed (its cache grows by one per step: steps 1-8 of a 128-token
cache differ by under 6 % in bytes).

With ``--interleaved R`` both runtimes share one pinned process per thread
count and take turns, R rounds of ``--tokens`` steps each, and the table
gives each one's fastest step: on a machine where other jobs come and go,
turns of a few milliseconds see the same load, where fresh processes minutes
apart do not.

    python -P bench/llama_decode.py [--models llama-tiny llama-bandwidth] [--tokens 16]
                                    [--interleaved 8]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
from pathlib import Path

from pyparbench.frameworks.llamacpp import write_llama_gguf
from pyparbench.machine.peak import measure_peak
from pyparbench.models.llama import LLAMA_SIZES, config_of, llama_decode, transformers_weights


def _pin(threads: int) -> None:
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:threads]))


def _native_ms(model: str, past: int, threads: int, repeats: int) -> float:
    from pyparbench.executor import compile_graph
    from pyparbench.settings import Settings

    _pin(threads)
    cg = compile_graph(llama_decode(1, size=model, past=past))
    rec = cg.run(Settings(intra_op=threads), repeats=repeats, warmup=3)
    return statistics.median(rec.ns) / 1e6


def _llamacpp_ms(path: str, past: int, vocab: int, threads: int, tokens: int) -> float:
    from pyparbench.frameworks.llamacpp.runtime import LlamaCppDecoder

    _pin(threads)
    llm = LlamaCppDecoder(path, context=past + tokens + 1, threads=threads, all_logits=False)
    prompt = [(7 * i + 3) % vocab for i in range(past)]
    llm.time_generation(prompt, 3)  # warm
    _, steps = llm.time_generation(prompt, tokens)
    return statistics.median(steps) * 1e3


def _interleaved_ms(model: str, path: str, past: int, vocab: int, threads: int, tokens: int,
                    rounds: int) -> tuple[float, float]:
    """Native's and llama.cpp's fastest step in one process, taking turns."""
    from pyparbench.executor import compile_graph
    from pyparbench.frameworks.llamacpp.runtime import LlamaCppDecoder
    from pyparbench.settings import Settings

    _pin(threads)
    cg = compile_graph(llama_decode(1, size=model, past=past))
    llm = LlamaCppDecoder(path, context=past + tokens + 1, threads=threads, all_logits=False)
    prompt = [(7 * i + 3) % vocab for i in range(past)]
    llm.time_generation(prompt, 3)  # warm
    native, cpp = [], []
    for _ in range(rounds):
        native.append(min(cg.run(Settings(intra_op=threads), repeats=tokens, warmup=2).ns) / 1e6)
        cpp.append(min(llm.time_generation(prompt, tokens)[1]) * 1e3)
    return min(native), min(cpp)


def _in_fresh_process(fn: object, *args: object) -> float:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return float(pool.apply(fn, args))  # type: ignore[arg-type]


def step_bytes(model: str, past: int) -> int:
    """Bytes a decode step reads: each weight matrix and norm once, one
    embedding row, the cached keys and values of every layer."""
    g = llama_decode(1, size=model, past=past)
    cfg = config_of(g)
    weights = sum(w.nbytes for k, w in transformers_weights(g).items() if "embed_tokens" not in k)
    cache = 2 * cfg.layers * cfg.kv_heads * past * cfg.head_dim * 4
    return weights + cfg.hidden * 4 + cache


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["llama-tiny", "llama-bandwidth"],
                    choices=list(LLAMA_SIZES))
    ap.add_argument("--past", type=int, default=128, help="cached tokens before the step")
    ap.add_argument("--tokens", type=int, default=16, help="timed steps (native: repeats)")
    ap.add_argument("--interleaved", type=int, metavar="R", default=0,
                    help="both runtimes in one process, R rounds of turns; each one's "
                         "fastest step (default: a fresh process each, the median step)")
    args = ap.parse_args()
    if args.interleaved < 0:
        ap.error(f"--interleaved must be >= 0, got {args.interleaved}")
    threads = [t for t in (1, 2) if t <= len(os.sched_getaffinity(0))]
    peak = measure_peak(threads, quick=True)
    triad = {p.threads: p.triad_gbs for p in peak.points}
    print(f"each runtime's fastest step of {args.interleaved} rounds of turns in one process"
          if args.interleaved else "each runtime's median step, a fresh process each")
    print(f"{'model':16} {'threads':>7} {'native ms':>10} {'llama.cpp ms':>13} "
          f"{'native tok/s':>13} {'cpp/native':>11} {'MB/token':>9} {'native GB/s':>12} "
          f"{'triad GB/s':>11} {'of triad':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            g = llama_decode(1, size=model, past=args.past)
            gguf = write_llama_gguf(Path(tmp) / f"{model}.gguf", config_of(g),
                                    transformers_weights(g), context=4096)
            nbytes = step_bytes(model, args.past)
            for t in threads:
                if args.interleaved:
                    with multiprocessing.get_context("spawn").Pool(1) as pool:
                        native, cpp = pool.apply(_interleaved_ms, (
                            model, str(gguf), args.past, g.meta["vocab"], t, args.tokens,
                            args.interleaved))
                else:
                    native = _in_fresh_process(_native_ms, model, args.past, t, args.tokens)
                    cpp = _in_fresh_process(_llamacpp_ms, str(gguf), args.past, g.meta["vocab"],
                                            t, args.tokens)
                gbs = nbytes / native / 1e6
                print(f"{model:16} {t:>7} {native:>10.3f} {cpp:>13.3f} {1e3 / native:>13.1f} "
                      f"{cpp / native:>11.2f} {nbytes / 1e6:>9.1f} {gbs:>12.1f} "
                      f"{triad[t]:>11.1f} {gbs / triad[t]:>9.2f}")


if __name__ == "__main__":
    main()
