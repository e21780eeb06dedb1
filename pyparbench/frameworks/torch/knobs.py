"""PyTorch's process-wide knobs: thread counts and the convolution library."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["configure"]


def configure(torch_mod: Any, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Thread counts and the convolution library, set before any work; returns
    what PyTorch reports back."""
    torch_mod.set_num_threads(int(knobs["num_threads"]))
    torch_mod.set_num_interop_threads(int(knobs["num_interop_threads"]))
    torch_mod.backends.mkldnn.enabled = bool(knobs["mkldnn"])
    return {"num_threads": torch_mod.get_num_threads(),
            "num_interop_threads": torch_mod.get_num_interop_threads(),
            "mkldnn": bool(torch_mod.backends.mkldnn.enabled),
            "openmp": bool(torch_mod.backends.openmp.is_available()),
            "version": torch_mod.__version__}
