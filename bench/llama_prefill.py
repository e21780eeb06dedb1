"""The built-in decoder's prefill natively, in PyTorch (eager), in ONNX
Runtime and in llama.cpp, side by side: median ms per prefill at 1 and 2
threads, each runtime in a fresh process of its own
(:func:`pyparbench.frameworks.run_framework`; llama.cpp on the GGUF file
written from the graph's own weights, f32, its cache f32, the last
position's logits only, as the graph), and each one's time over the native
one.

    python -P bench/llama_prefill.py [--models llama-tiny llama-bandwidth] [--repeats 10]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path

from pyparbench.frameworks import ModelRef, run_framework
from pyparbench.frameworks.llamacpp import write_llama_gguf
from pyparbench.models import build
from pyparbench.models.llama import config_of, transformers_weights
from pyparbench.settings import Settings

RUNTIMES = (("native", None), ("torch", "eager"), ("onnxruntime", "all"))


def median_ms(model: str, framework: str, mode: str | None, threads: int,
              repeats: int) -> float:
    run = run_framework(ModelRef(model, 1), framework, Settings(intra_op=threads), mode=mode,
                        repeats=repeats, warmup=3)
    if not run.ok:
        raise RuntimeError(f"{framework} on {model} at {threads} threads: {run.first_error}")
    return statistics.median(run.job.ns) / 1e6


def _llamacpp_ms(path: str, ids: list[int], context: int, threads: int, repeats: int) -> float:
    from pyparbench.frameworks.llamacpp.runtime import LlamaCppDecoder

    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:threads]))
    llm = LlamaCppDecoder(path, context=context, threads=threads, all_logits=False)
    for _ in range(3):
        llm.prefill(ids)
    ns = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        llm.prefill(ids)
        ns.append(time.perf_counter_ns() - t0)
    return statistics.median(ns) / 1e6


def llamacpp_ms(model: str, gguf: Path, threads: int, repeats: int) -> float:
    """llama.cpp's median prefill of the model's prompt, in a fresh process."""
    g = build(model, 1)
    ids = g.random_inputs(seed=0)["input_ids"][0].tolist()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return float(pool.apply(_llamacpp_ms, (str(gguf), ids, len(ids), threads, repeats)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["llama-tiny", "llama-bandwidth"])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    threads = [t for t in (1, 2) if t <= len(os.sched_getaffinity(0))]
    print(f"{'model':16} {'threads':>7} " + " ".join(f"{f:>12}" for f, _ in RUNTIMES)
          + f"{'llama.cpp':>12}  torch/native  ort/native  llama.cpp/native")
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            g = build(model, 1)
            gguf = write_llama_gguf(Path(tmp) / f"{model}.gguf", config_of(g),
                                    transformers_weights(g), context=4096)
            for t in threads:
                ms = [median_ms(model, f, m, t, args.repeats) for f, m in RUNTIMES]
                ms.append(llamacpp_ms(model, gguf, t, args.repeats))
                print(f"{model:16} {t:>7} " + " ".join(f"{v:>9.2f} ms" for v in ms)
                      + f"  {ms[1] / ms[0]:>12.2f}  {ms[2] / ms[0]:>10.2f}"
                      f"  {ms[3] / ms[0]:>16.2f}")


if __name__ == "__main__":
    main()
