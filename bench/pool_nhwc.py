"""Channels-last pooling: oneDNN's kernel against pyparbench's own, side by side.

  python bench/pool_nhwc.py [--models googlenet inception-v3 resnet50]
                            [--batch 1] [--threads 2] [--rounds 15] [--json out.json]

Every distinct pool2d node of the models (as the graph's layout pass runs
them: channels-last), timed with ``impl="onednn"`` and ``impl="direct"`` in
interleaved rounds in one process (one library, one OpenMP runtime), with
what ``impl="auto"`` picks. The totals weigh each shape by how often the
models use it. This is the measurement behind "auto": oneDNN 2.6 runs
channels-last max pooling, and averages that leave the padding out, far
slower than their bytes need on AVX2 machines.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from pyparbench import ops
from pyparbench.models import build
from pyparbench.timing import Summary, summarize
from pyparbench.cli._common import positive_int

IMPLS = ("onednn", "direct")


def pool_shapes(names: list[str], batch: int) -> Counter[tuple[Any, ...]]:
    """(kind, NCHW input shape, kernel, stride, padding, ceil, include_pad) -> uses."""
    uses: Counter[tuple[Any, ...]] = Counter()
    for name in names:
        g = build(name, batch)
        for n in g.nodes:
            if n.op == "pool2d":
                a = n.attrs
                uses[(a["kind"], tuple(g.nodes[n.inputs[0]].shape), tuple(a["kernel"]),
                      tuple(a["stride"]), tuple(a["padding"]), bool(a["ceil_mode"]),
                      bool(a["count_include_pad"]))] += 1
    return uses


def measure(key: tuple[Any, ...], threads: int, rounds: int, calls: int) -> dict[str, Any]:
    kind, shape, k, s, p, ceil, incl = key
    rng = np.random.default_rng(0)
    x = rng.standard_normal((shape[0], shape[2], shape[3], shape[1])).astype(np.float32)
    pools = {impl: ops.Pool2d(kind, shape, k, stride=s, padding=p, ceil_mode=ceil,
                              count_include_pad=incl, threads=threads, nhwc=True, impl=impl)
             for impl in IMPLS}
    outs = {impl: pool.run(x) for impl, pool in pools.items()}
    np.testing.assert_allclose(outs["direct"], outs["onednn"], rtol=1e-5, atol=1e-6)
    ns: dict[str, list[float]] = {impl: [] for impl in IMPLS}
    for _ in range(rounds):  # interleaved, so drift on a shared machine hits both
        for impl, pool in pools.items():
            ns[impl].append(float(np.median(pool.timeit(x, outs[impl], repeats=calls,
                                                        warmup=2))))
    auto = ops.Pool2d(kind, shape, k, stride=s, padding=p, ceil_mode=ceil,
                      count_include_pad=incl, threads=threads, nhwc=True).impl
    return {"shape": key, "auto": auto, **{impl: summarize(v) for impl, v in ns.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["googlenet", "inception-v3", "resnet50"])
    ap.add_argument("--batch", type=positive_int("--batch"), default=1)
    ap.add_argument("--threads", type=positive_int("--threads"), default=2)
    ap.add_argument("--rounds", type=positive_int("--rounds"), default=15)
    ap.add_argument("--calls", type=positive_int("--calls"),
                    default=20, help="timed calls per round")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.calls < 1 or args.threads < 1 or args.batch < 1:
        ap.error("--batch, --threads, --rounds and --calls must be at least 1")

    uses = pool_shapes(args.models, args.batch)
    if not uses:
        ap.error(f"models {args.models} have no pool2d node")
    rows = [{**measure(key, args.threads, args.rounds, args.calls), "uses": n}
            for key, n in uses.items()]

    table = Table(title=f"channels-last pool2d, {args.threads} threads, batch {args.batch} "
                        f"(median us of {args.rounds} interleaved rounds)")
    for col in ("pool", "input NHWC", "uses", "onednn", "direct", "onednn / direct", "auto"):
        table.add_column(col, justify="left" if col in ("pool", "input NHWC") else "right")
    total = {impl: 0.0 for impl in IMPLS}
    for r in rows:
        kind, shape, k, s, p, ceil, incl = r["shape"]
        med = {impl: r[impl].median / 1e3 for impl in IMPLS}
        for impl in IMPLS:
            total[impl] += med[impl] * r["uses"]
        label = f"{kind} {k[0]}x{k[1]}/{s[0]}" + (" excl-pad" if kind == "avg" and not incl
                                                  else "")
        table.add_row(label, f"{shape[0]}x{shape[2]}x{shape[3]}x{shape[1]}", str(r["uses"]),
                      f"{med['onednn']:.1f}", f"{med['direct']:.1f}",
                      f"{med['onednn'] / med['direct']:.2f}x", r["auto"])
    auto_total = sum((r[r["auto"]].median / 1e3) * r["uses"] for r in rows)
    table.add_section()
    table.add_row("all", "", str(sum(uses.values())), f"{total['onednn']:.0f}",
                  f"{total['direct']:.0f}", f"{total['onednn'] / total['direct']:.2f}x",
                  f"{auto_total:.0f}")
    Console().print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "batch": args.batch, "models": args.models,
                       "rows": [{**{k: v for k, v in r.items() if k not in IMPLS},
                                 **{impl: vars(r[impl]) for impl in IMPLS}} for r in rows],
                       "total_us": total, "auto_total_us": auto_total}, f, indent=1,
                      default=list)
    return 0


if __name__ == "__main__":
    sys.exit(main())
