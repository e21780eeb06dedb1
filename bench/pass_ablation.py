"""What each graph pass is worth: the full pipeline against the pipeline
less one pass, per model, side by side in one process.

    python bench/pass_ablation.py [--models resnet50,mobilenet-v2] [--batches 1,8]
                                  [--threads 2] [--rounds 7] [--json out.json]

For each model and batch the native executor runs (sync, one worker of
``--threads`` threads pinned compact) the graph under ``full``, under
``full`` less each pass in turn (``graph_opt`` joined by '+'), and with no
pass; the plans are compiled once and run in interleaved rounds (each round
runs every variant once, a few repeats, in a rotated order), so drift on a
shared machine hits every variant alike. Printed per pass: the median over
rounds of (latency without the pass / latency with the full pipeline), its
range, and the activation memory each plan allocates. Above 1: the pass
makes the model faster. Outputs of every variant are checked equal to the
full pipeline's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np
from pyparbench.cli._common import positive_int

MODELS = ("resnet50", "inception-v3", "mobilenet-v2", "googlenet", "transformer", "dlrm-kaggle")


def variants() -> dict[str, str]:
    """label -> graph_opt: the full pipeline, it less each pass, none."""
    from pyparbench.graph.passes import PASSES

    out = {"full": "full"}
    for p in PASSES:
        out[f"-{p}"] = "+".join(q for q in PASSES if q != p)
    out["none"] = "none"
    return out


def ablate(name: str, batch: int, threads: int, rounds: int, repeats: int) -> dict[str, Any]:
    from pyparbench import models
    from pyparbench.executor import compile_graph
    from pyparbench.settings import Settings

    cg = compile_graph(models.build(name, batch))
    settings = {k: Settings(intra_op=threads, affinity="compact", graph_opt=v)
                for k, v in variants().items()}
    memory: dict[str, int] = {}
    outputs: dict[str, dict[str, np.ndarray]] = {}
    for k, s in settings.items():  # compile, warm up, keep the outputs
        rec = cg.run(s, repeats=1, warmup=1)
        memory[k] = int(rec.resolved["graph_opt"]["buffer_bytes"])
        outputs[k] = cg.outputs()
    for k, out in outputs.items():
        for o, v in out.items():
            ref = outputs["full"][o]
            err = float(np.abs(v - ref).max()) / max(1.0, float(np.abs(ref).max()))
            if err > 1e-3:
                raise SystemExit(f"{name} b{batch}: {k} differs from full at {o} ({err:.1e})")
    samples: dict[str, list[float]] = {k: [] for k in settings}
    keys = list(settings)
    for r in range(rounds):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            samples[k].append(statistics.median(cg.run(settings[k], repeats=repeats,
                                                       warmup=1).ns))
    full = np.array(samples["full"])
    rows = {}
    for k, v in samples.items():
        ratio = np.array(v) / full
        rows[k] = {"ms": statistics.median(v) / 1e6, "ratio": float(np.median(ratio)),
                   "ratio_min": float(ratio.min()), "ratio_max": float(ratio.max()),
                   "buffer_mb": memory[k] / 2**20}
    return {"model": name, "batch": batch, "threads": threads, "rounds": rounds, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", type=positive_int("--threads"), default=2)
    ap.add_argument("--rounds", type=positive_int("--rounds"), default=7)
    ap.add_argument("--repeats", type=positive_int("--repeats"),
                    default=3, help="runs per variant and round")
    ap.add_argument("--json", help="also write every figure here")
    a = ap.parse_args()
    out = []
    print("latency without the pass / with the full pipeline (median over rounds, "
          "[min..max]); above 1: the pass makes the model faster")
    for name in a.models.split(","):
        for batch in (int(b) for b in a.batches.split(",")):
            res = ablate(name, batch, a.threads, a.rounds, a.repeats)
            full = res["rows"]["full"]
            print(f"{name} b{batch}: full {full['ms']:.3f} ms, "
                  f"buffers {full['buffer_mb']:.1f} MiB")
            for k, r in res["rows"].items():
                if k != "full":
                    print(f"   {k:12s} {r['ms']:10.3f} ms  {r['ratio']:5.2f}x "
                          f"[{r['ratio_min']:.2f}..{r['ratio_max']:.2f}]  "
                          f"buffers {r['buffer_mb']:8.1f} MiB", flush=True)
            out.append(res)
            if a.json:
                Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
