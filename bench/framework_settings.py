"""Does pyparbench's recommendation help the framework the user runs?

    python bench/framework_settings.py [--models resnet50,...] [--batches 1,8]
                                       [--frameworks onnxruntime,torch,tensorflow]
                                       [--steps 15] [--analytic] [--json out.json]

For each model, batch and installed framework, the framework's latency
under (a) its own defaults (no knob set, every CPU), (b) Intel's preset, (c)
the study's tuner, (d) pyparbench's recommendation translated into the
framework's knobs, and (e) the answer of ``recommend --framework`` (the
recommender's best candidates measured in the framework, the fastest
taken as the recommender's verification takes it): each in its own fresh
pinned process, all taking turns run by run
(:func:`pyparbench.recommender.check_in_framework`, with the tuner as one
more reference), so a slow spell of a shared machine falls on all alike.
Printed per row: each one's median and (e)'s gain over (a), (b), (c) as
the median of the paired ratios (above 1: (e) faster) with its 95 %
interval; then per framework the geomean gain of (e) over (a) and (b).
``--analytic`` recommends with the analytic cost model (no calibration:
the smoke run).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

MODELS = ("resnet50", "googlenet", "mlp-512", "dlrm-kaggle", "transformer")
FRAMEWORKS = ("onnxruntime", "torch", "tensorflow")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--steps", type=int, default=15, help="paired runs per row")
    ap.add_argument("--analytic", action="store_true",
                    help="recommend with the analytic cost model (no calibration)")
    ap.add_argument("--json", help="also write every figure here")
    a = ap.parse_args()

    from pyparbench.recommender.framework_check import check_in_framework, check_installed
    from pyparbench.models import build
    from pyparbench.recommender import recommend
    from pyparbench.settings import preset

    frameworks = []
    for fw in a.frameworks.split(","):
        try:
            check_installed(fw)
            frameworks.append(fw)
        except ValueError as e:
            print(f"left out: {e}")
    refs = ("defaults", "intel", "tftuner", "recommended")
    print(f"{'model':12s} {'b':>2s} {'framework':11s}"
          + "".join(f" {r:>11s}" for r in refs) + "  answer  gain over defaults / intel / "
          "tftuner [95 %]")
    rows: list[dict[str, Any]] = []
    for name in a.models.split(","):
        for batch in (int(b) for b in a.batches.split(",")):
            graph = build(name, batch)
            rec = recommend(graph, calibrate=not a.analytic)
            tuner = preset("tftuner", None, graph)
            for fw in frameworks:
                try:
                    chk = check_in_framework(
                        rec, name, fw, steps=a.steps, timeout=1800.0,
                        references={"tftuner": tuner} if tuner.instances == 1 else {})
                except ValueError as e:
                    print(f"{name:12s} {batch:2d} {fw:11s} failed: {e}", flush=True)
                    rows.append({"model": name, "batch": batch, "framework": fw,
                                 "error": str(e)})
                    continue
                by = {m.label: m for m in chk.measured}
                cells = "".join(f" {by[r].median_ns / 1e6:9.3f}ms" if r in by else f" {'-':>11s}"
                                for r in refs)
                gains = {r: (by[r].vs_fastest, by[r].low, by[r].high)
                         for r in ("defaults", "intel", "tftuner") if r in by}
                text = " / ".join(f"x{g[0]:.3f} [{g[1]:.3f}, {g[2]:.3f}]"
                                  for g in gains.values())
                print(f"{name:12s} {batch:2d} {fw:11s}{cells}  {chk.fastest:7s} {text}",
                      flush=True)
                rows.append({"model": name, "batch": batch, "framework": fw,
                             "answer": chk.fastest, "check": chk.as_dict(),
                             "gain": {k: list(v) for k, v in gains.items()}})
    for fw in frameworks:
        for ref in ("defaults", "intel"):
            got = [r["gain"][ref][0] for r in rows
                   if r["framework"] == fw and ref in r.get("gain", {})]
            if got:
                gm = math.exp(sum(math.log(x) for x in got) / len(got))
                print(f"{fw}: geomean gain of the answer over {ref}: x{gm:.3f} "
                      f"over {len(got)} rows")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
