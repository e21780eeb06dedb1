"""Real architectures pyparbench does not build itself, exported to ONNX and
imported: does every one map, match ONNX Runtime, and run as fast?

    python bench/onnx_models.py [--models resnet18,...,bert,llama,...] [--transformers]
                                [--exporter dynamo|torchscript] [--threads 1,2]
                                [--steps 21] [--frameworks onnxruntime,openvino]
                                [--batch 1] [--out DIR] [--json out.json] [--strict]
                                [--int8]

Each vision model is torchvision's architecture with random weights (no
download) at ``--batch``; each transformer (``--transformers``: all of
bench/transformer_exports.py's families, encoders and decoders' prefill) is
the family's Hugging Face classes with random weights, ids and mask of
(1, 128) in, its last hidden state out, fed a tokenizer's inputs (ids in the
vocabulary, a mask of ones) for the error check; each decoder's decode step
(``llama-step``, ...: one token after 127, the past keys / values per layer
in, the present out, random past) comes with them. Each is exported by
``torch.onnx.export`` with ``--exporter`` (dynamo by default), then, per
model: the nodes in the file, in the imported graph and after the graph
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

``--int8``: each file is quantised by ONNX Runtime's ``quantize_static``
(QDQ, weights int8 per channel, activations uint8 per tensor, calibrated
on CALIBRATION_INPUTS random inputs from seed 0; cached beside the float
file as ``<name>-int8.onnx``), its import checked against ONNX Runtime on
that file, and five contenders run in lockstep at each ``--threads``
count: native int8, ONNX Runtime and OpenVINO on the same QDQ file (both
run it as int8), native fp32 and native bf16 on the float file. Each
column is a contender's time over native int8's (above 1: native int8 is
faster), then their geomeans. A file that does not quantise or import
prints its one-line reason and the others go on.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # transformer_exports, beside this file
import transformer_exports  # noqa: E402

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


def export(name: str, batch: int, exporter: str, out: Path) -> Path:
    import torch

    if name in transformer_exports.FAMILIES:
        return transformer_exports.export(name, exporter, out)
    if name in transformer_exports.STEPS:
        return transformer_exports.export_step(name, exporter, out)
    path = out / (f"{name}.onnx" if exporter == "dynamo" else f"{name}-{exporter}.onnx")
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
        if exporter == "dynamo":
            torch.onnx.export(model, (x,), str(path), dynamo=True, external_data=False)
        else:
            torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17)
    return path


def output_error(path: Path, batch: int, feeds: dict[str, Any] | None = None
                 ) -> tuple[int, int, int, float]:
    """(nodes in the file, imported, after the passes, max |native - ORT| / max |ORT|),
    on ``feeds`` where given (by input name), else the graph's random inputs."""
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
    for k, v in (feeds or {}).items():
        if k not in ins:
            raise ValueError(f"{path.name} has no input {k!r}; its inputs: {', '.join(ins)}")
        ins[k] = v.reshape(ins[k].shape)
    shapes = graph.meta["onnx_input_shapes"]
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    # An input the graph reads in the file's own shape has no entry (GPT-2's ids).
    want = sess.run(None, {k: v.reshape(shapes.get(k, v.shape)) for k, v in ins.items()})
    cg = compile_graph(graph)
    cg.set_inputs(ins)
    cg.run(repeats=1, warmup=0)
    got = cg.outputs()
    if not any(np.abs(w).max() > 0 for w in want):
        raise ValueError("ONNX Runtime's outputs are all zero: nothing to compare")
    err = max(float(np.abs(got[n].astype(np.float64) - w).max())
              / max(float(np.abs(w).max()), 1e-30) for n, w in zip(names, want, strict=True))
    return in_file, len(graph.nodes), after, err


# Random inputs quantize_static calibrates each activation's range on.
CALIBRATION_INPUTS = 4


def _calibration_feeds(name: str, path: Path, seed: int) -> dict[str, Any]:
    """One calibration input of ``path``: a tokenizer's for a transformer,
    a decode step's for a step, else standard normal values in the file's
    input shapes."""
    import numpy as np
    import onnx

    if name in transformer_exports.FAMILIES:
        return transformer_exports.feeds(seed)
    if name in transformer_exports.STEPS:
        return transformer_exports.step_feeds(seed)
    rng = np.random.default_rng(seed)
    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {i.name for i in graph.initializer}
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in graph.input if i.name not in weights}


def quantized(name: str, path: Path) -> Path:
    """``path`` quantised by quantize_static (QDQ, int8 weights per channel,
    uint8 activations), cached beside it as ``<stem>-int8.onnx``."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    qpath = path.with_name(f"{path.stem}-int8.onnx")
    if qpath.is_file():
        return qpath

    class Calibration(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.left = [_calibration_feeds(name, path, s) for s in range(CALIBRATION_INPUTS)]

        def get_next(self) -> dict[str, Any] | None:
            return self.left.pop(0) if self.left else None

    partial = qpath.with_name(f"{qpath.stem}.partial.onnx")  # a killed run leaves no cache
    quantize_static(str(path), str(partial), Calibration(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    partial.replace(qpath)
    return qpath


# How the columns name each runtime beside the native executor.
SHORT = {"onnxruntime": "ORT", "openvino": "OV"}


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def run_int8(a: argparse.Namespace, names: list[str], threads: list[int],
             frameworks: list[str], out: Path) -> None:
    """The ``--int8`` comparison (see the module's text)."""
    from pyparbench.frameworks import Contender, ModelRef, run_lockstep
    from pyparbench.models import resolve
    from pyparbench.settings import Settings

    others = [f"{SHORT[f]}-int8" for f in frameworks] + ["native-fp32", "native-bf16"]
    head = "".join(f"  {f'{o}/native-int8 t{t}':<24s}" for t in threads for o in others)
    print(f"{'model':20s} {'error':>8s} {'int8 ms':>8s}{head}")
    rows: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    for name in names:
        batch = 1 if name in transformer_exports.FAMILIES or name in transformer_exports.STEPS \
            else a.batch
        row: dict[str, Any] = {"model": name, "batch": batch, "exporter": a.exporter}
        try:
            path = export(name, batch, a.exporter, out)
            qpath = quantized(name, path)
        except Exception as e:  # a file that does not export or quantise is its row's reason
            refused[name] = f"export or quantize_static failed: {str(e).splitlines()[0][:200]}"
            print(f"{name:20s} {refused[name]}", flush=True)
            continue
        feeds = (transformer_exports.feeds() if name in transformer_exports.FAMILIES
                 else transformer_exports.step_feeds() if name in transformer_exports.STEPS
                 else None)
        try:
            *_, err = output_error(qpath, batch, feeds)
        except ValueError as e:
            refused[name] = str(e).splitlines()[0][:300]
            print(f"{name:20s} int8 refused: {refused[name]}", flush=True)
            continue
        row["error"] = err
        float_model = ModelRef(resolve(str(path)), batch)
        cells, int8_ms = "", ""
        for t in threads:
            s = Settings(intra_op=t, affinity="compact")
            contenders = [Contender("native", settings=s, name="native-int8"),
                          *[Contender(f, settings=s, name=f"{SHORT[f]}-int8")
                            for f in frameworks],
                          Contender("native", settings=s, name="native-fp32", graph=float_model),
                          Contender("native", name="native-bf16", graph=float_model,
                                    settings=Settings(intra_op=t, affinity="compact",
                                                      precision="bf16"))]
            res = run_lockstep(ModelRef(resolve(str(qpath)), batch), contenders,
                               steps=a.steps, timeout=1800.0)
            if res.errors or not res.steps:
                refused.setdefault(name, f"failed at {t} thread(s): {res.errors}")
                cells += f"  failed: {res.errors}"
                continue
            int8_ms += f"{'/' if int8_ms else ''}{_median(res.ns['native-int8']) / 1e6:.2f}"
            for o in others:
                r = res.ratio("native-int8", o)
                row[f"{o}_t{t}"] = {**r.as_dict(), "ms": _median(res.ns[o]) / 1e6,
                                    "native_int8_ms": _median(res.ns["native-int8"]) / 1e6}
                cells += f"  {f'x{r.median:5.3f} [{r.low:5.3f}, {r.high:5.3f}]':<24s}"
        print(f"{name:20s} {err:8.1e} {int8_ms:>8s}{cells}", flush=True)
        rows.append(row)
    for t in threads:
        for o in others:
            got = [r[f"{o}_t{t}"]["median"] for r in rows if f"{o}_t{t}" in r]
            if got:
                print(f"geomean {o}/native-int8 at {t} thread(s): x{_geomean(got):.3f} over "
                      f"{len(got)} models (worst x{min(got):.3f})")
    for name, why in refused.items():
        print(f"not run at int8: {name}: {why}")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "refused": refused}, indent=1))
    if a.strict and refused:
        sys.exit(1)


def _installed(frameworks: tuple[str, ...]) -> list[str]:
    return [f for f in frameworks if importlib.util.find_spec(f) is not None]


def _median(ns: list[float]) -> float:
    return sorted(ns)[len(ns) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"any of {', '.join(MODELS + tuple(transformer_exports.FAMILIES))}, "
                         f"{', '.join(transformer_exports.STEPS)}")
    ap.add_argument("--transformers", action="store_true",
                    help=f"the transformers ({', '.join(transformer_exports.FAMILIES)} and "
                         "the decoders' steps) instead of --models")
    ap.add_argument("--exporter", default="dynamo", choices=transformer_exports.EXPORTERS)
    ap.add_argument("--threads", default=f"1,{len(os.sched_getaffinity(0))}")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=21, help="paired runs per model and count")
    ap.add_argument("--frameworks", default=",".join(_installed(("onnxruntime", "openvino"))),
                    help="the runtimes that run each file beside the native executor")
    ap.add_argument("--out", default="onnx-models", help="where the exported files go")
    ap.add_argument("--json", help="also write every figure here")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when a model does not export, import or run")
    ap.add_argument("--int8", action="store_true",
                    help="each file quantised by quantize_static: native int8 against ONNX "
                         "Runtime and OpenVINO on that file, and native fp32 / bf16")
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
    transformers = (*transformer_exports.FAMILIES, *transformer_exports.STEPS)
    names = (list(transformers) if a.transformers
             else [n for n in a.models.split(",") if n])
    unknown = [n for n in names if n not in MODELS and n not in transformers]
    if unknown:
        ap.error(f"--models: unknown {', '.join(unknown)}; valid: "
                 f"{', '.join(MODELS + transformers)}")
    if a.int8:
        run_int8(a, names, threads, frameworks, out)
        return
    head = "".join(f"  {f'{SHORT[f]}/native t{t} [95 %]':<30s}" for t in threads
                   for f in frameworks)
    print(f"{'model':20s} {'file':>5s} {'graph':>5s} {'run':>5s} {'error':>8s}{head}")
    rows: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    for name in names:
        # A transformer's file is exported for one sequence of SEQ tokens.
        batch = 1 if name in transformers else a.batch
        row: dict[str, Any] = {"model": name, "batch": batch, "exporter": a.exporter}
        t0 = time.perf_counter()
        try:
            path = export(name, batch, a.exporter, out)
        except Exception as e:  # an exporter's failure is the model's row, not the run's
            refused[name] = f"export failed: {str(e).splitlines()[0][:200]}"
            print(f"{name:20s} {refused[name]}", flush=True)
            continue
        row["export_s"] = time.perf_counter() - t0
        try:
            key = resolve(str(path))
            feeds = (transformer_exports.feeds() if name in transformer_exports.FAMILIES
                     else transformer_exports.step_feeds() if name in transformer_exports.STEPS
                     else None)
            nodes, imported, after, err = output_error(path, batch, feeds)
        except ValueError as e:
            refused[name] = str(e)
            print(f"{name:20s} refused: {str(e)[:300]}", flush=True)
            continue
        row.update(nodes_in_file=nodes, nodes_imported=imported, nodes_after_passes=after,
                   error=err)
        cells = ""
        for t in threads:
            s = Settings(intra_op=t, affinity="compact")
            res = run_lockstep(ModelRef(key, batch),
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
                gm = _geomean(got)
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
