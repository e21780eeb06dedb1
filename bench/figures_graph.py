"""Executor figures, measured side by side in one run.

  python bench/figures_graph.py [--quick] [--models resnet50 googlenet ...] [--json out.json]

1. Executor overhead per node: chains of N + 1 and of 1 tiny ops (ReLU and
   tanh in turn on (1, 16), graph passes off), the difference per node,
   minus the plan's own kernels of the chain timed alone in C++ loops
   (target: at most 10 ns per node in sync mode), for the sync and async
   schedulers and at every thread.
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

import pyparbench as ppb
from pyparbench import models
from pyparbench.executor import compile_graph
from pyparbench.settings import Settings
from pyparbench.cli._common import positive_int


def node_overhead(nodes: int, repeats: int, cores: int) -> list[dict[str, Any]]:
    """Per node of a chain of tiny ops: the plan's time, its kernel alone, and
    what is left, the executor's own cost."""
    from pyparbench.frameworks import dispatch_graph

    long, short = compile_graph(dispatch_graph(nodes + 1)), compile_graph(dispatch_graph(1))
    rows = []
    for s in (Settings(graph_opt="none"), Settings(intra_op=cores, graph_opt="none"),
              Settings(scheduler="async", inter_op=1, graph_opt="none"),
              Settings(scheduler="async", inter_op=2, graph_opt="none")):
        runs = max(repeats, 50)
        per_node = (long.run(s, repeats=runs, warmup=10).summary.median
                    - short.run(s, repeats=runs, warmup=10).summary.median) / nodes
        inline = [t for t in long.time_nodes(s, repeats=10, inner=1000) if t > 0]
        alone = sum(inline) / len(inline)
        rows.append({"settings": s.label(), "plan_per_node_ns": per_node,
                     "kernel_alone_ns": alone, "overhead_ns": per_node - alone})
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
    p.add_argument("--batches", type=positive_int("--batches"), nargs="+", default=None)
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    names = args.models or list(models.MODELS)
    unknown = [n for n in names if n not in models.MODELS]
    if unknown:
        p.error(f"unknown models {unknown}; valid: {', '.join(models.MODELS)}")
    repeats = 3 if args.quick else 7
    batches = args.batches or ([1, 2] if args.quick else [1, 8])
    print("executor overhead per node (chains of ReLU and tanh in turn on (1, 16)):")
    overhead = node_overhead(100 if args.quick else 400, repeats, cores)
    for r in overhead:
        print(f"  {r['settings']:45s} {r['plan_per_node_ns']:8.1f} ns/node, kernel alone "
              f"{r['kernel_alone_ns']:6.1f} ns -> overhead {r['overhead_ns']:6.1f} ns")
    print(f"models on {cores} CPUs (median [IQR], speed-up over sync/library/onednn):")
    figures = model_figures(names, batches, repeats, args.quick, cores)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": ppb.info(), "overhead": overhead, "models": figures}, fh,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
