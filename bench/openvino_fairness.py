"""Is pyparbench's OpenVINO run as fast as OpenVINO's own benchmark_app?

  python bench/openvino_fairness.py [--models mlp-512 resnet50 ...] [--files a.onnx ...]
      [--batch 1] [--threads 1 2] [--rounds 5] [--repeats 50] [--json out.json]

Each model is one ONNX file: a built-in model written as pyparbench writes
it for ONNX Runtime and OpenVINO, or a user's file (``--files``, e.g. those
bench/onnx_models.py exports). pyparbench runs it in OpenVINO
(:func:`pyparbench.frameworks.run_framework`, a fresh process pinned to
``T`` CPUs, compact) and ``benchmark_app -m FILE -hint none -nstreams 1
-nthreads T -pin YES -infer_precision f32 -niter N -shape ...`` runs the same
file under ``taskset`` on the same CPUs. The two alternate, round by round,
so that a slow spell of a shared machine falls on both; each round's ratio
is ours / benchmark_app's median latency, and the row gives the median of
the rounds' ratios with their range (below 1: ours is faster). The target
is within +-3 %.

benchmark_app times its requests in C++ (its Python front end starts them
asynchronously, one request for one stream); pyparbench times each
``InferRequest.infer()`` from Python, as a user's serving loop calls it: a
few microseconds per call that the smallest models show.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pyparbench.frameworks import ModelRef, run_framework
from pyparbench.frameworks.onnxruntime.translate import build_onnx
from pyparbench.frameworks.onnxruntime.versions import model_versions
from pyparbench.frameworks.spec import build_graph
from pyparbench.harness.levels import DEFAULT_MODELS
from pyparbench.models import resolve
from pyparbench.settings import Settings

_MEDIAN = re.compile(r"Median:\s+([0-9.]+)\s*(ms|us)")


def write_model(name: str, batch: int, out: Path) -> Path:
    """A built-in model as the ONNX file pyparbench's OpenVINO run reads."""
    import onnx

    graph = build_graph(ModelRef(name, batch).to_spec())
    target = out / name
    target.mkdir(parents=True, exist_ok=True)
    built = build_onnx(graph, str(target), model_versions())
    if isinstance(built, str):
        return Path(built)
    path = target / "model.onnx"
    onnx.save(built, str(path))
    return path


def benchmark_app(path: Path, shapes: dict[str, Any], threads: int, cpus: list[int],
                  repeats: int) -> float:
    """benchmark_app's median latency (ns) of ``path`` on ``cpus``."""
    shape = ",".join(f"{n}[{','.join(map(str, s))}]" for n, s in shapes.items())
    exe = Path(sys.executable).with_name("benchmark_app")
    cmd = ["taskset", "-c", ",".join(map(str, cpus)), str(exe), "-m", str(path), "-d", "CPU",
           "-hint", "none", "-nstreams", "1", "-nthreads", str(threads), "-pin", "YES",
           "-infer_precision", "f32", "-niter", str(repeats), "-shape", shape]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    found = _MEDIAN.search(run.stdout)
    if run.returncode != 0 or found is None:
        raise RuntimeError(f"benchmark_app failed on {path}: {run.stdout[-800:]}{run.stderr[-800:]}")
    return float(found.group(1)) * (1e6 if found.group(2) == "ms" else 1e3)


def compare(path: Path, batch: int, threads: int, rounds: int, repeats: int,
            model: str | None = None) -> dict[str, Any]:
    """Ours / benchmark_app's on ``path``; ``model``: the built-in model the
    file was written from (pyparbench's child writes the same bytes again),
    None for a user's file (the child reads it)."""
    from pyparbench.child_process import child_cpus
    from pyparbench.graph import from_onnx

    key = model if model is not None else resolve(str(path))
    settings = Settings(intra_op=threads, affinity="compact")
    cpus = child_cpus(settings) or list(range(threads))
    if model is not None:
        graph = build_graph(ModelRef(model, batch).to_spec())
        shapes = {graph.nodes[i].name: list(graph.nodes[i].shape) for i in graph.inputs}
    else:
        shapes = from_onnx(path, batch=batch).meta["onnx_input_shapes"]
    ours, theirs, ratios = [], [], []
    for _ in range(rounds):
        res = run_framework(ModelRef(key, batch), "openvino", settings, repeats=repeats,
                            warmup=5)
        if not res.ok or not res.job.ok:
            raise RuntimeError(res.first_error())
        a = float(res.job.latency["median"])
        b = benchmark_app(path, shapes, threads, cpus, repeats)
        ours.append(a)
        theirs.append(b)
        ratios.append(a / b)
    return {"model": model or path.name,
            "batch": batch, "threads": threads, "ours_ms": statistics.median(ours) / 1e6,
            "benchmark_app_ms": statistics.median(theirs) / 1e6,
            "ratio": statistics.median(ratios), "low": min(ratios), "high": max(ratios)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=list(DEFAULT_MODELS))
    ap.add_argument("--files", nargs="*", default=[], help="ONNX files (their batch: --batch)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ppb-ov-fair-") as tmp:
        paths: list[tuple[Path, str | None]] = [
            (write_model(m, args.batch, Path(tmp)), m) for m in args.models]
        paths += [(Path(f).resolve(), None) for f in args.files]
        for path, model in paths:
            for t in args.threads:
                row = compare(path, args.batch, t, args.rounds, args.repeats, model)
                rows.append(row)
                within = "within" if abs(row["ratio"] - 1) <= 0.03 else "OUTSIDE"
                print(f"{row['model']:>22} b{row['batch']} t{t}: ours {row['ours_ms']:.4f} ms, "
                      f"benchmark_app {row['benchmark_app_ms']:.4f} ms, ours/theirs "
                      f"x{row['ratio']:.3f} [{row['low']:.3f}, {row['high']:.3f}] "
                      f"({within} +-3 %)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
