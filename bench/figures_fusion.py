"""The native executor with and without the graph passes, against TensorFlow,
PyTorch (eager and frozen TorchScript) and ONNX Runtime running the same
architecture with the same weights, side by side in one run.

    python bench/figures_fusion.py [--models resnet50,...] [--batches 1,8] [--threads 2]
                                   [--rounds 3] [--lockstep 20] [--json out.json]

Every runtime runs in its own fresh process pinned to the same ``--threads``
CPUs (compact), one process per runtime and round, rounds interleaved so
that drift on a shared machine hits every runtime alike; each figure is the
median over rounds of the per-process medians, with the spread of those
medians. The framework models are pyparbench's framework backends
(:mod:`pyparbench.frameworks`: the Graph written the way each framework's
users write it). Printed per model: native latency with every pass and
with none, each framework's, native's ratio to the fastest framework
(above 1: native is faster) from the medians and, steadier where the
machine has slow spells, from ``--lockstep`` paired runs of native and
that framework taking turns (:func:`pyparbench.frameworks.run_lockstep`,
with its 95 % interval), the share of the measured FMA peak native reaches
(model FLOPs / latency / ``pyparbench peak`` at ``--threads``), and where
native loses, its per-op-type trace.

embedding_bag against PyTorch's: ``bench/embedding_bag_vs_torch.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

MODELS = ("resnet50", "inception-v3", "mobilenet-v2", "googlenet", "transformer", "dlrm")
SIZES: dict[str, dict[str, Any]] = {"dlrm": {"rows": 100_000}}


def _native_round(name: str, batch: int, threads: int, repeats: int) -> dict[str, Any]:
    """One native process: both plans alternated, and a trace of the optimised one."""
    from pyparbench.frameworks import Job, ModelRef, run_child
    from pyparbench.settings import Settings

    ref = ModelRef(name, batch, kwargs=SIZES.get(name, {}))
    out: dict[str, Any] = {}
    for opt in ("full", "none"):
        s = Settings(intra_op=threads, affinity="compact", graph_opt=opt)
        res = run_child("native", [Job(ref, repeats=repeats, warmup=3)], s)
        if res.first_error():
            out[f"native_{opt}"] = {"error": res.first_error()}
            continue
        out[f"native_{opt}"] = {"median": res.job.latency["median"] / 1e6,
                                "graph_opt": res.job.info.get("graph_opt")}
    return out


def _framework_round(name: str, batch: int, threads: int, repeats: int, framework: str,
                     mode: str) -> dict[str, Any]:
    from pyparbench.frameworks import ModelRef, run_framework
    from pyparbench.settings import Settings

    res = run_framework(ModelRef(name, batch, kwargs=SIZES.get(name, {})), framework,
                        Settings(intra_op=threads, affinity="compact"), mode=mode,
                        repeats=repeats, warmup=3)
    if not res.ok:
        return {"error": res.error[-300:]}
    return {"median": res.job.latency["median"] / 1e6}


def _trace(name: str, batch: int, threads: int) -> dict[str, float]:
    """ms per op type of the optimised native graph (the least of 3 traced runs)."""
    from pyparbench import models
    from pyparbench.executor import compile_graph
    from pyparbench.settings import Settings

    cg = compile_graph(models.build(name, batch, **SIZES.get(name, {})))
    s = Settings(intra_op=threads)
    cg.run(s, repeats=3, warmup=2)
    runs = []
    for _ in range(3):
        by_op: dict[str, float] = {}
        for e in cg.run(s, repeats=1, warmup=1, trace=True).trace:
            by_op[e.op] = by_op.get(e.op, 0.0) + (e.end_ns - e.start_ns) / 1e6
        runs.append(by_op)
    least = min(runs, key=lambda r: sum(r.values()))
    return {k: round(v, 3) for k, v in sorted(least.items(), key=lambda kv: -kv[1])}


def _lockstep(name: str, batch: int, threads: int, best: str, steps: int) -> dict[str, Any]:
    """Native (every pass) against the fastest framework, taking turns run by
    run in their own processes: the ratio a slow spell cancels out of."""
    from pyparbench.frameworks import Contender, ModelRef, run_lockstep
    from pyparbench.settings import Settings

    framework, _, mode = best.partition("/")
    s = Settings(intra_op=threads, affinity="compact")
    res = run_lockstep(ModelRef(name, batch, kwargs=SIZES.get(name, {})),
                       [Contender("native", settings=s), Contender(framework, mode or None, s)],
                       steps=steps)
    if res.errors or not res.steps:
        return {"errors": res.errors}
    return res.ratio("native", best).as_dict()


def _summary(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "rounds": len(samples)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10, help="timed runs per process")
    ap.add_argument("--rounds", type=int, default=3, help="processes per runtime")
    ap.add_argument("--lockstep", type=int, default=20, metavar="STEPS",
                    help="paired runs of native and the fastest framework in lockstep (0: none)")
    ap.add_argument("--json", help="also write every figure here")
    a = ap.parse_args()

    from pyparbench import models
    from pyparbench.machine.peak import measure_peak
    from pyparbench.harness.suite import FRAMEWORK_RUNS, installed_frameworks

    # The framework runs of the main job, those installed here.
    have = installed_frameworks()
    runs = [(f, m) for f, m in FRAMEWORK_RUNS if f in have]
    peak = measure_peak([a.threads], quick=True).points[-1].fma_gflops
    print(f"measured FMA peak at {a.threads} threads: {peak:.0f} GFLOP/s; median ms over "
          f"{a.rounds} processes each (min..max of the process medians)")
    names = ["native none", "native full", *[f"{f[:5]}/{m[:6]}" for f, m in runs]]
    print(f"{'model':13s} {'b':>2s} " + " ".join(f"{n:>12s}" for n in names)
          + "  full/best  lockstep  %peak")
    rows: list[dict[str, Any]] = []
    for name in a.models.split(","):
        for batch in (int(b) for b in a.batches.split(",")):
            got: dict[str, list[float]] = {}
            row: dict[str, Any] = {"model": name, "batch": batch, "threads": a.threads,
                                   "errors": {}}
            for _ in range(a.rounds):
                nat = _native_round(name, batch, a.threads, a.repeats)
                for opt in ("none", "full"):
                    v = nat[f"native_{opt}"]
                    if "error" in v:
                        row["errors"][f"native_{opt}"] = v["error"]
                    else:
                        got.setdefault(f"native_{opt}", []).append(v["median"])
                        row[f"graph_opt_{opt}"] = v["graph_opt"]
                for f, m in runs:
                    v = _framework_round(name, batch, a.threads, a.repeats, f, m)
                    if "error" in v:
                        row["errors"][f"{f}/{m}"] = v["error"]
                    else:
                        got.setdefault(f"{f}/{m}", []).append(v["median"])
            row.update({k: _summary(v) for k, v in got.items()})
            fw = {k: row[k]["median"] for k in (f"{f}/{m}" for f, m in runs) if k in row}
            full = row.get("native_full", {}).get("median", float("nan"))
            best_k = min(fw, key=fw.__getitem__) if fw else None
            ratio = fw[best_k] / full if best_k else float("nan")
            paired = (_lockstep(name, batch, a.threads, best_k, a.lockstep)
                      if best_k and a.lockstep else None)
            ratio_paired = paired["median"] if paired and "median" in paired else float("nan")
            flops = models.build(name, batch, **SIZES.get(name, {})).flops
            pct = 100.0 * flops / (full * 1e-3) / (peak * 1e9)
            row.update(best_framework=best_k, native_vs_best=ratio,
                       lockstep=paired, percent_of_peak=pct,
                       gflop=flops / 1e9)

            def cell(k: str, row: dict[str, Any] = row) -> str:
                v = row.get(k)
                return f"{v['median']:12.3f}" if isinstance(v, dict) else f"{'-':>12s}"
            print(f"{name:13s} {batch:2d} "
                  + " ".join(cell(k) for k in ["native_none", "native_full",
                                               *[f"{f}/{m}" for f, m in runs]])
                  + f"  {ratio:8.2f}x {ratio_paired:8.2f}x  {pct:4.0f}%", flush=True)
            if paired:
                print(f"    lockstep, {a.lockstep} paired runs: "
                      + (f"x{paired['median']:.3f} [{paired['low']:.3f}, {paired['high']:.3f}], "
                         f"native faster in {paired['a_faster']}" if "median" in paired
                         else f"failed: {paired['errors']}"))
            info = row.get("graph_opt_full") or {}
            if info:
                print(f"    passes {info.get('applied')}: {info.get('nodes')} -> "
                      f"{info.get('optimized_nodes')} nodes")
            for k, e in row["errors"].items():
                print(f"    {k} failed: {e.splitlines()[-1] if e else e}")
            if best_k and ratio < 1.0:
                row["trace_full"] = _trace(name, batch, a.threads)
                print(f"    {best_k} is faster; native trace (ms per op type): "
                      f"{row['trace_full']}")
            rows.append(row)
            if a.json:
                Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
