"""Executor figures, measured side by side in one run.

  python bench/figures_graph.py [--quick] [--models resnet50 googlenet ...] [--json out.json]

1. Executor overhead per node: a chain of many tiny ops run by the plan,
   minus the same prepared kernels timed alone in their C++ loops (target:
   under 2 us per node), for the sync and async schedulers.
2. For each model at batch 1 and a larger batch, on this machine's cores:
   latency under the study's layer knobs, side by side: sync vs async
   (Scheduler), library vs framework operator mode (Operator), onednn vs
   eigen vs blas for the heavy ops (Library). Medians with their IQR, and
   each setting's speed-up over the sync / library / onednn baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np

import pyparbench as ppb
from pyparbench import models
from pyparbench.executor import compile_graph
from pyparbench.graph import GraphBuilder
from pyparbench.settings import Settings
from pyparbench.timing import summarize


def node_overhead(nodes: int, repeats: int) -> list[dict[str, Any]]:
    """A chain of `nodes` relu ops on a (1, 16) tensor."""
    b = GraphBuilder("tiny-chain", seed=0)
    x = b.input("x", (1, 16))
    for _ in range(nodes):
        x = b.eltwise(x, "relu")
    cg = compile_graph(b.build(x))
    k = ppb.ops.Eltwise("relu", [1, 16], threads=1)
    a = np.random.default_rng(0).random((1, 16), np.float32)
    out = np.empty_like(a)
    alone = summarize([float(np.median(k.timeit(a, out, repeats=200, warmup=20)))
                       for _ in range(repeats)])
    rows = []
    for s in (Settings(), Settings(scheduler="async", inter_op=1),
              Settings(scheduler="async", inter_op=2)):
        plan = cg.run(s, repeats=repeats, warmup=2)
        per_node = plan.summary.median / nodes
        rows.append({"settings": s.label(), "plan_per_node_ns": per_node,
                     "kernel_alone_ns": alone.median,
                     "overhead_ns": per_node - alone.median})
    return rows


def layer_settings(cores: int) -> list[tuple[str, Settings]]:
    """The baseline and one change per layer knob."""
    t = max(1, cores)
    half = max(1, cores // 2)
    return [
        ("sync library onednn", Settings(intra_op=t)),
        ("async 2 workers", Settings(scheduler="async", inter_op=2, intra_op=half)),
        ("framework mode", Settings(operator="framework", intra_op=t, pool="eigen")),
        ("eigen library", Settings(intra_op=t, library="eigen")),
        ("blas library", Settings(intra_op=t, library="blas")),
    ]


def model_figures(names: list[str], batches: list[int], repeats: int, quick: bool,
                  cores: int) -> list[dict[str, Any]]:
    rows = []
    small = {"image_size": 64} if quick else {}
    for name in names:
        spec = models.MODELS[name]
        for batch in batches:
            kw = small if spec.kind == "vision" else {}
            graph = models.build(name, batch, **kw)
            cg = compile_graph(graph)
            base = None
            for label, s in layer_settings(cores):
                try:
                    rec = cg.run(s, repeats=repeats, warmup=1)
                except ValueError as e:  # a library that cannot run this model
                    print(f"  {name} b{batch} {label}: skipped ({e})", flush=True)
                    continue
                base = base or rec.summary.median
                row = {"model": name, "batch": batch, "setting": label,
                       "settings": s.label(), "summary": rec.summary.as_dict(),
                       "speedup_vs_baseline": base / rec.summary.median}
                rows.append(row)
                print(f"  {name:13s} b{batch:<3d} {label:20s} {rec.summary.fmt('ms'):34s} "
                      f"x{row['speedup_vs_baseline']:.2f}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small inputs, few repeats (smoke test)")
    p.add_argument("--models", nargs="+", default=None, help="models (default: all)")
    p.add_argument("--batches", type=int, nargs="+", default=None)
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    names = args.models or list(models.MODELS)
    unknown = [n for n in names if n not in models.MODELS]
    if unknown:
        p.error(f"unknown models {unknown}; valid: {', '.join(models.MODELS)}")
    repeats = 3 if args.quick else 7
    batches = args.batches or ([1, 2] if args.quick else [1, 8])
    print("executor overhead per node (chain of relu on (1, 16)):")
    overhead = node_overhead(100 if args.quick else 400, repeats)
    for r in overhead:
        print(f"  {r['settings']:45s} {r['plan_per_node_ns']:8.0f} ns/node, kernel alone "
              f"{r['kernel_alone_ns']:6.0f} ns -> overhead {r['overhead_ns']:6.0f} ns")
    print(f"models on {cores} CPUs (median [IQR], speed-up over sync/library/onednn):")
    figures = model_figures(names, batches, repeats, args.quick, cores)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": ppb.info(), "overhead": overhead, "models": figures}, fh,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
