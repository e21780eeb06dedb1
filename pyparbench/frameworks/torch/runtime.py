"""A graph's ``nn.Module`` (:mod:`.translate`) run in one of PyTorch's modes.

* ``eager``: the module in eval mode, called under ``torch.inference_mode``;
* ``script``: ``torch.jit.freeze(torch.jit.script(module.eval()))``, called
  under ``torch.inference_mode``; with the async scheduler and inter-op
  workers > 1 (knob ``fork_branches``), parallel chains are forked;
* ``compile``: ``torch.compile(module)`` (inductor, default options),
  called under ``torch.inference_mode``; the child sets
  ``TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1`` so that the profiler sees
  inductor's own kernels.

At bf16 (knob ``bf16_mode``, :mod:`pyparbench.frameworks.precision`) each
call runs under ``torch.autocast("cpu", dtype=torch.bfloat16)``; outputs
come back float32.

A user's ONNX file with the PyTorch module it came from attached
(:mod:`pyparbench.models.modules`) runs that module's exported program
instead of a translation (script mode traces it: an exported program does
not script).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from pyparbench.choices import MODES as FRAMEWORK_MODES
from pyparbench.frameworks._common import Array, Profile, python_loop
from pyparbench.frameworks.precision import TORCH_BF16_MODE, framework_precision
from pyparbench.frameworks.torch import profile as torch_profile
from pyparbench.frameworks.torch.translate import build_module
from pyparbench.graph import Graph
from pyparbench.models.modules import attached_module

__all__ = ["MODES", "TorchModel", "prepare"]

MODES = FRAMEWORK_MODES["torch"]


class TorchModel:
    """A graph as a PyTorch module in one mode (see the module docstring);
    :attr:`source` holds the module's code."""

    def __init__(self, graph: Graph, inputs: Mapping[str, Array], mode: str,
                 knobs: Mapping[str, Any]) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown torch mode {mode!r}; valid: {', '.join(MODES)}")
        self.graph = graph
        self.mode = mode
        self.bf16_mode: str | None = knobs.get("bf16_mode")
        if self.bf16_mode not in (None, TORCH_BF16_MODE):
            raise ValueError(f"unknown torch bf16_mode {self.bf16_mode!r}; valid: "
                             f"{TORCH_BF16_MODE}")
        fork = bool(knobs.get("fork_branches")) and mode == "script"
        attached = attached_module(str(graph.meta.get("model", "")))
        shapes = graph.meta.get("onnx_input_shapes", {}) if attached is not None else {}
        # An attached module takes the file's inputs in the file's shapes.
        self._feeds = [torch.from_numpy(np.ascontiguousarray(
            inputs[name]).reshape(shapes.get(name, inputs[name].shape)))
            for name in (graph.nodes[i].name for i in graph.inputs)]
        module: Any
        if attached is not None:
            module = torch.export.load(str(attached)).module()
            self.source = f"# the module attached for {graph.name}: {attached}\n"
        else:
            module, self.source = build_module(graph, fork=fork)
        self.info: dict[str, Any] = {"forked_chains": self.source.count("torch.jit.fork(")}
        self.info["framework_precision"] = self._precision()
        t0 = time.perf_counter()
        self._model: Any
        try:
            self._model = self._in_mode(module, attached is not None)
            with torch.inference_mode(), self._autocast():
                self._model(*self._feeds)  # tracing, profiling runs, compilation
        except Exception as e:
            if attached is None:
                raise
            raise ValueError(f"the module attached for {graph.name} does not run at batch "
                             f"{self._feeds[0].shape[0]} ({type(e).__name__}: "
                             f"{str(e).splitlines()[0][:200]}): attach it at that batch, "
                             "or one that torch.export can make dynamic") from None
        self.info["first_call_s"] = time.perf_counter() - t0

    def _precision(self) -> dict[str, Any]:
        if self.bf16_mode is None:
            return framework_precision("fp32", "fp32 module")
        return framework_precision("bf16", "torch.autocast('cpu', dtype=torch.bfloat16)",
                                   bf16_mode=self.bf16_mode)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The autocast region of each call at bf16 (else none)."""
        if self.bf16_mode == "autocast":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _in_mode(self, module: Any, exported: bool) -> Any:
        if self.mode == "eager":
            return module
        if self.mode == "script" and exported:  # an exported program traces, not scripts
            traced = torch.jit.trace(module, tuple(self._feeds))  # type: ignore[no-untyped-call]
            return torch.jit.freeze(traced.eval())
        if self.mode == "script":
            return torch.jit.freeze(torch.jit.script(module))
        return torch.compile(module)

    def step(self) -> None:
        with self._autocast():
            self._model(*self._feeds)

    def time(self, repeats: int, warmup: int) -> list[float]:
        with torch.inference_mode():
            return python_loop(self.step, repeats, warmup)

    def outputs(self) -> dict[str, Array]:
        with torch.inference_mode(), self._autocast():
            out = self._model(*self._feeds)
        outs = [out] if isinstance(out, torch.Tensor) else list(out)
        return {self.graph.nodes[o].name: t.float().numpy().copy()
                for o, t in zip(self.graph.outputs, outs, strict=True)}

    def profile(self, iterations: int) -> Profile:
        """Kernel times from ``torch.profiler`` (:func:`.profile.record`)."""
        return torch_profile.record(self.step, iterations)


def prepare(torch_mod: Any, graph: Graph, inputs: Mapping[str, Array], mode: str,
            knobs: Mapping[str, Any]) -> TorchModel:
    return TorchModel(graph, inputs, mode, knobs)
