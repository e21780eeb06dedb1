"""Framework overhead figures: each model natively and in every framework.

  python bench/figures_frameworks.py [--models resnet50 ...] [--batches 1 8] [--intra-op 2]
                                    [--torch-modes eager script compile] [--json out.json]

For each model and batch, :func:`pyparbench.frameworks.measure_overhead`
under one worker of ``--intra-op`` threads pinned compact: each
framework's latency over the native executor's (median of its timed runs),
the share of the framework's time outside its kernels (its own profiler),
the isolated kernels' sum against the native latency, and once, the
per-node dispatch cost at one thread and at all (chains of 401 and 1 tiny
ops, :func:`pyparbench.frameworks.measure_dispatch`). The machine's load
average is printed beside each model: other work on the machine skews
every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from pyparbench.frameworks import measure_overhead
from pyparbench.settings import Settings

MODELS = ["resnet50", "inception-v3", "mobilenet-v2", "mlp-512", "transformer", "dlrm-kaggle"]


def _row(res: dict[str, Any]) -> str:
    nat = res["native"]
    cells = [f"{res['model']:13s} b{res['batch']:<2d}"]
    if nat["status"] != "ok":
        return cells[0] + " native failed: " + nat["error"]
    med = nat["latency"]["median"]
    cells.append(f"native {med / 1e6:8.2f} ms (kernels {nat['kernel_sum_ns'] / med:4.2f}x)")
    for f in res["frameworks"]:
        name = f"{f['framework']}/{f['mode']}"
        if f["status"] != "ok":
            cells.append(f"{name} error")
            continue
        share = f.get("outside_share")
        fastest = f["latency"]["min"] / nat["latency"]["min"]
        cells.append(f"{name} {f['overhead_ratio']:5.2f}x/{fastest:4.2f}x"
                     + (f" ({share:4.0%} outside)" if share is not None else ""))
    load = res["load_average"]["before"][0]
    return "  ".join(cells) + f"  [load {load:.1f}]"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=MODELS)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--intra-op", type=int, default=min(2, len(os.sched_getaffinity(0))))
    p.add_argument("--torch-modes", nargs="+", default=["eager", "script", "compile"])
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--json", help="also write every result to this file")
    args = p.parse_args(argv)
    settings = Settings(intra_op=args.intra_op, affinity="compact")
    modes = {"torch": args.torch_modes}
    results = []
    print(f"{settings.label()}: framework latency / native latency, medians / fastest runs "
          "(share of the framework's time outside its kernels)", flush=True)
    for i, name in enumerate(args.models):
        for batch in args.batches:
            first = not results
            res = measure_overhead(name, batch, settings, modes=modes, repeats=args.repeats,
                                   dispatch=first, timeout=1800.0)
            results.append(res)
            print(_row(res), flush=True)
            if first:
                d = res["dispatch"]
                for t, row in d["by_threads"].items():
                    runners = {"native": row["native"], **row["frameworks"]}
                    line = [f"{k} {v['us_per_node']:.3f}" if v and "us_per_node" in v
                            else f"{k} error" for k, v in runners.items()]
                    print(f"dispatch at {t} thread(s), us per node (chains of "
                          f"{d['nodes'] + 1} and 1 tiny ops): " + ", ".join(line), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
