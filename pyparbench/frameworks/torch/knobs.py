"""PyTorch's process-wide knobs: thread counts and the convolution library,
applied in a child (:func:`configure`) or written as the code a user pastes
(:func:`code`), both from the same knobs (:mod:`pyparbench.frameworks.mapping`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["code", "configure", "report"]


def _apply(call: str, set_: Callable[[], object]) -> None:
    """Run one setter; a value PyTorch refuses is a ValueError naming the call."""
    try:
        set_()
    except (RuntimeError, ValueError, TypeError) as e:
        raise ValueError(f"PyTorch refused {call}: {e}") from None


def configure(torch_mod: Any, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Thread counts and the convolution library, set before any work; returns
    what PyTorch reports back.

    Raises
    ------
    ValueError
        PyTorch refused a value (its message, with the call named).
    """
    n, inter = int(knobs["num_threads"]), int(knobs["num_interop_threads"])
    _apply(f"torch.set_num_threads({n})", lambda: torch_mod.set_num_threads(n))
    _apply(f"torch.set_num_interop_threads({inter})",
           lambda: torch_mod.set_num_interop_threads(inter))
    torch_mod.backends.mkldnn.enabled = bool(knobs["mkldnn"])
    return report(torch_mod)


def report(torch_mod: Any) -> dict[str, Any]:
    """What PyTorch reports: its thread counts, convolution library, version."""
    return {"num_threads": torch_mod.get_num_threads(),
            "num_interop_threads": torch_mod.get_num_interop_threads(),
            "mkldnn": bool(torch_mod.backends.mkldnn.enabled),
            "openmp": bool(torch_mod.backends.openmp.is_available()),
            "version": torch_mod.__version__}


def code(knobs: Mapping[str, Any]) -> list[str]:
    """The lines that set ``knobs`` in a user's program, as :func:`configure` does."""
    lines = ["import torch",
             f"torch.set_num_threads({int(knobs['num_threads'])})",
             f"torch.set_num_interop_threads({int(knobs['num_interop_threads'])})",
             f"torch.backends.mkldnn.enabled = {bool(knobs['mkldnn'])}"]
    if knobs.get("bf16_mode"):
        lines.append('# and call the model under torch.autocast("cpu", dtype=torch.bfloat16)')
    if knobs.get("fork_branches"):
        lines.append("# run each parallel branch with torch.jit.fork in the scripted model")
    return lines
