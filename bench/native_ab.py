"""The native executor of this install against another install's (a build
of another commit, or against another oneDNN), model by model, in lockstep.

    python bench/native_ab.py --base-python /path/to/other/venv/bin/python
                              [--models resnet50,...] [--batches 1,8] [--threads 2]
                              [--graph-opt full] [--steps 31] [--json out.json]

Both run in their own processes pinned to the same ``--threads`` CPUs
(compact) and take turns run by run
(:func:`pyparbench.frameworks.run_lockstep`), so a slow spell of a shared
machine falls on both; printed per model: the median of the paired ratios
base time / this install's time (above 1: this install is faster) with its
95 % interval, and in how many steps this install was faster.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

MODELS = ("resnet50", "googlenet", "mobilenet-v2", "inception-v3", "mlp-512", "dlrm-kaggle",
          "ncf", "wide-deep")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-python", required=True,
                    help="the interpreter of the install to compare with")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--graph-opt", default="full")
    ap.add_argument("--steps", type=int, default=31, help="paired runs per model")
    ap.add_argument("--json", help="also write every figure here")
    a = ap.parse_args()

    from pyparbench.frameworks import Contender, ModelRef, run_lockstep
    from pyparbench.settings import Settings

    s = Settings(intra_op=a.threads, affinity="compact", graph_opt=a.graph_opt)
    contenders = [Contender("native", settings=s, name="this"),
                  Contender("native", settings=s, name="base", python=a.base_python)]
    print(f"{s.label()}: base / this install, median of {a.steps} paired runs [95 % interval]")
    rows: list[dict[str, Any]] = []
    for name in a.models.split(","):
        for batch in (int(b) for b in a.batches.split(",")):
            res = run_lockstep(ModelRef(name, batch), contenders, steps=a.steps, timeout=1800.0)
            row: dict[str, Any] = {"model": name, "batch": batch, "threads": a.threads,
                                   "graph_opt": a.graph_opt}
            if res.errors or not res.steps:
                row["errors"] = res.errors
                print(f"{name:13s} {batch:2d}  failed: {res.errors}", flush=True)
            else:
                r = res.ratio("this", "base")
                row.update(r.as_dict())
                row["this_ms"] = statistics.median(res.ns["this"]) / 1e6
                row["base_ms"] = statistics.median(res.ns["base"]) / 1e6
                print(f"{name:13s} {batch:2d}  x{r.median:.3f} [{r.low:.3f}, {r.high:.3f}]  "
                      f"this faster in {r.a_faster}/{r.steps}  ({row['this_ms']:.3f} ms vs "
                      f"{row['base_ms']:.3f} ms)", flush=True)
            rows.append(row)
            if a.json:
                Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
