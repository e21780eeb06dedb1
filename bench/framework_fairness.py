"""Are pyparbench's framework models as fast as what the frameworks' users run?

  python bench/framework_fairness.py [--frameworks tensorflow torch onnxruntime]
      [--models resnet50 ...] [--batches 1 8] [--threads 2] [--steps 30]
      [--dlrm-rows 250000] [--json out.json]
  python bench/framework_fairness.py --smoke      # the MLP once (CI), no threshold

Each of pyparbench's framework models against the idiomatic reference a
user of that framework would write, on the same model, batch and thread
settings:

* TensorFlow (``tf.function``): ``tf.keras.applications`` ResNet50,
  InceptionV3 and MobileNetV2 built with ``weights=None`` (parameter counts
  checked equal to the graph's), called as ``model(x, training=False)`` in
  a ``tf.function``;
* PyTorch, eager and frozen TorchScript: hand-written ``torch.nn`` modules
  for ResNet-50 (Keras' variant, as the graph), GoogLeNet, the MLP and DLRM
  (dlrm_s_pytorch.py's structure), loaded with the graph's weights and
  checked to give the same outputs;
* ONNX Runtime: ``torch.onnx.export`` of that ``torch.nn`` module (the
  default exporter where onnxscript is installed, else the TorchScript one;
  the row says which) in an ``InferenceSession`` with the same session
  options as pyparbench's, outputs checked.

Both run in lockstep (:func:`pyparbench.frameworks.run_lockstep`): each in
its own process, pinned and configured by the same framework mapping
(``--threads`` CPUs, compact, as ``pyparbench overhead`` pins), one timed
run each in turn, after an idle wait; the ratio is the median of the paired
ratios ours / reference with its 95 % interval (below 1: ours is faster).
The reference runs in this script's own child (``--reference``), which
speaks the framework child's protocol, started in place of the framework
child through the contender's interpreter (a two-line launcher), so it gets
the same environment, CPUs and knobs.

Where ours applies a setting a careful user would apply, a third contender
runs the reference with the idiomatic default instead, and the row also
shows ours / default, naming the setting: PyTorch eager runs under
``torch.inference_mode()`` (default: ``torch.no_grad()``), TorchScript is
``torch.jit.freeze``-d and run under ``torch.inference_mode()`` (default:
``torch.jit.script`` alone, under ``torch.no_grad()``). The target is ours
within +-3 % of the reference, in both directions.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve()
# Which models each framework's reference exists for (Keras applications
# only has the vision models; the torch.nn ones are written below).
MODELS = {"tensorflow": ("resnet50", "inception-v3", "mobilenet-v2"),
          "torch": ("resnet50", "googlenet", "mlp-512", "dlrm"),
          "onnxruntime": ("resnet50", "googlenet", "mlp-512", "dlrm")}
MODES = {"tensorflow": ("function",), "torch": ("eager", "script"), "onnxruntime": ("all",)}
# The careful setting ours applies, per framework and mode, and its idiomatic default.
CAREFUL = {("torch", "eager"): ("torch.inference_mode()", "torch.no_grad()"),
           ("torch", "script"): ("torch.jit.freeze + torch.inference_mode()",
                                 "torch.jit.script alone, torch.no_grad()")}
# Where ours and the reference differ by construction, not by a setting.
NOTES = {("tensorflow", "mobilenet-v2"): "Keras' application pads each stride-2 depthwise "
         "input with ZeroPadding2D and convolves VALID (4 Pad ops); ours convolves SAME"}
TARGET = 0.03


# ======================================================== the reference child


@dataclass
class Reference:
    """A reference model ready to run: ``step`` runs it once on its input."""

    step: Callable[[], Any]
    info: dict[str, Any]
    wrap: Callable[[], Any] | None = None  # the context every run is in

    def time(self, repeats: int, warmup: int) -> list[float]:
        from pyparbench.frameworks._common import python_loop

        if self.wrap is None:
            return python_loop(self.step, repeats, warmup)
        with self.wrap():
            return python_loop(self.step, repeats, warmup)

    def outputs(self) -> list[Any]:
        if self.wrap is None:
            out = self.step()
        else:
            with self.wrap():
                out = self.step()
        outs = out if isinstance(out, (list, tuple)) else [out]
        return [np.asarray(o.numpy() if hasattr(o, "numpy") else o, np.float32) for o in outs]


def _keras(tf: Any, graph: Any, inputs: Mapping[str, Any], variant: str) -> Reference:
    apps = {"resnet50": tf.keras.applications.ResNet50,
            "inception-v3": tf.keras.applications.InceptionV3,
            "mobilenet-v2": tf.keras.applications.MobileNetV2}
    model = graph.meta["model"]
    _, _, h, w = graph.nodes[graph.inputs[0]].shape
    keras = apps[model](weights=None, input_shape=(h, w, 3))
    fn = tf.function(lambda x: keras(x, training=False))
    x = tf.constant(np.ascontiguousarray(inputs["image"].transpose(0, 2, 3, 1)))
    info = {"reference": f"tf.keras.applications.{apps[model].__name__}(weights=None) "
                         "in a tf.function",
            "params": int(keras.count_params()), "graph_params": int(graph.num_params)}
    return Reference(lambda: fn(x), info)


def _torch(torch: Any, graph: Any, inputs: Mapping[str, Any], mode: str, variant: str
           ) -> Reference:
    from torch_references import build_reference, reference_args

    module, what = build_reference(torch, graph)
    args = reference_args(graph, [torch.from_numpy(np.ascontiguousarray(
        inputs[graph.nodes[i].name])) for i in graph.inputs])
    if mode == "script":
        scripted = torch.jit.script(module)
        model = torch.jit.freeze(scripted) if variant == "same" else scripted
        what += (", torch.jit.freeze(torch.jit.script(...))" if variant == "same"
                 else ", torch.jit.script(...)")
    else:
        model = module
    wrap = torch.inference_mode if variant == "same" else torch.no_grad
    with wrap():
        model(*args)  # TorchScript's profiling runs
    return Reference(lambda: model(*args), {"reference": what}, wrap)


def _onnxruntime(ort: Any, graph: Any, inputs: Mapping[str, Any], knobs: Mapping[str, Any],
                 onnx_path: str) -> Reference:
    from pyparbench.frameworks.onnxruntime.knobs import session_options

    sess = ort.InferenceSession(onnx_path, session_options(ort, knobs),
                                providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feeds = {n: np.ascontiguousarray(inputs[graph.nodes[i].name])
             for n, i in zip(names, graph.inputs, strict=True)}
    outs = [o.name for o in sess.get_outputs()]
    meta = json.loads(Path(onnx_path + ".json").read_text())
    return Reference(lambda: sess.run(outs, feeds), {"reference": meta["reference"], **meta})


def reference_child(variant: str, onnx_path: str | None) -> int:
    """The reference side of a lockstep run: reads the framework child's
    request, configures the framework with pyparbench's own knob functions,
    builds the reference model, runs the child's lockstep loop and answers
    as the child does (the reference's outputs in its job)."""
    # The framework child's own configuration and lockstep loop, so that both
    # sides are configured and timed alike.
    from pyparbench.frameworks import child
    from pyparbench.frameworks.spec import build_graph, describe

    req = json.loads(sys.stdin.readline())
    framework, job = req["framework"], req["jobs"][0]
    fw = importlib.import_module(child.MODULES[framework])
    reported = child._configure(framework, fw, req["knobs"])
    graph = build_graph(job["graph"])
    inputs = graph.random_inputs(seed=int(job.get("input_seed", 0)))
    ref: Reference
    if framework == "tensorflow":
        ref = _keras(fw, graph, inputs, variant)
    elif framework == "torch":
        ref = _torch(fw, graph, inputs, req["mode"], variant)
    else:
        assert onnx_path is not None
        ref = _onnxruntime(fw, graph, inputs, req["knobs"], onnx_path)
    ns = child._lockstep(ref, int(job.get("warmup", 3)))
    outputs = {graph.nodes[o].name: child.encode(v)
               for o, v in zip(graph.outputs, ref.outputs(), strict=True)}
    print(json.dumps({"status": "ok", "framework": framework, "mode": req.get("mode"),
                      "reported": reported, "jobs": [{
                          "status": "ok", "graph": describe(job["graph"]), "ns": ns,
                          "outputs": outputs, "info": ref.info}]}))
    return 0


def export_child(model: str, batch: int, kwargs: dict[str, Any], path: str) -> int:
    """``torch.onnx.export`` of the torch.nn reference, with the graph's weights."""
    import torch

    from pyparbench.frameworks.spec import ModelRef, build_graph
    from torch_references import build_reference, reference_args

    graph = build_graph(ModelRef(model, batch, kwargs=kwargs).to_spec())
    module, what = build_reference(torch, graph)
    inputs = graph.random_inputs(seed=0)
    args = reference_args(graph, [torch.from_numpy(np.ascontiguousarray(
        inputs[graph.nodes[i].name])) for i in graph.inputs])
    names = [graph.nodes[i].name for i in graph.inputs]
    try:
        import onnxscript  # noqa: F401  (the default exporter's dependency)

        exporter = "torch.onnx.export (torch.export-based, the default)"
        torch.onnx.export(module, args, path, input_names=names)
    except ImportError:
        exporter = "torch.onnx.export(dynamo=False) (TorchScript-based; no onnxscript)"
        torch.onnx.export(module, args, path, input_names=names, dynamo=False)
    import onnx

    proto = onnx.load(path)
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    Path(path + ".json").write_text(json.dumps({
        "reference": f"{what}, {exporter}", "exported_ir_version": proto.ir_version,
        "exported_opset": opset}))
    return 0


# ================================================================== parent


def _launcher(directory: str, name: str, args: list[str]) -> str:
    """An executable that starts this script's reference child (with
    ``args``) wherever the framework child would start."""
    path = os.path.join(directory, name)
    quoted = " ".join(f"'{a}'" for a in [sys.executable, "-P", str(HERE), *args])
    Path(path).write_text(f"#!/bin/sh\nexec {quoted}\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def measure(framework: str, mode: str, model: str, batch: int, threads: int, steps: int,
            kwargs: dict[str, Any], workdir: str) -> dict[str, Any]:
    """One row: ours, the reference (and the idiomatic default) in lockstep."""
    import subprocess

    from pyparbench.frameworks import Contender, ModelRef, framework_outputs, run_lockstep
    from pyparbench.reference import output_error
    from pyparbench.settings import Settings

    s = Settings(intra_op=threads, affinity="compact")
    ref_args = ["--reference", "same"]
    if framework == "onnxruntime":
        path = os.path.join(workdir, f"{model}-b{batch}.onnx")
        proc = subprocess.run([sys.executable, "-P", str(HERE), "--export", model, str(batch),
                               json.dumps(kwargs), path], capture_output=True, text=True,
                              env={**os.environ, "PYPARBENCH_NO_CORE": "1"}, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"torch.onnx.export of {model}: {proc.stderr[-2000:]}")
        ref_args += ["--onnx", path]
    tag = f"{framework}-{mode}-{model}-b{batch}"
    contenders = [Contender(framework, mode, s, name="ours"),
                  Contender(framework, mode, s, name="reference",
                            python=_launcher(workdir, f"{tag}-reference", ref_args))]
    careful = CAREFUL.get((framework, mode))
    if careful:
        contenders.append(Contender(framework, mode, s, name="default", python=_launcher(
            workdir, f"{tag}-default", ["--reference", "default"])))
    ref = ModelRef(model, batch, kwargs=kwargs)
    t0 = time.monotonic()
    res = run_lockstep(ref, contenders, steps=steps, timeout=3600.0)
    if res.errors:
        raise RuntimeError(f"{tag}: {res.errors}")
    job = res.answers["reference"].job
    r = res.ratio("reference", "ours")  # median of ours / reference
    row: dict[str, Any] = {
        "framework": framework, "mode": mode, "model": model, "batch": batch,
        "ours_ms": float(np.median(res.ns["ours"])) / 1e6,
        "reference_ms": float(np.median(res.ns["reference"])) / 1e6,
        "ratio": r.median, "low": r.low, "high": r.high, "steps": r.steps,
        "reference": job.info["reference"], "seconds": time.monotonic() - t0}
    if careful:
        d = res.ratio("default", "ours")
        row.update(default_ms=float(np.median(res.ns["default"])) / 1e6,
                   default_ratio=d.median, default_low=d.low, default_high=d.high,
                   careful=careful[0], idiomatic=careful[1])
    if framework == "tensorflow":  # Keras' own weights: the same architecture, by count
        row["same_params"] = job.info["params"] == job.info["graph_params"]
    else:
        (ours_out,) = framework_outputs([ref], framework, s, mode=mode)
        row["max_rel_difference"] = output_error(job.outputs(), ours_out,
                                                 labels=("reference", "ours"))
        for key in ("exported_ir_version", "exported_opset"):
            if key in job.info:
                row[key] = job.info[key]
    return row


def _show(row: Mapping[str, Any]) -> str:
    fw = f"{row['framework']}/{row['mode']}"
    ok = "" if abs(row["ratio"] - 1.0) <= TARGET else "  (outside +-3 %)"
    text = (f"{fw:19s} {row['model']:13s} b{row['batch']:<2d} ours {row['ours_ms']:8.2f} ms  "
            f"ref {row['reference_ms']:8.2f} ms  ours/ref {row['ratio']:.3f} "
            f"[{row['low']:.3f}, {row['high']:.3f}]{ok}")
    if "default_ratio" in row:
        text += (f"\n{'':38s}ours/default {row['default_ratio']:.3f} "
                 f"[{row['default_low']:.3f}, {row['default_high']:.3f}]  "
                 f"(ours: {row['careful']}; default: {row['idiomatic']})")
    check = ("params equal" if row.get("same_params") else "params DIFFER"
             if "same_params" in row else f"outputs within {row['max_rel_difference']:.1e}")
    note = NOTES.get((row["framework"], row["model"]))
    return (text + f"\n{'':38s}{check}; reference: {row['reference']}"
            + (f"\n{'':38s}note: {note}" if note else ""))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frameworks", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--models", nargs="+", default=None,
                   help="models to measure (default: every model with a reference)")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--threads", type=int, default=min(2, len(os.sched_getaffinity(0))))
    p.add_argument("--steps", type=int, default=30, help="lockstep steps per row")
    p.add_argument("--dlrm-rows", type=int, default=250_000,
                   help="cap on DLRM's table rows (the model's own cap is 1,000,000: 2 GB "
                        "of tables per process)")
    p.add_argument("--smoke", action="store_true",
                   help="the MLP once at batch 1, 3 steps: a smoke run, no figures")
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--reference", choices=["same", "default"], help=argparse.SUPPRESS)
    p.add_argument("--onnx", help=argparse.SUPPRESS)
    p.add_argument("--export", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.reference:
        return reference_child(args.reference, args.onnx)
    if args.export:
        model, batch, kwargs, path = args.export
        return export_child(model, int(batch), json.loads(kwargs), path)
    if args.smoke:
        args.models, args.batches, args.steps = ["mlp-512"], [1], 3
    known = {m for ms in MODELS.values() for m in ms}
    bad = sorted(set(args.models or ()) - known)
    if bad:
        p.error(f"no reference for {', '.join(bad)}; models with one: {', '.join(sorted(known))}")
    if args.steps < 1 or args.threads < 1 or any(b < 1 for b in args.batches):
        p.error("--steps, --threads and --batches must be >= 1")
    rows: list[dict[str, Any]] = []
    failed = 0
    print(f"{args.threads} thread(s), pinned compact; lockstep, {args.steps} steps; "
          "ours/ref = median of paired ratios [95 % interval], target 1 +- 0.03", flush=True)
    with tempfile.TemporaryDirectory(prefix="ppb-fairness-") as workdir:
        for fw in args.frameworks:
            for model in MODELS[fw]:
                if args.models and model not in args.models:
                    continue
                kwargs = {"max_rows": args.dlrm_rows} if model == "dlrm" else {}
                for batch in args.batches:
                    for mode in MODES[fw]:
                        try:
                            row = measure(fw, mode, model, batch, args.threads, args.steps,
                                          kwargs, workdir)
                        except RuntimeError as e:  # one failed row; the others still run
                            failed += 1
                            print(f"{fw}/{mode} {model} b{batch}: FAILED: {e}", flush=True)
                            continue
                        rows.append(row)
                        print(_show(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"threads": args.threads, "steps": args.steps,
                                               "rows": rows}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))  # torch_references, beside this file (-P drops it)
    sys.exit(main())
