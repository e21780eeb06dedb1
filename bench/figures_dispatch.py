"""The per-node dispatch cost, natively and in every installed framework, at
one thread and at all, over several rounds.

    python bench/figures_dispatch.py [--threads 1,2] [--rounds 5] [--nodes 400]
                                     [--base-python PATH] [--json out.json]

Each round runs :func:`pyparbench.frameworks.measure_dispatch` (chains of
``--nodes`` + 1 and of 1 tiny element-wise ops, ReLU and tanh in turn on
(1, 16), graph passes off, every runtime in its own process per thread
count; (t(long) - t(short)) / nodes) and, with ``--base-python``, the same
native measurement in another install (a build of another commit), rounds
interleaved so that drift on a shared machine hits every runtime alike.
Printed per runtime and thread count: the median over rounds of the
per-node cost, with the least and most round; natively also the chain's
kernels timed alone in C++ loops and the executor's own share; and the
fastest framework's cost over native's.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any


def _cell(values: list[float]) -> str:
    if not values:
        return f"{'error':>26s}"
    return (f"{statistics.median(values):9.4f} [{min(values):.4f}, {max(values):.4f}]"
            .rjust(26))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default=None, help="thread counts (default: 1 and all CPUs)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=200, help="timed runs of each chain")
    ap.add_argument("--base-python", help="also time native in this install's interpreter")
    ap.add_argument("--json", help="also write every round here")
    a = ap.parse_args()

    from pyparbench.frameworks import Job, dispatch_graph, graph_to_spec, run_child
    from pyparbench.frameworks.overhead import dispatch_cost, measure_dispatch
    from pyparbench.settings import Settings
    from pyparbench.harness.suite import installed_frameworks

    have = installed_frameworks()
    threads = [int(t) for t in a.threads.split(",")] if a.threads else None
    rounds: list[dict[str, Any]] = []
    per: dict[tuple[str, int], list[float]] = {}
    for r in range(a.rounds):
        res = measure_dispatch(threads, frameworks=have, nodes=a.nodes, repeats=a.repeats)
        for t in res["threads"]:
            row = res["by_threads"][str(t)]
            runners = {"native": row["native"], **row["frameworks"]}
            if row["native"] and "kernel_alone_us" in row["native"]:
                runners["native: kernel alone"] = {
                    "us_per_node": row["native"]["kernel_alone_us"]}
                runners["native: executor"] = {"us_per_node": row["native"]["executor_us"]}
            if a.base_python:
                s = Settings(intra_op=t, graph_opt="none")
                long = graph_to_spec(dispatch_graph(a.nodes + 1))
                short = graph_to_spec(dispatch_graph(1))
                runners["native (base)"] = dispatch_cost(run_child(
                    "native", [Job(long, repeats=a.repeats, warmup=20),
                               Job(short, repeats=a.repeats, warmup=20)], s,
                    python=a.base_python), a.nodes)
                row["native (base)"] = runners["native (base)"]
            for name, v in runners.items():
                if v and "us_per_node" in v:
                    per.setdefault((name, t), []).append(float(v["us_per_node"]))
        rounds.append(res)
        print(f"round {r + 1}/{a.rounds} done", flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps(rounds, indent=1))
    counts = rounds[0]["threads"]
    names = list(dict.fromkeys(n for n, _ in per))
    print(f"us per node, median [min, max] of {a.rounds} rounds; chains of {a.nodes + 1} and "
          "1 tiny ops (ReLU and tanh in turn on (1, 16)), graph passes off")
    print(f"{'runtime':22s}" + "".join(f"{f'{t} thread(s)':>26s}" for t in counts))
    for name in names:
        print(f"{name:22s}" + "".join(_cell(per.get((name, t), [])) for t in counts))
    for t in counts:
        fws = [statistics.median(v) for (n, tt), v in per.items()
               if tt == t and "/" in n and v]
        nat = per.get(("native", t))
        if fws and nat:
            print(f"at {t} thread(s): the fastest framework / native = "
                  f"{min(fws) / statistics.median(nat):.1f}x")


if __name__ == "__main__":
    main()
