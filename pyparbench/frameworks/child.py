"""The child process that runs graphs in one framework (or natively).

Started by :mod:`pyparbench.frameworks.launch` as ``python -P -m
pyparbench.frameworks.child`` in a neutral directory, already confined to
its CPUs and with the framework's environment set. It reads one JSON
request from stdin::

    {"framework": "torch", "mode": "script", "settings": {...},
     "knobs": {...}, "cpus": [0, 1] | null,
     "jobs": [{"graph": <graph spec>, "repeats": 20, "warmup": 3,
               "input_seed": 0, "outputs": false, "profile": 5,
               "kernel_repeats": 0, "profile_parser": "trace_json"}]}

imports the framework (a framework child never loads pyparbench's core:
``PYPARBENCH_NO_CORE=1``), applies the knobs before any other work, runs
each job and prints one JSON line: the framework's reported settings, a
threading audit from /proc, and per job its timings (ns), optional outputs
(base64 float32), kernel times from the framework's profiler (natively: the
executor's trace) and, natively, each node's isolated-kernel time and its
plan kernel's time alone. A job that fails is reported as such; the others
still run.

With ``"defaults": true`` the child applies no knob: the framework runs
as it comes (its ``knobs`` say only how the model is built).

With ``"lockstep": true`` in the request the child runs its one job's
timed runs one at a time, each on the parent's ``go`` (see
:mod:`pyparbench.frameworks.lockstep`).

``PYPARBENCH_FRAMEWORK_HOOK`` injects failures for tests: ``abort`` (the
child aborts), ``hang`` (it sleeps forever), ``import=NAME`` (it imports
module NAME in place of the framework); ``ACTION@FRAMEWORK`` only in that
framework's children.
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Mapping
from typing import Any

import numpy as np

from pyparbench._version import __version__
from pyparbench.frameworks import proc_audit
from pyparbench.frameworks.onnxruntime import knobs as ort_knobs
from pyparbench.frameworks.onnxruntime import runtime as ort_runtime
from pyparbench.frameworks.openvino import knobs as ov_knobs
from pyparbench.frameworks.openvino import runtime as ov_runtime
from pyparbench.frameworks.precision import unsupported
from pyparbench.frameworks.spec import build_graph, describe
from pyparbench.frameworks.tensorflow import knobs as tf_knobs
from pyparbench.frameworks.tensorflow import runtime as tf_runtime
from pyparbench.settings import Settings
from pyparbench.timing import summarize

HOOK_ENV = "PYPARBENCH_FRAMEWORK_HOOK"
STEP_MARK = "@pyparbench-step "
MODULES = {"tensorflow": "tensorflow", "torch": "torch", "onnxruntime": "onnxruntime",
           "openvino": "openvino", "native": "pyparbench._core"}


def encode(arr: Any) -> dict[str, Any]:
    a = np.ascontiguousarray(arr, dtype=np.float32)
    return {"shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode("ascii")}


def decode(d: Mapping[str, Any]) -> Any:
    return np.frombuffer(base64.b64decode(d["data"]), np.float32).reshape(d["shape"]).copy()


def _prepare(framework: str, fw: Any, graph: Any, inputs: Any, req: Mapping[str, Any]) -> Any:
    knobs = req["knobs"]
    if framework != "native":
        refused = unsupported(framework, req["settings"].get("precision", "fp32"), req["mode"],
                              str(getattr(graph, "meta", {}).get("model") or "") or None)
        if refused:  # never an fp32 run under a bf16 or int8 label
            raise ValueError(f"{framework}: {refused}")
    if framework == "tensorflow":
        return tf_runtime.prepare(fw, graph, inputs, knobs)
    if framework == "torch":
        from pyparbench.frameworks.torch import runtime as torch_runtime  # noqa: PLC0415 (heavy: imports torch)

        return torch_runtime.prepare(fw, graph, inputs, req["mode"], knobs)
    if framework == "onnxruntime":
        return ort_runtime.prepare(fw, graph, inputs, knobs)
    if framework == "openvino":
        return ov_runtime.prepare(fw, graph, inputs, knobs)
    from pyparbench.frameworks.native import runtime as native_runtime  # noqa: PLC0415 (the native core: only the native framework's child)

    s = dict(req["settings"])
    if isinstance(s.get("affinity"), list):
        s["affinity"] = tuple(tuple(c) for c in s["affinity"])
    return native_runtime.prepare(graph, inputs, Settings(**s))


def _configure(framework: str, fw: Any, knobs: Mapping[str, Any], defaults: bool = False
               ) -> dict[str, Any]:
    """Applies the knobs (``defaults``: none, the framework's own) and
    returns what the framework reports."""
    if framework == "tensorflow":
        fw.get_logger().setLevel("ERROR")  # retracing notes when one child runs many graphs
        return tf_knobs.report(fw) if defaults else tf_knobs.configure(fw, knobs)
    if framework == "torch":
        from pyparbench.frameworks.torch import knobs as torch_knobs  # noqa: PLC0415 (heavy: imports torch)

        return torch_knobs.report(fw) if defaults else torch_knobs.configure(fw, knobs)
    if framework == "onnxruntime":
        return ort_knobs.configure(fw, knobs)
    if framework == "openvino":
        return ov_knobs.configure(fw, knobs)
    return {"version": __version__}


def _job(framework: str, fw: Any, job: Mapping[str, Any], req: Mapping[str, Any]
         ) -> dict[str, Any]:
    out: dict[str, Any] = {"graph": describe(job["graph"])}
    t0 = time.perf_counter()
    graph = build_graph(job["graph"])
    inputs = graph.random_inputs(seed=int(job.get("input_seed", 0)))
    model = _prepare(framework, fw, graph, inputs, req)
    out["setup_s"] = time.perf_counter() - t0
    repeats = int(job.get("repeats", 0))
    lockstep = bool(req.get("lockstep"))
    if repeats or lockstep:
        before = proc_audit.snapshot()
        ns = (_lockstep(model, int(job.get("warmup", 3))) if lockstep
              else model.time(repeats, int(job.get("warmup", 3))))
        after = proc_audit.snapshot()
        settings = req["settings"]
        out["ns"] = ns
        if ns:
            out["latency"] = summarize(ns).as_dict()
        out["proc_audit"] = proc_audit.compare(
            before, after, threads=settings["inter_op"] * settings["intra_op"] + 1,
            cpus=req.get("cpus"))
    if job.get("outputs"):
        out["outputs"] = {k: encode(v) for k, v in model.outputs().items()}
    if job.get("profile"):
        iters = int(job["profile"])
        if framework == "tensorflow":
            prof = model.profile(iters, job.get("profile_parser", "trace_json"))
        else:
            prof = model.profile(iters)
        out["kernels"] = [e.as_dict() for e in prof.kernels]
        out["profiled_iteration_ns"] = prof.iteration_ns
    if framework == "native":
        if job.get("kernel_repeats"):
            out["kernel_ns"] = model.kernel_times(int(job["kernel_repeats"]))
        if job.get("inline_repeats"):
            out["inline_ns"] = model.inline_times(int(job["inline_repeats"]),
                                                  int(job.get("inline_inner", 1000)))
        if job.get("cache_repeats"):
            out["cache_ns"] = model.cold_kernel_times(int(job["cache_repeats"]),
                                                      int(job.get("cold_repeats", 0)))
        if repeats:
            out["native_audit"] = model.audit()
    out["info"] = getattr(model, "info", {})
    out["status"] = "ok"
    return out


def _lockstep(model: Any, warmup: int) -> list[float]:
    """Timed runs one at a time, each when the parent says ``go`` on stdin
    (``end`` or end of input stops), each answered on stdout by a
    ``STEP_MARK`` line: the parent runs several children in turn, so that a
    slow spell of the machine falls on neighbouring runs of each. Each timed
    run follows one untimed run: the first run after another process's
    wakes this one's sleeping pool and meets the other's pool still spinning."""
    model.time(1, warmup)
    print(STEP_MARK + "ready", flush=True)
    ns: list[float] = []
    for line in sys.stdin:
        if line.strip() != "go":
            break
        ns.extend(model.time(1, 1))
        print(f"{STEP_MARK}{ns[-1]:.0f}", flush=True)
    return ns


def main() -> int:
    # One line: later lines on stdin are a lockstep run's commands.
    req = json.loads(sys.stdin.readline())
    framework = req["framework"]
    # Before the framework narrows any thread (GOMP_CPU_AFFINITY binds this one).
    process_cpus = sorted(os.sched_getaffinity(0))
    hook, _, target = os.environ.get(HOOK_ENV, "").partition("@")
    if target and target != framework:
        hook = ""
    if hook == "abort":
        os.abort()
    if hook == "hang":
        time.sleep(10**6)
    module = hook.split("=", 1)[1] if hook.startswith("import=") else MODULES[framework]
    t0 = time.perf_counter()
    try:
        fw = importlib.import_module(module)
    except Exception as e:  # a missing or broken framework is an answer, not a crash
        print(json.dumps({"status": "error", "stage": "import",
                          "error": f"cannot import {module}: {type(e).__name__}: {e}"}))
        return 0
    import_s = time.perf_counter() - t0
    try:
        reported = _configure(framework, fw, req["knobs"], bool(req.get("defaults")))
    except ValueError as e:  # the framework refused a knob's value: named, one line
        print(json.dumps({"status": "error", "stage": "configure", "error": str(e)}))
        return 0
    jobs = []
    for job in req["jobs"]:
        try:
            jobs.append(_job(framework, fw, job, req))
        except Exception as e:
            jobs.append({"graph": describe(job["graph"]), "status": "error",
                         "error": f"{type(e).__name__}: {e}",
                         "traceback": traceback.format_exc(limit=8)})
    # ONNX Runtime's knobs live in each session's options, OpenVINO's in each
    # compiled model's properties.
    held = {"onnxruntime": "session_options", "openvino": "compiled_properties"}.get(framework, "")
    for j in jobs if held else []:
        if held in j.get("info", {}):
            reported[held] = j["info"][held]
            break
    print(json.dumps({"status": "ok", "framework": framework, "mode": req.get("mode"),
                      "import_s": import_s, "reported": reported,
                      "core_loaded": "pyparbench._core" in sys.modules,
                      "process_cpus": process_cpus, "jobs": jobs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
