"""Real architectures pyparbench does not build itself, exported to ONNX and
imported: does every one map, match ONNX Runtime, and run as fast?

    python bench/onnx_models.py [--models resnet18,...] [--threads 1,2] [--steps 21]
                                [--frameworks onnxruntime,openvino] [--batch 1]
                                [--out DIR] [--json out.json] [--strict]

Each model is torchvision's architecture with random weights (no download),
exported with ``torch.onnx.export(..., dynamo=True)`` at ``--batch``, then,
per model: the nodes in the file, in the imported graph and after the graph
passes; the import's output error against ONNX Runtime on the same file and
random inputs (max |native - ORT| / max |ORT|); and the latency of the
native executor and of each of ``--frameworks`` running the file itself
(ONNX Runtime; OpenVINO at f32, its precision set explicitly, where
installed), at each ``--threads`` count, each in its own pinned process, in
lockstep (:func:`pyparbench.frameworks.run_lockstep`: runs taking turns, so
a slow spell of a shared machine falls on all), as framework / native
(above 1: native is faster) with its 95 % interval. Then the geomean ratio
per framework and thread count, and the op types of the files that do not
import.

Needs torch and torchvision (a bench-only dependency: ``pip install --no-deps
torchvision``; a torchvision wheel built against another torch release than
the one installed cannot load its C operators, nms and roi_align, and fails
at import in their registrations, which the classification models never
use: this script skips that registration module).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

MODELS = ("resnet18", "resnet50", "mobilenet_v3_small", "mobilenet_v3_large",
          "efficientnet_b0", "regnet_y_400mf", "shufflenet_v2_x1_0", "squeezenet1_1",
          "densenet121", "mnasnet1_0", "googlenet", "convnext_tiny", "vit_b_16", "swin_t")


def _torchvision_models() -> Any:
    # The C operators' meta registrations fail with a torchvision built
    # against another torch; the models never call those operators.
    sys.modules.setdefault("torchvision._meta_registrations",
                           types.ModuleType("torchvision._meta_registrations"))
    from torchvision import models

    return models


def export(name: str, batch: int, out: Path) -> Path:
    import torch

    path = out / f"{name}.onnx"
    if path.is_file():
        return path
    model = getattr(_torchvision_models(), name)().eval()
    x = torch.randn(batch, 3, 224, 224)
    with torch.no_grad():
        # Parameters initialised to zero (ViT's head, a block's last norm
        # where zero_init_residual) would make outputs that compare nothing.
        for p in model.parameters():
            if not p.any():
                p.normal_(0.0, 0.02)
        torch.onnx.export(model, (x,), str(path), dynamo=True, external_data=False)
    return path


def output_error(path: Path, batch: int) -> tuple[int, int, int, float]:
    """(nodes in the file, imported, after the passes, max |native - ORT| / max |ORT|)."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    from pyparbench.executor import compile_graph
    from pyparbench.graph import from_onnx
    from pyparbench.graph.passes import executed_graph
    from pyparbench.settings import Settings

    in_file = len(onnx.load(str(path), load_external_data=False).graph.node)
    graph = from_onnx(path, batch=batch)
    after = len(executed_graph(graph, Settings()).nodes)
    ins = graph.random_inputs(1)
    shapes = graph.meta["onnx_input_shapes"]
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    want = sess.run(None, {k: v.reshape(shapes[k]) for k, v in ins.items()})
    cg = compile_graph(graph)
    cg.set_inputs(ins)
    cg.run(repeats=1, warmup=0)
    got = cg.outputs()
    if not any(np.abs(w).max() > 0 for w in want):
        raise ValueError("ONNX Runtime's outputs are all zero: nothing to compare")
    err = max(float(np.abs(got[n].astype(np.float64) - w).max())
              / max(float(np.abs(w).max()), 1e-30) for n, w in zip(names, want, strict=True))
    return in_file, len(graph.nodes), after, err


# How the columns name each runtime beside the native executor.
SHORT = {"onnxruntime": "ORT", "openvino": "OV"}


def _installed(frameworks: tuple[str, ...]) -> list[str]:
    return [f for f in frameworks if importlib.util.find_spec(f) is not None]


def _median(ns: list[float]) -> float:
    return sorted(ns)[len(ns) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default=f"1,{len(os.sched_getaffinity(0))}")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=21, help="paired runs per model and count")
    ap.add_argument("--frameworks", default=",".join(_installed(("onnxruntime", "openvino"))),
                    help="the runtimes that run each file beside the native executor")
    ap.add_argument("--out", default="onnx-models", help="where the exported files go")
    ap.add_argument("--json", help="also write every figure here")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when a model does not export, import or run")
    a = ap.parse_args()

    from pyparbench.frameworks import Contender, ModelRef, run_lockstep
    from pyparbench.models import resolve
    from pyparbench.settings import Settings

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    threads = sorted({int(t) for t in a.threads.split(",")})
    frameworks = [f for f in a.frameworks.split(",") if f]
    if not frameworks or set(frameworks) - set(SHORT):
        ap.error(f"--frameworks: one or more of {', '.join(SHORT)}, got {a.frameworks!r}")
    head = "".join(f"  {f'{SHORT[f]}/native t{t} [95 %]':<30s}" for t in threads
                   for f in frameworks)
    print(f"{'model':20s} {'file':>5s} {'graph':>5s} {'run':>5s} {'error':>8s}{head}")
    rows: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    for name in a.models.split(","):
        row: dict[str, Any] = {"model": name, "batch": a.batch}
        t0 = time.perf_counter()
        try:
            path = export(name, a.batch, out)
        except Exception as e:  # an exporter's failure is the model's row, not the run's
            refused[name] = f"export failed: {str(e).splitlines()[0][:200]}"
            print(f"{name:20s} {refused[name]}", flush=True)
            continue
        row["export_s"] = time.perf_counter() - t0
        try:
            key = resolve(str(path))
            nodes, imported, after, err = output_error(path, a.batch)
        except ValueError as e:
            refused[name] = str(e)
            print(f"{name:20s} refused: {str(e)[:300]}", flush=True)
            continue
        row.update(nodes_in_file=nodes, nodes_imported=imported, nodes_after_passes=after,
                   error=err)
        cells = ""
        for t in threads:
            s = Settings(intra_op=t, affinity="compact")
            res = run_lockstep(ModelRef(key, a.batch),
                               [Contender("native", settings=s),
                                *[Contender(f, settings=s) for f in frameworks]],
                               steps=a.steps, timeout=1800.0)
            if res.errors or not res.steps:
                refused.setdefault(name, f"failed at {t} thread(s): {res.errors}")
                for f in frameworks:
                    row[f"{f}_t{t}"] = {"errors": res.errors}
                cells += f"  failed: {res.errors}"
                continue
            for f in frameworks:
                r = res.ratio("native", f)
                row[f"{f}_t{t}"] = {**r.as_dict(), "native_ms": _median(res.ns["native"]) / 1e6,
                                    "framework_ms": _median(res.ns[f]) / 1e6}
                cells += f"  {f'x{r.median:5.3f} [{r.low:5.3f}, {r.high:5.3f}]':<30s}"
        print(f"{name:20s} {nodes:5d} {imported:5d} {after:5d} {err:8.1e}{cells}", flush=True)
        rows.append(row)
    for f in frameworks:
        for t in threads:
            got = [r[f"{f}_t{t}"]["median"] for r in rows
                   if "median" in r.get(f"{f}_t{t}", {})]
            if got:
                gm = math.exp(sum(math.log(x) for x in got) / len(got))
                print(f"geomean {SHORT[f]}/native at {t} thread(s): x{gm:.3f} over {len(got)} "
                      f"models (worst x{min(got):.3f})")
    for name, why in refused.items():
        print(f"not imported: {name}: {why}")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "refused": refused}, indent=1))
    if a.strict and refused:
        sys.exit(1)


if __name__ == "__main__":
    main()
