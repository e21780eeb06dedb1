"""What the micro-batch pass is worth at each cache budget: one model run
with the pass off and under several budgets, side by side in one process.

    python bench/microbatch_budget.py [--model mobilenet-v2] [--batch 8] [--threads 1]
                                      [--budgets-kib 0,team,6144] [--rounds 15]

``0`` turns the pass off, ``team`` is the budget the executor gives this
setting's team on this machine (pyparbench.executor.team_budget_bytes), any
other value a budget in KiB. Each variant is compiled once; the rounds run
every variant once each, in a rotated order, so that drift on a shared
machine hits them alike. Printed per budget: what the pass chose, the median
latency, and the median over rounds of (latency with the pass off / latency
under this budget) with its quartiles: above 1, the budget makes the model
faster than no micro-batching.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import numpy as np
from pyparbench.cli._common import positive_int

WITHOUT_MICROBATCH = "bn_fold+residual+activation+layout+blocked+subsample+im2col+memory"


def measure(model: str, batch: int, threads: int, budgets: list[str], rounds: int,
            repeats: int) -> list[dict[str, Any]]:
    from pyparbench import executor, models
    from pyparbench.executor import compile_graph
    from pyparbench.settings import Settings

    g = models.build(model, batch)
    on = Settings(intra_op=threads, affinity="compact")
    team = executor.team_budget_bytes(on)
    variants: list[dict[str, Any]] = []
    for b in budgets:
        nbytes = team if b == "team" else int(b) << 10
        s = on if nbytes else on.with_(graph_opt=WITHOUT_MICROBATCH)
        original = executor.team_budget_bytes
        executor.team_budget_bytes = lambda settings, topo=None, n=nbytes: n
        try:
            cg = compile_graph(g)
            cg.run(s, repeats=2, warmup=2)
        finally:
            executor.team_budget_bytes = original
        variants.append({"budget": b, "bytes": nbytes, "graph": cg, "settings": s,
                         "plan": cg.optimization(s).details.get("microbatch"), "ns": []})
    for r in range(rounds):
        for v in variants[r % len(variants):] + variants[:r % len(variants)]:
            v["ns"].append(v["graph"].run(v["settings"], repeats=repeats, warmup=1).summary.median)
    base = variants[0]["ns"]
    for v in variants:
        ratios = [a / b for a, b in zip(base, v["ns"], strict=True)]
        v["median_ms"] = statistics.median(v["ns"]) / 1e6
        v["ratio"] = statistics.median(ratios)
        v["quartiles"] = (float(np.quantile(ratios, 0.25)), float(np.quantile(ratios, 0.75)))
    return variants


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mobilenet-v2")
    ap.add_argument("--batch", type=positive_int("--batch"), default=8)
    ap.add_argument("--threads", type=positive_int("--threads"), default=1)
    ap.add_argument("--budgets-kib", default="0,team,6144",
                    help="0 (pass off, the baseline: first), team, or KiB, comma-separated")
    ap.add_argument("--rounds", type=positive_int("--rounds"), default=15)
    ap.add_argument("--repeats", type=positive_int("--repeats"), default=5)
    args = ap.parse_args()
    budgets = args.budgets_kib.split(",")
    if budgets[0] != "0":
        budgets.insert(0, "0")
    for b in budgets:
        if b != "team" and not b.isdigit():
            ap.error(f"--budgets-kib takes 0, team or KiB, got {b!r}")
    rows = measure(args.model, args.batch, args.threads, budgets, args.rounds, args.repeats)
    print(f"{args.model} b{args.batch}, {args.threads} thread(s), {args.rounds} rounds; "
          "pass off / this budget, median over rounds [quartiles]")
    for v in rows:
        plan = v["plan"]
        chose = (f"{plan['micro_batches']} micro-batches of {plan['rows']} over {plan['nodes']} "
                 "nodes" if plan else "not micro-batched")
        print(f"  {v['budget']:>6} ({v['bytes'] >> 10:>7} KiB): {v['median_ms']:8.3f} ms  "
              f"{v['ratio']:.3f}x [{v['quartiles'][0]:.3f}, {v['quartiles'][1]:.3f}]  {chose}")


if __name__ == "__main__":
    main()
