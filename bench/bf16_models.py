"""bf16 against fp32 on every built-in model: the speed-up and the output error, side by side.

  python bench/bf16_models.py [--models resnet50 mlp-512] [--threads 1 2] [--batch 1]
                              [--rounds 3] [--repeats 3] [--json out.json]

Each model is compiled once and run under ``Settings(intra_op=t)`` and
``Settings(intra_op=t, precision="bf16")`` in interleaved rounds in one
process (fp32, bf16, fp32, bf16, ...), at each thread count; the best round
of each is compared (on a shared machine the slower rounds hold other
processes' time slices). bf16 means bf16 weights and matrix-op activations,
fp32 accumulation, glue ops and outputs in fp32 (README, "A whole run at
bf16"). The error column is max |bf16 - fp32| / max(1, max |fp32|) over the
graph outputs, the figure tests/test_bf16_graphs.py bounds; the emulated
column counts the bf16 nodes whose oneDNN kernel emulates bf16. The
recommendation models run with their embedding tables cut to 100,000 rows
(the full tables take gigabytes; the heavy ops are the same).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from pyparbench import models
from pyparbench.executor import CompiledGraph, compile_graph
from pyparbench.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parent))  # precision_args, beside this file
from precision_args import model_bench_parser  # noqa: E402

# Embedding tables cut to fit a development machine's memory.
SMALLER_TABLES: dict[str, dict[str, Any]] = {
    "dlrm": {"rows": 100_000}, "dlrm-kaggle": {"max_rows": 100_000},
    "wide-deep": {"max_rows": 100_000}}


def output_error(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    return max(float(np.abs(got[k] - want[k]).max()) / max(1.0, float(np.abs(want[k]).max()))
               for k in want)


def best_ms(cg: CompiledGraph, settings: Settings, repeats: int) -> float:
    return min(cg.run(settings, repeats=repeats, warmup=1).ns) / 1e6


def measure(name: str, batch: int, threads: list[int], rounds: int, repeats: int
            ) -> list[dict[str, Any]]:
    cg = compile_graph(models.build(name, batch, **SMALLER_TABLES.get(name, {})))
    rows = []
    for t in threads:
        fp32, bf16 = Settings(intra_op=t), Settings(intra_op=t, precision="bf16")
        cg.run(fp32, repeats=1, warmup=0)
        want = cg.outputs()
        rec = cg.run(bf16, repeats=1, warmup=0)
        error = output_error(cg.outputs(), want)
        times: dict[str, list[float]] = {"fp32": [], "bf16": []}
        for _ in range(rounds):
            times["fp32"].append(best_ms(cg, fp32, repeats))
            times["bf16"].append(best_ms(cg, bf16, repeats))
        f, b = min(times["fp32"]), min(times["bf16"])
        p = rec.resolved["precision"]
        rows.append({"model": name, "batch": batch, "threads": t, "fp32_ms": f, "bf16_ms": b,
                     "speedup": f / b, "error": error, "bf16_nodes": p["bf16_nodes"],
                     "conversions": p["conversions"], "emulated": len(p["emulated_nodes"])})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = model_bench_parser(__doc__ or "", list(models.MODELS))
    args = ap.parse_args(argv)
    console = Console(width=max(Console().width, 110))
    table = Table(title=f"bf16 / fp32, whole models at batch {args.batch} (best round)",
                  title_style="bold")
    for col in ("model", "threads", "fp32 ms", "bf16 ms", "speed-up", "error", "bf16 nodes",
                "conversions", "emulated"):
        table.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    out = []
    for name in args.models:
        for r in measure(name, args.batch, args.threads, args.rounds, args.repeats):
            out.append(r)
            table.add_row(name, str(r["threads"]), f"{r['fp32_ms']:.3g}", f"{r['bf16_ms']:.3g}",
                          f"{r['speedup']:.2f}x", f"{r['error']:.1e}", str(r["bf16_nodes"]),
                          str(r["conversions"]), str(r["emulated"]))
    console.print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
