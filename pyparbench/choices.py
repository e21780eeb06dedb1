"""The names of the parallelism knobs' values and of the presets, listed once.

Settings validate against these, the CLI offers them as choices, the suite's
grid crosses them, and the native core's own lists (``_core.ops.LIBRARIES``,
``_core.threading`` pool kinds) are checked against them by the tests.
"""

from __future__ import annotations

__all__ = ["AFFINITIES", "DEFAULT_MODES", "FRAMEWORKS", "GRAPH_OPTS", "GRAPH_PASSES", "LIBRARIES",
           "MODES", "OPERATORS", "PLACEMENTS", "POOLS", "PRECISIONS", "PRESETS", "SCHEDULERS",
           "check_framework", "check_mode", "check_precision", "graph_opt_passes"]

SCHEDULERS = ("sync", "async")
OPERATORS = ("library", "framework")
LIBRARIES = ("onednn", "eigen", "blas")
POOLS = ("openmp", "std", "eigen")
AFFINITIES = ("none", "compact", "scatter")
PLACEMENTS = ("shared", "per-socket")
PRESETS = ("tensorflow", "intel", "tftuner")
# The number format of a whole run (Settings.precision): fp32; bf16
# weights and matrix-op activations with fp32 accumulation and outputs; or
# int8 convolutions and linear layers (u8 activations on calibrated grids,
# s8 weights per output channel, s32 accumulation, fp32 outputs).
PRECISIONS = ("fp32", "bf16", "int8")
# The frameworks a model also runs in, each with its modes (how it runs the
# graph) and the modes it is measured in by default, the first when none is
# named (pyparbench.frameworks).
FRAMEWORKS = ("tensorflow", "torch", "onnxruntime", "openvino")
MODES: dict[str, tuple[str, ...]] = {
    "tensorflow": ("function", "xla"),
    "torch": ("eager", "script", "compile"),
    "onnxruntime": ("all", "extended", "basic", "disabled"),
    # OpenVINO's mode is its inference precision: set, or with "auto" left
    # to OpenVINO (bf16 where the CPU has it), as its users get it.
    "openvino": ("f32", "bf16", "f16", "auto"),
}
DEFAULT_MODES: dict[str, tuple[str, ...]] = {
    "tensorflow": ("function",), "torch": ("eager", "script"), "onnxruntime": ("all",),
    "openvino": ("f32",)}
# The graph optimisation passes (pyparbench/graph/passes/), in pipeline order.
GRAPH_PASSES = ("bn_fold", "residual", "activation", "layout", "blocked", "subsample",
                "im2col", "microbatch", "memory")
# Settings.graph_opt: no pass, the whole pipeline, or one pass alone (or
# several joined by "+", see graph_opt_passes).
GRAPH_OPTS = ("none", "full", *GRAPH_PASSES)


def check_framework(name: object) -> str:
    """``name`` if it is a framework name, else ValueError listing them."""
    if name not in FRAMEWORKS:
        raise ValueError(f"unknown framework {name!r}; valid: {', '.join(FRAMEWORKS)}")
    return str(name)


def check_mode(framework: str, mode: object) -> str:
    """``mode`` if the framework has it (None: its first default), else ValueError."""
    check_framework(framework)
    if mode is None:
        return DEFAULT_MODES[framework][0]
    if mode not in MODES[framework]:
        raise ValueError(f"unknown {framework} mode {mode!r}; valid: "
                         f"{', '.join(MODES[framework])}")
    return str(mode)


def check_precision(value: object) -> str:
    """``value`` if it is a run precision, else ValueError naming it and the valid ones."""
    if value not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(map(repr, PRECISIONS))}, "
                         f"got {value!r}")
    return str(value)


def graph_opt_passes(value: object) -> tuple[str, ...]:
    """The passes a Settings.graph_opt value names, in pipeline order: ``"none"``,
    ``"full"``, one pass, or passes joined by ``"+"`` (``"bn_fold+layout"``; the
    full pipeline less the memory pass keeps every node's value readable).
    ValueError naming the value otherwise."""
    parts = value.split("+") if isinstance(value, str) else []
    if value in ("none", "full") or (parts and len(set(parts)) == len(parts)
                                     and all(p in GRAPH_PASSES for p in parts)):
        if value == "none":
            return ()
        return GRAPH_PASSES if value == "full" else tuple(p for p in GRAPH_PASSES if p in parts)
    raise ValueError(f"graph_opt must be one of {', '.join(map(repr, GRAPH_OPTS))} or passes "
                     f"joined by '+' (each once), got {value!r}")
