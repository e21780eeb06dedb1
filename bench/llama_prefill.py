"""The built-in decoder's prefill natively, in PyTorch (eager) and in ONNX
Runtime, side by side: median ms per prefill at 1 and 2 threads, each
runtime in a fresh process of its own (:func:`pyparbench.frameworks.run_framework`),
and each framework's time over the native one.

    python -P bench/llama_prefill.py [--models llama-tiny llama-bandwidth] [--repeats 10]
"""

from __future__ import annotations

import argparse
import os
import statistics

from pyparbench.frameworks import ModelRef, run_framework
from pyparbench.settings import Settings

RUNTIMES = (("native", None), ("torch", "eager"), ("onnxruntime", "all"))


def median_ms(model: str, framework: str, mode: str | None, threads: int,
              repeats: int) -> float:
    run = run_framework(ModelRef(model, 1), framework, Settings(intra_op=threads), mode=mode,
                        repeats=repeats, warmup=3)
    if not run.ok:
        raise RuntimeError(f"{framework} on {model} at {threads} threads: {run.first_error}")
    return statistics.median(run.job.ns) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["llama-tiny", "llama-bandwidth"])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    threads = [t for t in (1, 2) if t <= len(os.sched_getaffinity(0))]
    print(f"{'model':16} {'threads':>7} " + " ".join(f"{f:>12}" for f, _ in RUNTIMES)
          + "  torch/native  ort/native")
    for model in args.models:
        for t in threads:
            ms = [median_ms(model, f, m, t, args.repeats) for f, m in RUNTIMES]
            print(f"{model:16} {t:>7} " + " ".join(f"{v:>9.2f} ms" for v in ms)
                  + f"  {ms[1] / ms[0]:>12.2f}  {ms[2] / ms[0]:>10.2f}")


if __name__ == "__main__":
    main()
