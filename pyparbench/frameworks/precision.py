"""The run's precision (``Settings.precision``) as each framework takes it.

At ``bf16`` each framework runs the way its users get bf16 on a CPU:

* PyTorch: each call under ``torch.autocast("cpu", dtype=torch.bfloat16)``
  (convolutions and matrix products in bf16, outputs cast back to float32).
  oneDNN's fp32 precision (``torch.backends.mkldnn.matmul.fp32_precision =
  "bf16"``, ``conv`` alike) is the other way PyTorch offers, but in PyTorch
  2.13 on x86 it leaves nn.Linear and nn.Conv2d at fp32 (their outputs
  unchanged to 1e-6), so it is not a bf16 run (README, the frameworks at
  bf16);
* TensorFlow: grappler's oneDNN auto-mixed-precision
  (``auto_mixed_precision_onednn_bfloat16``), which rewrites the
  ``tf.function``'s graph with casts around the ops it has bf16 kernels for;
  an XLA-compiled function (mode ``xla``) is not rewritten, so XLA at bf16
  is refused;
* OpenVINO: ``INFERENCE_PRECISION_HINT`` bf16 (f32 at fp32), always set
  but in mode ``auto`` (fp32 only), where OpenVINO picks it as its users
  get it (bf16 on a CPU with bf16 dot products) and the pick is read back;
* ONNX Runtime: none. Its CPU provider has no bf16 kernels for the
  graph's ops on x86, so a bf16 run is refused (:func:`unsupported`), never
  run at fp32 under a bf16 label.

At ``int8`` no framework runs: pyparbench's int8 graph (calibrated grids,
quantized_conv2d / quantized_linear nodes, :mod:`pyparbench.graph.passes.quantize`)
has no translation into any of them, so an int8 framework run is refused
naming the framework and the model (:func:`unsupported`); int8 runs native.

A CPU without bf16 instructions (AVX512_BF16, AMX-BF16, Arm's BF16) still
runs each framework's bf16 mode, emulated by oneDNN (conversions around fp32
arithmetic) where it has AVX-512; :func:`cpu_bf16` names what this CPU has,
and each bf16 run records it.
"""

from __future__ import annotations

from typing import Any

from pyparbench.choices import check_framework
from pyparbench.cpuinfo import cpuinfo_value, read_cpuinfo

__all__ = ["BF16_FLAGS", "TORCH_BF16_MODE", "UNSUPPORTED_AT", "cpu_bf16", "framework_precision",
           "unsupported"]

# How PyTorch runs an fp32 module at bf16 (the knob's value).
TORCH_BF16_MODE = "autocast"
# The CPU flags (/proc/cpuinfo) of native bf16 arithmetic: x86's dot
# products and tile unit, Arm's BFDOT / BFMMLA.
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
# How each refusal of a precision begins (a row's reason in tables).
UNSUPPORTED_AT = "unsupported at "
# Why ONNX Runtime runs no bf16 here.
_ORT_NO_BF16 = ("ONNX Runtime's CPU execution provider has no bf16 kernels for the graph's "
                "convolutions and matrix products on x86 (they run fp32 only)")


def unsupported(framework: str, precision: str, mode: str | None = None,
                model: str | None = None) -> str | None:
    """Why ``framework`` (in ``mode``) cannot run at ``precision`` (None: it
    can); ``model`` the model's name, where known, for the reason.

    Raises
    ------
    ValueError
        An unknown framework.
    """
    check_framework(framework)
    if precision == "int8":
        what = f"built-in model {model!r}" if model else "pyparbench's graphs"
        return (f"{UNSUPPORTED_AT}int8: framework {framework} has no int8 translation of "
                f"{what} (its calibrated int8 nodes are pyparbench's own); run native")
    if precision != "bf16":
        return None
    if framework == "onnxruntime":
        return f"{UNSUPPORTED_AT}bf16: {_ORT_NO_BF16}"
    if framework == "tensorflow" and mode == "xla":
        return (f"{UNSUPPORTED_AT}bf16: grappler's bf16 rewrite does not reach an XLA-compiled "
                "function (it would run fp32); use mode 'function'")
    return None


def cpu_bf16(cpuinfo: str | None = None) -> list[str]:
    """This CPU's bf16 flags among :data:`BF16_FLAGS` (empty: bf16 is
    emulated); ``cpuinfo`` a /proc/cpuinfo text (default: this machine's)."""
    text = read_cpuinfo() if cpuinfo is None else cpuinfo
    # x86 lists "flags", Arm "Features".
    flags = set((cpuinfo_value(text, "flags") or cpuinfo_value(text, "Features") or "").split())
    return [f for f in BF16_FLAGS if f in flags]


def framework_precision(precision: str, how: str, **read_back: Any) -> dict[str, Any]:
    """A framework run's record of its precision: ``precision``, ``how`` the
    framework was asked for it, what it reports back, and (at bf16) whether
    this CPU computes bf16 natively or the framework emulates it."""
    out: dict[str, Any] = {"precision": precision, "how": how, **read_back}
    if precision == "bf16":
        flags = cpu_bf16()
        out["cpu_bf16"] = flags
        out["native_bf16"] = bool(flags)
    return out
