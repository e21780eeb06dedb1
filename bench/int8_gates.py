"""A QDQ file's native int8 plan with and without its SiLU gate lookups, and ONNX Runtime.

  python -P bench/int8_gates.py onnx-models/efficientnet_b0-int8.onnx [--threads 1,2]
                                [--rounds 30] [--lookup-isa all] [--micro 1048576]

The file (``bench/onnx_models.py --int8`` writes ``<name>-int8.onnx``) is
imported once and compiled twice: without graph.passes.int8_gates (each
SiLU a sigmoid, a fake_quantize and a mul, float32) and with it (one lookup
a gate); ONNX Runtime runs the same file at the same thread count. They run
in interleaved rounds in one process (one run each per round, after two
warm-up runs); the plan with the lookups runs once a round for each build of
the byte lookup given (``--lookup-isa``: avx512vbmi, avx512, avx2, generic,
auto, or all this CPU runs; process-wide, set before each run). Each line
gives the best and the median ms, ORT / native for both plans, whether the
two plans' outputs are equal to the bit (at every build), and the load
average; then, per build, the lookups' time summed over their nodes (each
node's best of 8 traced runs), those writing bytes and those writing
float32. ``--micro N`` also times N-element lookups alone per build (bytes
out, float32 on a grid, float32 gathered; interleaved rounds): the best and
median, and GB/s read and written at the best; the path may then be left out.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pyparbench._core import ops as core_ops
from pyparbench.executor import compile_graph
from pyparbench.graph import from_onnx
from pyparbench.graph.passes import executed_graph, optimizer
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


LOOKUP_ISAS = ("avx512vbmi", "avx512", "avx2", "generic")


def _lookup_isas(spec: str) -> list[str]:
    """The builds named (``all``: every one this CPU runs; ``auto``: the widest)."""
    names = list(LOOKUP_ISAS) if spec == "all" else [v.strip() for v in spec.split(",")]
    isas = []
    for name in names:
        try:
            core_ops.set_lookup_isa(name)
        except ValueError:
            if spec == "all":
                continue  # a build this CPU does not run
            raise
        isas.append(core_ops.lookup_isa())
    core_ops.set_lookup_isa("auto")
    return list(dict.fromkeys(isas))


def _on(isa: str, f: Callable[[], float]) -> Callable[[], float]:
    """f run with the byte lookup's build ``isa``."""
    def once() -> float:
        core_ops.set_lookup_isa(isa)
        return f()

    return once


def _lookup_ms(cg: Any, g: Any, threads: int, isa: str, runs: int = 8) -> tuple[float, float]:
    """ms of the plan's lookups writing bytes and writing float32: each
    node's best of ``runs`` traced runs, summed."""
    settings = Settings(intra_op=threads, affinity="compact")
    out_dtype = {n.name: n.dtype for n in executed_graph(g, settings).nodes
                 if n.op == "fake_quantize" and "table" in n.params}
    core_ops.set_lookup_isa(isa)
    best: dict[str, float] = {}
    for _ in range(runs):
        for e in cg.run(settings, repeats=1, warmup=0, trace=True).trace:
            if e.name in out_dtype:
                ms = (e.end_ns - e.start_ns) / 1e6
                best[e.name] = min(best.get(e.name, ms), ms)
    floats = sum(ms for name, ms in best.items() if out_dtype[name] == "float32")
    return sum(best.values()) - floats, floats


def _micro(n: int, isas: list[str], threads: int, rounds: int) -> None:
    """Lookups of n elements alone, per build: bytes out, float32 on a grid
    (a byte lookup scaled), float32 off it (gathered)."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, n).astype(np.uint8)
    scale = float(np.float32(0.037))
    grid = ((rng.integers(0, 256, 256) - 100) * np.float64(scale)).astype(np.float32)
    kinds: dict[str, tuple[Any, float | None, Any]] = {
        "bytes": (rng.integers(0, 256, 256).astype(np.uint8), None, np.empty(n, np.uint8)),
        "float32 grid": (grid, scale, np.empty(n, np.float32)),
        "float32 gathered": (rng.standard_normal(256).astype(np.float32), None,
                             np.empty(n, np.float32))}
    reps = max(5, min(200, (1 << 26) // max(n, 1)))
    ns: dict[tuple[str, str], list[float]] = {(i, k): [] for i in isas for k in kinds}
    for _ in range(rounds):
        for isa in isas:
            core_ops.set_lookup_isa(isa)
            for k, (table, sc, out) in kinds.items():
                for _ in range(reps):
                    t0 = time.perf_counter_ns()
                    core_ops.byte_lookup(x, table, out, scale=sc, threads=threads)
                    ns[isa, k].append(time.perf_counter_ns() - t0)
    core_ops.set_lookup_isa("auto")
    for isa in isas:
        parts = []
        for k, (_, _, out) in kinds.items():
            best, med = min(ns[isa, k]), float(np.median(ns[isa, k]))
            moved = n * (1 + out.itemsize)
            parts.append(f"{k} {best / 1e3:.1f} / {med / 1e3:.1f} us ({moved / best:.2f} GB/s)")
        print(f"lookup of {n} elements, {threads} thread(s), {isa}: " + ", ".join(parts)
              + f" (best / median, {rounds} x {reps} runs); "
              f"load {' '.join(f'{v:.1f}' for v in os.getloadavg())}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", nargs="?", help="a quantize_static QDQ file")
    ap.add_argument("--threads", default="1", help="thread counts, comma-separated")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--lookup-isa", default="auto",
                    help="builds of the byte lookup the plan with the lookups runs, "
                         "comma-separated: avx512vbmi, avx512, avx2, generic, auto; all: "
                         "every one this CPU runs")
    ap.add_argument("--micro", type=int, default=0, metavar="N",
                    help="also time N-element lookups alone per build")
    a = ap.parse_args()
    if a.path is None and not a.micro:
        ap.error("give a QDQ file, or --micro N")
    if a.micro < 0:
        ap.error(f"--micro must be >= 0, got {a.micro}")
    isas = _lookup_isas(a.lookup_isa)
    threads = [int(v) for v in a.threads.split(",")]
    for t in threads if a.micro else ():
        _micro(a.micro, isas, t, max(1, a.rounds // 10))
    if a.path is None:
        return
    g = from_onnx(a.path, batch=1)
    inputs = g.random_inputs(seed=1)
    for t in threads:
        without, run_without = _native(g, inputs, t, gates=False)
        with_, run_with = _native(g, inputs, t, gates=True)
        withs = {f"native with ({isa})": _on(isa, run_with) for isa in isas}
        runs = {"native without": run_without, **withs,
                "ORT": _onnxruntime(a.path, inputs, t)}
        ms: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(a.rounds):
            for k, f in runs.items():
                ms[k].append(f())
        best = {k: min(v) for k, v in ms.items()}
        med = {k: float(np.median(v)) for k, v in ms.items()}
        equal = []
        for isa in isas:
            _on(isa, run_with)()
            equal.append(all(np.array_equal(x, y) for x, y in
                             zip(without.outputs().values(), with_.outputs().values(),
                                 strict=True)))
        ratios = {stat: f"x{v['ORT'] / v['native without']:.2f} -> "
                  + ", ".join(f"x{v['ORT'] / v[k]:.2f}" for k in withs)
                  for stat, v in (("best", best), ("median", med))}
        print(f"{os.path.basename(a.path)}, {t} thread(s), {a.rounds} rounds: "
              + ", ".join(f"{k} {best[k]:.2f} / {med[k]:.2f} ms" for k in runs)
              + " (best / median); ORT / native without -> with: "
              f"best {ratios['best']}, median {ratios['median']}; "
              f"outputs equal to the bit: {all(equal)}; "
              f"load {' '.join(f'{v:.1f}' for v in os.getloadavg())}", flush=True)
        for isa in isas:
            to_bytes, to_floats = _lookup_ms(with_, g, t, isa)
            print(f"  lookups ({isa}): bytes out {to_bytes:.2f} ms, float32 out {to_floats:.2f} ms "
                  "(each node's best of 8 traced runs, summed)", flush=True)
        core_ops.set_lookup_isa("auto")


if __name__ == "__main__":
    main()
