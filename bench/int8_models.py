"""int8 against fp32 on the built-in models, and DLRM's 8-bit bags against PyTorch's.

  python bench/int8_models.py [--models dlrm-kaggle mlp-512] [--threads 1 2] [--batch 1]
                              [--rounds 3] [--repeats 3] [--json out.json]

Each model's fp32 graph and its int8 graph (``executor.int8_model``: conv2d
and linear int8 on grids calibrated on generated data, embedding bags over
8-bit rowwise tables; README, "A whole run at int8") are compiled once and
run in interleaved rounds in one process (fp32, int8, fp32, int8, ...), at
each thread count; the best round of each is compared. The error column is
max |int8 - fp32| / max |fp32| over the graph outputs: the quantisation's,
on random weights (speed figures, not accuracy ones). For a model with
embedding bags a second table times its bags alone on the graph's own
tables and indices: the float table, the 8-bit table through pyparbench's
kernel, and PyTorch's ``torch.ops.quantized.embedding_bag_byte_rowwise_offsets``
on the same bytes (interleaved too, at PyTorch's thread count set alike).
The recommendation models run with their tables cut to 100,000 rows.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from pyparbench import models, ops
from pyparbench.executor import CompiledGraph, compile_graph, int8_model
from pyparbench.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parent))  # precision_args, beside this file
from precision_args import model_bench_parser  # noqa: E402

# Embedding tables cut to fit a development machine's memory.
SMALLER_TABLES: dict[str, dict[str, Any]] = {
    "dlrm": {"rows": 100_000}, "dlrm-kaggle": {"max_rows": 100_000},
    "wide-deep": {"max_rows": 100_000}}


def output_error(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    return max(float(np.abs(got[k] - want[k]).max()) / max(1e-30, float(np.abs(want[k]).max()))
               for k in want)


def best_ms(cg: CompiledGraph, settings: Settings, repeats: int) -> float:
    return min(cg.run(settings, repeats=repeats, warmup=1).ns) / 1e6


def measure(name: str, batch: int, threads: list[int], rounds: int, repeats: int
            ) -> list[dict[str, Any]]:
    kw = SMALLER_TABLES.get(name, {})
    fp32_graph = compile_graph(models.build(name, batch, **kw))
    int8_graph = compile_graph(int8_model(name, batch, **kw))
    inputs = fp32_graph.graph.random_inputs(seed=1)
    fp32_graph.set_inputs(inputs)
    int8_graph.set_inputs(inputs)
    rows = []
    for t in threads:
        fp32, int8 = Settings(intra_op=t), Settings(intra_op=t, precision="int8")
        fp32_graph.run(fp32, repeats=1, warmup=0)
        rec = int8_graph.run(int8, repeats=1, warmup=0)
        error = output_error(int8_graph.outputs(), fp32_graph.outputs())
        times: dict[str, list[float]] = {"fp32": [], "int8": []}
        for _ in range(rounds):
            times["fp32"].append(best_ms(fp32_graph, fp32, repeats))
            times["int8"].append(best_ms(int8_graph, int8, repeats))
        f, q = min(times["fp32"]), min(times["int8"])
        p = rec.resolved["precision"]
        rows.append({"model": name, "batch": batch, "threads": t, "fp32_ms": f, "int8_ms": q,
                     "speedup": f / q, "error": error, "int8_nodes": p["int8_nodes"],
                     "byte_tables": p["byte_rowwise_tables"]})
    return rows


def _best_us(run: Callable[[], Any], calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        run()
        best = min(best, (time.perf_counter_ns() - t0) / 1e3)
    return best


def measure_bags(name: str, batch: int, threads: list[int], rounds: int, calls: int
                 ) -> list[dict[str, Any]]:
    """Every embedding bag of ``name``'s int8 graph alone: its float table,
    its 8-bit table, and PyTorch's 8-bit bag on the same bytes, summed."""
    torch = __import__("torch")
    kw = SMALLER_TABLES.get(name, {})
    graph = int8_model(name, batch, **kw)
    float_graph = models.build(name, batch, **kw)
    bags = [n for n in graph.nodes if n.op == "embedding_bag"]
    if not bags:
        return []
    # Each bag's indices as the graph reads them (one run keeping every value).
    cg = compile_graph(graph)
    cg.set_inputs(graph.random_inputs(seed=1))
    cg.run(Settings(graph_opt="none", precision="int8"), repeats=1, warmup=0)
    rows = []
    for t in threads:
        torch.set_num_threads(t)
        totals = {"fp32": 0.0, "byte": 0.0, "torch": 0.0}
        for n in bags:
            packed = np.array(n.params["table"]).view(np.uint8)
            table = np.asarray(float_graph[n.name].params["table"])
            idx = np.ascontiguousarray(cg.output(n.inputs[0])).reshape(-1)
            bag = n.shape[0]
            off = np.arange(bag, dtype=np.int64) * (idx.size // bag)
            e = ops.EmbeddingBag(table.shape[0], table.shape[1], threads=t)
            tp, ti, to = torch.from_numpy(packed), torch.from_numpy(idx), torch.from_numpy(off)
            runs = {
                "fp32": lambda: e.run(table, idx, off),
                "byte": lambda: e.run(packed, idx, off),
                "torch": lambda: torch.ops.quantized.embedding_bag_byte_rowwise_offsets(
                    tp, ti, to, False, 0, False, None, None, False)}
            best = {k: float("inf") for k in runs}
            for _ in range(rounds):
                for k, run in runs.items():
                    best[k] = min(best[k], _best_us(run, calls))
            for k in totals:
                totals[k] += best[k]
        rows.append({"model": name, "threads": t, "bags": len(bags), "fp32_us": totals["fp32"],
                     "byte_us": totals["byte"], "torch_us": totals["torch"],
                     "fp32_over_byte": totals["fp32"] / totals["byte"],
                     "torch_over_byte": totals["torch"] / totals["byte"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = model_bench_parser(__doc__ or "", ["dlrm-kaggle", "dlrm", "mlp-512", "transformer", "resnet50"])
    args = ap.parse_args(argv)
    console = Console(width=max(Console().width, 110))
    table = Table(title=f"int8 / fp32, whole models at batch {args.batch} (best round)",
                  title_style="bold")
    for col in ("model", "threads", "fp32 ms", "int8 ms", "speed-up", "error", "int8 nodes",
                "8-bit tables"):
        table.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    bag_table = Table(title="the models' embedding bags alone, summed (best round)",
                      title_style="bold")
    for col in ("model", "threads", "bags", "fp32 us", "8-bit us", "torch 8-bit us",
                "fp32 / 8-bit", "torch / ours"):
        bag_table.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    out: dict[str, list[dict[str, Any]]] = {"models": [], "bags": []}
    for name in args.models:
        for r in measure(name, args.batch, args.threads, args.rounds, args.repeats):
            out["models"].append(r)
            table.add_row(name, str(r["threads"]), f"{r['fp32_ms']:.3g}", f"{r['int8_ms']:.3g}",
                          f"{r['speedup']:.2f}x", f"{r['error']:.1e}", str(r["int8_nodes"]),
                          str(r["byte_tables"]))
        for r in measure_bags(name, args.batch, args.threads, args.rounds, args.repeats * 10):
            out["bags"].append(r)
            bag_table.add_row(name, str(r["threads"]), str(r["bags"]), f"{r['fp32_us']:.1f}",
                              f"{r['byte_us']:.1f}", f"{r['torch_us']:.1f}",
                              f"{r['fp32_over_byte']:.2f}x", f"{r['torch_over_byte']:.2f}x")
    console.print(table)
    if out["bags"]:
        console.print(bag_table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
