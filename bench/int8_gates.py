"""A QDQ file's native int8 plan with and without its SiLU gate lookups, and ONNX Runtime.

  python -P bench/int8_gates.py onnx-models/efficientnet_b0-int8.onnx [--threads 1,2]
                                [--rounds 30]

The file (``bench/onnx_models.py --int8`` writes ``<name>-int8.onnx``) is
imported once and compiled twice: without graph.passes.int8_gates (each
SiLU a sigmoid, a fake_quantize and a mul, float32) and with it (one lookup
a gate); ONNX Runtime runs the same file at the same thread count. The
three run in interleaved rounds in one process (one run each per round,
after two warm-up runs); each line gives the best and the median ms, ORT /
native for both plans, whether the two plans' outputs are equal to the bit,
and the load average.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pyparbench.executor import compile_graph
from pyparbench.graph import from_onnx
from pyparbench.graph.passes import optimizer
from pyparbench.settings import Settings


def _native(g: Any, inputs: dict[str, Any], threads: int, gates: bool
            ) -> tuple[Any, Callable[[], float]]:
    """The compiled plan (with or without the gate lookups) and a timed run (ms)."""
    whole = optimizer.int8_gates
    if not gates:
        optimizer.int8_gates = lambda graph: graph
    try:
        cg = compile_graph(g)
        cg.set_inputs(inputs)
        step = cg.stepper(Settings(intra_op=threads, affinity="compact"))  # optimises here
    finally:
        optimizer.int8_gates = whole
    step()
    step()
    return cg, lambda: step() / 1e6


def _onnxruntime(path: str, inputs: dict[str, Any], threads: int) -> Callable[[], float]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {i.name: inputs[i.name] for i in sess.get_inputs()}
    sess.run(None, feed)
    sess.run(None, feed)

    def once() -> float:
        t0 = time.perf_counter_ns()
        sess.run(None, feed)
        return (time.perf_counter_ns() - t0) / 1e6

    return once


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", help="a quantize_static QDQ file")
    ap.add_argument("--threads", default="1", help="thread counts, comma-separated")
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    g = from_onnx(a.path, batch=1)
    inputs = g.random_inputs(seed=1)
    for t in (int(v) for v in a.threads.split(",")):
        without, run_without = _native(g, inputs, t, gates=False)
        with_, run_with = _native(g, inputs, t, gates=True)
        runs = {"native without": run_without, "native with": run_with,
                "ORT": _onnxruntime(a.path, inputs, t)}
        ms: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(a.rounds):
            for k, f in runs.items():
                ms[k].append(f())
        best = {k: min(v) for k, v in ms.items()}
        med = {k: float(np.median(v)) for k, v in ms.items()}
        equal = all(np.array_equal(x, y) for x, y in
                    zip(without.outputs().values(), with_.outputs().values(), strict=True))
        print(f"{os.path.basename(a.path)}, {t} thread(s), {a.rounds} rounds: "
              + ", ".join(f"{k} {best[k]:.2f} / {med[k]:.2f} ms" for k in runs)
              + " (best / median); ORT / native without -> with: best "
              f"x{best['ORT'] / best['native without']:.2f} -> x{best['ORT'] / best['native with']:.2f}"
              f", median x{med['ORT'] / med['native without']:.2f} -> "
              f"x{med['ORT'] / med['native with']:.2f}; outputs equal to the bit: {equal}; "
              f"load {' '.join(f'{v:.1f}' for v in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    main()
