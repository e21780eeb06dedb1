"""OpenVINO's knobs: properties of each compiled model.

The settings become ``compile_model`` properties
(:mod:`pyparbench.frameworks.mapping`); OpenVINO has no process-wide knob
pyparbench sets. The same properties are written as a user's code
(:func:`code`) and as a ``benchmark_app`` command line
(:func:`benchmark_app_command`), the tool OpenVINO's numbers are published
with.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

__all__ = ["PROPERTIES", "REPORTED", "benchmark_app_command", "benchmark_app_line", "code", "compile_model",
           "compile_properties", "configure", "reported_properties"]

# The properties the settings set, in the order they are written.
PROPERTIES = ("PERFORMANCE_HINT", "NUM_STREAMS", "INFERENCE_NUM_THREADS", "ENABLE_CPU_PINNING",
              "ENABLE_HYPER_THREADING", "INFERENCE_PRECISION_HINT")
# What a compiled model is asked back: the settings' properties and what
# OpenVINO's tuner decides from them.
REPORTED = (*PROPERTIES, "OPTIMAL_NUMBER_OF_INFER_REQUESTS", "SCHEDULING_CORE_TYPE",
            "EXECUTION_DEVICES")


def configure(ov: Any, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """OpenVINO has no process-wide knobs: each compiled model carries
    them. Reports its version and what the CPU plugin says of the CPU."""
    core = ov.Core()
    return {"version": str(ov.__version__),
            "device": str(core.get_property("CPU", "FULL_DEVICE_NAME")),
            "capabilities": [str(c) for c in core.get_property("CPU",
                                                                "OPTIMIZATION_CAPABILITIES")]}


def compile_properties(knobs: Mapping[str, Any]) -> dict[str, Any]:
    """The ``compile_model`` properties among ``knobs`` (a knob left out
    stays at OpenVINO's choice; a defaults run sets none)."""
    return {k: knobs[k] for k in PROPERTIES if k in knobs}


def compile_model(core: Any, model: Any, knobs: Mapping[str, Any]) -> Any:
    """``model`` compiled for the CPU under ``knobs``' properties.

    Raises
    ------
    ValueError
        OpenVINO refused a property (its first line, with the properties
        named).
    """
    props = compile_properties(knobs)
    try:
        return core.compile_model(model, "CPU", props)
    except (RuntimeError, TypeError, ValueError) as e:
        named = ", ".join(f"{k}={v!r}" for k, v in props.items()) or "none"
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"OpenVINO refused the properties ({named}): {first}") from None


def reported_properties(compiled: Any) -> dict[str, Any]:
    """What the compiled model holds, as OpenVINO reports it (plain values)."""
    out: dict[str, Any] = {}
    for key in REPORTED:
        try:
            value = compiled.get_property(key)
        except RuntimeError:  # a property this version does not have
            out[key] = None
            continue
        if isinstance(value, (bool, int, float)):
            out[key] = value
        elif isinstance(value, (list, tuple)):
            out[key] = [str(v) for v in value]
        else:  # enums and element types: their name (PerformanceMode.LATENCY -> LATENCY)
            text = str(value)
            out[key] = text.split(".")[-1] if "." in text and " " not in text else \
                getattr(value, "type_name", text)
    return out


def _literal(value: Any) -> str:
    return repr(int(value)) if isinstance(value, int) and not isinstance(value, bool) \
        else repr(value)


def code(knobs: Mapping[str, Any]) -> list[str]:
    """The lines that compile a user's model with ``knobs``' properties, as
    pyparbench's runs do (``compiled``, one infer request per stream)."""
    props = compile_properties(knobs)
    lines = ["import openvino as ov", "core = ov.Core()", "config = {"]
    lines += [f"    {k!r}: {_literal(v)}," for k, v in props.items()]
    lines += ["}",
              ('compiled = core.compile_model(core.read_model("model.onnx"), "CPU", config)'
               "  # your model"),
              "request = compiled.create_infer_request()"]
    return lines


def benchmark_app_command(knobs: Mapping[str, Any], model: str = "model.onnx") -> list[str]:
    """``benchmark_app``'s arguments for the same properties: ``-hint none``
    with the streams, threads and pinning, or the hint of a preset; the
    precision always."""
    args = ["benchmark_app", "-m", model, "-d", "CPU"]
    hint = knobs.get("PERFORMANCE_HINT")
    args += ["-hint", str(hint).lower() if hint else "none"]
    if not hint:
        if "NUM_STREAMS" in knobs:
            args += ["-nstreams", str(int(knobs["NUM_STREAMS"]))]
        if "INFERENCE_NUM_THREADS" in knobs:
            args += ["-nthreads", str(int(knobs["INFERENCE_NUM_THREADS"]))]
        if "ENABLE_CPU_PINNING" in knobs:
            args += ["-pin", "YES" if knobs["ENABLE_CPU_PINNING"] else "NO"]
    if "INFERENCE_PRECISION_HINT" in knobs:
        args += ["-infer_precision", str(knobs["INFERENCE_PRECISION_HINT"])]
    return args


def benchmark_app_line(knobs: Mapping[str, Any], model: str = "model.onnx") -> str:
    """:func:`benchmark_app_command` as one shell line. benchmark_app has no
    flag for hyper-threading: the CPUs the process is confined to decide
    which logical processors its streams use."""
    return " ".join(shlex.quote(a) for a in benchmark_app_command(knobs, model))
