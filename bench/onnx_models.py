"""Real architectures pyparbench does not build itself, exported to ONNX and
imported: does every one map, match ONNX Runtime, and run as fast?

    python bench/onnx_models.py [--models resnet18,...,bert,llama,...] [--transformers]
                                [--exporter dynamo|torchscript] [--threads 1,2]
                                [--steps 21] [--frameworks onnxruntime,openvino]
                                [--batch 1] [--out DIR] [--json out.json] [--strict]
                                [--int8 | --bf16]

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
file as ``<name>-int8.onnx``; on a CPU without int8 dot products, whose
oneDNN kernels refuse weights beyond 7 bits, with ``reduce_range=True`` as
``<name>-int8-7bit.onnx``), its import checked against ONNX Runtime on
that file, and five contenders run in lockstep at each ``--threads``
count: native int8, ONNX Runtime and OpenVINO on the same QDQ file (both
run it as int8), native fp32 and native bf16 on the float file. Each
column is a contender's time over native int8's (above 1: native int8 is
faster), then their geomeans. A file that does not quantise or import
prints its one-line reason and the others go on.

``--bf16``: five contenders on the float file in lockstep at each
``--threads`` count T, each pinned to T CPUs: native bf16
(``Settings(precision="bf16")``, the baseline), native fp32, PyTorch at
bf16 as pyparbench runs it (eager, under ``torch.autocast``) on the module
the file was exported from (torchvision's, rebuilt from the weights kept
beside the file as ``<name>.pt`` and attached to it,
:func:`pyparbench.models.modules.attach_module`; a transformer's file has
no module here and runs without this column), and where ``--frameworks``
names OpenVINO (ONNX Runtime has no bf16 kernels: no column) OpenVINO at
its default precision (mode ``auto``: no inference precision hint, as
OpenVINO's users get it; the precision its compiled model picked is read
back, printed under the row and kept in the JSON) and OpenVINO at its bf16
hint. Each column is a contender's time over native bf16's (above 1:
native bf16 is faster), then their geomeans.

In both, a contender that fails is named under the model's row and the
others run again without it.

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
from collections.abc import Callable
from dataclasses import dataclass
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


def _vision_module(name: str) -> Any:
    """torchvision's ``name`` in eval mode with random weights, none zero."""
    import torch

    model = getattr(_torchvision_models(), name)().eval()
    with torch.no_grad():
        # Parameters initialised to zero (ViT's head, a block's last norm
        # where zero_init_residual) would make outputs that compare nothing.
        for p in model.parameters():
            if not p.any():
                p.normal_(0.0, 0.02)
    return model


def _weights_path(path: Path) -> Path:
    """Where the weights of a vision model's file are kept (its module is
    rebuilt from them for PyTorch's runs)."""
    return path.with_suffix(".pt")


def export(name: str, batch: int, exporter: str, out: Path) -> Path:
    import torch

    if name in transformer_exports.FAMILIES:
        return transformer_exports.export(name, exporter, out)
    if name in transformer_exports.STEPS:
        return transformer_exports.export_step(name, exporter, out)
    path = out / (f"{name}.onnx" if exporter == "dynamo" else f"{name}-{exporter}.onnx")
    if path.is_file() and _weights_path(path).is_file():
        return path
    model = _vision_module(name)
    x = torch.randn(batch, 3, 224, 224)
    with torch.no_grad():
        if exporter == "dynamo":
            torch.onnx.export(model, (x,), str(path), dynamo=True, external_data=False)
        else:
            torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17)
    # Written last: a file without its weights (a killed run) is exported again.
    torch.save(model.state_dict(), str(_weights_path(path)))
    return path


def _attach_source_module(name: str, path: Path, batch: int, out: Path) -> str:
    """The torchvision module ``path`` was exported from (its saved
    weights), attached to the file for PyTorch's runs
    (:func:`pyparbench.models.modules.attach_module`); returns the file's
    model name.

    Raises
    ------
    ValueError
        A transformer's file (its module is not rebuilt here), or one
        :func:`~pyparbench.models.modules.attach_module` refuses.
    """
    import torch

    from pyparbench.models.modules import attach_module

    if name not in MODELS:
        raise ValueError(f"{name} is a transformer: only torchvision's modules are "
                         "rebuilt for PyTorch")
    model = getattr(_torchvision_models(), name)().eval()
    model.load_state_dict(torch.load(str(_weights_path(path)), weights_only=True))
    return attach_module(path, model, batch=batch, directory=out)


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

    from pyparbench.machine.cpu_features import cpu_features

    # Without int8 dot products (no VNNI or AMX) full-range weights saturate
    # oneDNN's int8 kernels, which refuse them: 7-bit weights there, as
    # ONNX Runtime's reduce_range advises for such CPUs (the file says which).
    reduce_range = "int8" not in cpu_features()["precisions"]
    qpath = path.with_name(f"{path.stem}-int8{'-7bit' if reduce_range else ''}.onnx")
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
                    weight_type=QuantType.QInt8, reduce_range=reduce_range)
    partial.replace(qpath)
    return qpath


# How the columns name each runtime beside the native executor.
SHORT = {"onnxruntime": "ORT", "openvino": "OV"}


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _row_batch(name: str, batch: int) -> int:
    """A transformer's file is exported for one sequence; the others at ``batch``."""
    return 1 if name in transformer_exports.FAMILIES or name in transformer_exports.STEPS \
        else batch


def _feeds(name: str) -> dict[str, Any] | None:
    """The error check's inputs: a tokenizer's for a transformer, a decode
    step's for a step, None (the graph's random inputs) for the others."""
    return (transformer_exports.feeds() if name in transformer_exports.FAMILIES
            else transformer_exports.step_feeds() if name in transformer_exports.STEPS
            else None)


@dataclass(frozen=True)
class Comparison:
    """One precision's lockstep of contenders against ``baseline``, per file.

    ``prepare(name, float file, row)``: the file the baseline runs (its
    import is checked against ONNX Runtime), raising where it cannot be
    made (the model's reason); it may note on ``row``. ``contenders(name,
    float model, threads)``: the contenders at that count, baseline
    included, each labelled by one of ``columns`` (a label missing at a
    model is its cell "n/a"). ``read_back(result, row, threads)``: what to
    record of a finished lockstep beyond times."""

    precision: str
    baseline: str
    columns: list[str]
    prepare: Callable[[str, Path, dict[str, Any]], Path]
    contenders: Callable[[str, Any, int], list[Any]]
    read_back: Callable[[Any, dict[str, Any], int], str | None] | None = None


def _lockstep(model: Any, contenders: list[Any], baseline: str, steps: int) -> Any:
    """The contenders in lockstep; where some fail (the lockstep stops at a
    failure), again without them, so one runtime that cannot run a file
    leaves the others' figures."""
    from pyparbench.frameworks import run_lockstep

    res = run_lockstep(model, contenders, steps=steps, timeout=1800.0)
    failed = dict(res.errors)
    rest = [c for c in contenders if c.label not in failed]
    if failed and baseline not in failed and len(rest) >= 2:
        res = run_lockstep(model, rest, steps=steps, timeout=1800.0)
        res.errors = {**failed, **res.errors}
    return res


def run_comparison(a: argparse.Namespace, names: list[str], threads: list[int], out: Path,
                   cmp: Comparison) -> None:
    """A ``--int8`` or ``--bf16`` comparison (see the module's text)."""
    from pyparbench.frameworks import ModelRef
    from pyparbench.models import resolve

    others = [c for c in cmp.columns if c != cmp.baseline]
    heads = [f"{o}/{cmp.baseline} t{t}" for t in threads for o in others]
    width = max(24, *(len(h) + 2 for h in heads))
    print(f"{'model':20s} {'error':>8s} {cmp.precision + ' ms':>9s}"
          + "".join(f"  {h:<{width}s}" for h in heads))
    rows: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    base_ms_key = f"{cmp.baseline.replace('-', '_')}_ms"
    for name in names:
        batch = _row_batch(name, a.batch)
        row: dict[str, Any] = {"model": name, "batch": batch, "exporter": a.exporter}
        try:
            path = export(name, batch, a.exporter, out)
            run_path = cmp.prepare(name, path, row)
        except Exception as e:  # a file that cannot be made is its row's reason
            refused[name] = f"not made: {str(e).splitlines()[0][:200]}"
            print(f"{name:20s} {refused[name]}", flush=True)
            continue
        try:
            *_, err = output_error(run_path, batch, _feeds(name))
        except ValueError as e:
            refused[name] = str(e).splitlines()[0][:300]
            print(f"{name:20s} {cmp.precision} refused: {refused[name]}", flush=True)
            continue
        row["error"] = err
        float_model = ModelRef(resolve(str(path)), batch)
        cells, base_ms, notes = "", "", []
        for t in threads:
            res = _lockstep(ModelRef(resolve(str(run_path)), batch),
                            cmp.contenders(name, float_model, t), cmp.baseline, a.steps)
            if res.errors:
                row[f"errors_t{t}"] = res.errors
            if not res.steps:
                refused.setdefault(name, f"failed at {t} thread(s): {res.errors}")
                cells += f"  failed: {res.errors}"
                continue
            note = cmp.read_back(res, row, t) if cmp.read_back is not None else None
            if note and note not in notes:
                notes.append(note)
            base = _median(res.ns[cmp.baseline]) / 1e6
            base_ms += f"{'/' if base_ms else ''}{base:.2f}"
            for o in others:
                if o not in res.ns:
                    text = "failed" if o in res.errors else "n/a"
                    cells += f"  {text:<{width}s}"
                    continue
                r = res.ratio(cmp.baseline, o)
                row[f"{o}_t{t}"] = {**r.as_dict(), "ms": _median(res.ns[o]) / 1e6,
                                    base_ms_key: base}
                cells += f"  {f'x{r.median:5.3f} [{r.low:5.3f}, {r.high:5.3f}]':<{width}s}"
        print(f"{name:20s} {err:8.1e} {base_ms:>9s}{cells}", flush=True)
        for note in notes:
            print(f"{'':20s} {note}", flush=True)
        for label, why in {k: v for t in threads
                           for k, v in row.get(f"errors_t{t}", {}).items()}.items():
            print(f"{'':20s} {label} failed: {str(why).splitlines()[0][:200]}", flush=True)
        rows.append(row)
    for t in threads:
        for o in others:
            got = [r[f"{o}_t{t}"]["median"] for r in rows if f"{o}_t{t}" in r]
            if got:
                print(f"geomean {o}/{cmp.baseline} at {t} thread(s): x{_geomean(got):.3f} "
                      f"over {len(got)} models (worst x{min(got):.3f})")
    for name, why in refused.items():
        print(f"not run at {cmp.precision}: {name}: {why}")
    if a.json:
        Path(a.json).write_text(json.dumps({"precision": cmp.precision, "rows": rows,
                                            "refused": refused}, indent=1))
    if a.strict and refused:
        sys.exit(1)


def int8_comparison(frameworks: list[str]) -> Comparison:
    """The ``--int8`` contenders (see the module's text)."""
    from pyparbench.frameworks import Contender
    from pyparbench.settings import Settings

    def contenders(name: str, float_model: Any, t: int) -> list[Any]:
        s = Settings(intra_op=t, affinity="compact")
        return [Contender("native", settings=s, name="native-int8"),
                *[Contender(f, settings=s, name=f"{SHORT[f]}-int8") for f in frameworks],
                Contender("native", settings=s, name="native-fp32", graph=float_model),
                Contender("native", name="native-bf16", graph=float_model,
                          settings=Settings(intra_op=t, affinity="compact", precision="bf16"))]

    return Comparison("int8", "native-int8",
                      ["native-int8", *[f"{SHORT[f]}-int8" for f in frameworks],
                       "native-fp32", "native-bf16"],
                      lambda name, path, row: quantized(name, path), contenders)


def bf16_comparison(frameworks: list[str], out: Path) -> Comparison:
    """The ``--bf16`` contenders (see the module's text)."""
    from pyparbench.frameworks import Contender
    from pyparbench.models.modules import attached_module
    from pyparbench.settings import Settings

    openvino = "openvino" in frameworks

    def prepare(name: str, path: Path, row: dict[str, Any]) -> Path:
        # PyTorch runs the module the file came from (the file itself it cannot run).
        try:
            row["torch_module"] = _attach_source_module(name, path, row["batch"], out)
        except ValueError as e:
            row["torch_module"] = f"none: {str(e).splitlines()[0][:200]}"
            print(f"{name:20s} torch-bf16 not run: {row['torch_module']}", flush=True)
        return path

    def contenders(name: str, float_model: Any, t: int) -> list[Any]:
        fp32 = Settings(intra_op=t, affinity="compact")
        bf16 = Settings(intra_op=t, affinity="compact", precision="bf16")
        got = [Contender("native", settings=bf16, name="native-bf16"),
               Contender("native", settings=fp32, name="native-fp32")]
        if attached_module(float_model.model) is not None:
            got.append(Contender("torch", "eager", settings=bf16, name="torch-bf16"))
        if openvino:
            got += [Contender("openvino", "auto", settings=fp32, name="openvino-default"),
                    Contender("openvino", settings=bf16, name="openvino-bf16")]
        return got

    def read_back(res: Any, row: dict[str, Any], t: int) -> str | None:
        run = res.answers.get("openvino-default")
        jobs = run.jobs if run is not None else ()
        if not jobs:
            return None
        # The precision OpenVINO picked, as its compiled model reports it.
        picked = jobs[0].info["framework_precision"]
        row[f"openvino_default_precision_t{t}"] = picked
        return (f"openvino-default ran at {picked['precision']} (OpenVINO's own pick: "
                f"INFERENCE_PRECISION_HINT={picked['inference_precision_hint']} read back)")

    return Comparison("bf16", "native-bf16",
                      ["native-bf16", "native-fp32", "torch-bf16",
                       *(["openvino-default", "openvino-bf16"] if openvino else [])],
                      prepare, contenders, read_back)


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
    ap.add_argument("--bf16", action="store_true",
                    help="native bf16 against native fp32, PyTorch under autocast (the "
                         "module the file came from) and OpenVINO at its own precision and "
                         "at its bf16 hint")
    a = ap.parse_args()
    if a.int8 and a.bf16:
        ap.error("--int8 and --bf16 are two comparisons: name one")

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
    if a.int8 or a.bf16:
        run_comparison(a, names, threads, out, int8_comparison(frameworks) if a.int8
                       else bf16_comparison(frameworks, out))
        return
    head = "".join(f"  {f'{SHORT[f]}/native t{t} [95 %]':<30s}" for t in threads
                   for f in frameworks)
    print(f"{'model':20s} {'file':>5s} {'graph':>5s} {'run':>5s} {'error':>8s}{head}")
    rows: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    for name in names:
        batch = _row_batch(name, a.batch)
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
            nodes, imported, after, err = output_error(path, batch, _feeds(name))
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
