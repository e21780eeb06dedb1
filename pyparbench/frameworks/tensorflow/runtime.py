"""A graph as one ``tf.function`` run the way TensorFlow's users run it.

The forward pass of :mod:`.translate` in a ``tf.function`` (XLA off unless
the mode is ``xla``), called from Python one batch at a time; outputs come
back NCHW as the graph's; the profile is TensorFlow's own (:mod:`.profile`).
At bf16 grappler rewrites the function's graph (knob
``auto_mixed_precision_onednn_bfloat16``, set process-wide by
:mod:`.knobs`): bf16 casts around the ops it has oneDNN bf16 kernels for,
outputs float32.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pyparbench.frameworks._common import Array, Profile, aggregate, python_loop
from pyparbench.frameworks.precision import framework_precision
from pyparbench.frameworks.tensorflow import profile as tf_profile
from pyparbench.frameworks.tensorflow.knobs import BF16_OPTION
from pyparbench.frameworks.tensorflow.translate import GraphFunction
from pyparbench.graph import Graph

__all__ = ["TFModel", "prepare"]


class TFModel:
    """A graph as a ``tf.function`` over ``tf.Variable`` weights."""

    def __init__(self, tf: Any, graph: Graph, inputs: Mapping[str, Array],
                 knobs: Mapping[str, Any]) -> None:
        self._tf = tf
        self.graph = graph
        jit = bool(knobs["jit_compile"])
        self.info: dict[str, Any] = {"layout": "NHWC", "jit_compile": jit}
        # What grappler was told, read back (a defaults run sets nothing).
        amp = bool(tf.config.optimizer.get_experimental_options().get(BF16_OPTION))
        self.info["framework_precision"] = framework_precision(
            "bf16" if amp else "fp32",
            f"grappler {BF16_OPTION}" if amp else "fp32 function", **{BF16_OPTION: amp})
        self.forward = GraphFunction(tf, graph)
        self._feeds = self.forward.feeds(inputs)
        self._fn = tf.function(self.forward, jit_compile=jit)
        # Not set (TensorFlow's defaults): its default, synchronous.
        self._sync = bool(knobs.get("synchronous_execution", True))

    def step(self) -> None:
        self._fn(*self._feeds)
        if not self._sync:
            from tensorflow.python.eager import context  # type: ignore[import-untyped]

            context.async_wait()

    def time(self, repeats: int, warmup: int) -> list[float]:
        return python_loop(self.step, repeats, warmup)

    def outputs(self) -> dict[str, Array]:
        outs = self._fn(*self._feeds)
        return {self.graph.nodes[o].name: np.asarray(t.numpy())
                for o, t in zip(self.graph.outputs, outs, strict=True)}

    def profile(self, iterations: int, parser: str = "trace_json") -> Profile:
        """Kernel times from ``tf.profiler.experimental``'s trace; ``parser``
        "trace_json" (the trace viewer's JSON) or "xplane" (the raw XSpace
        protobuf, the fallback where the converter is missing)."""
        events, windows, used = tf_profile.record(self._tf, self.step, iterations, parser)
        self.info["profile_parser"] = used
        jit = bool(self.info["jit_compile"])
        return aggregate([(start, tf_profile.charge(self.graph, name, kind, jit), kind, ns)
                          for start, name, kind, ns in events
                          if kind not in tf_profile.CONTAINERS], windows)


def prepare(tf: Any, graph: Graph, inputs: Mapping[str, Array], knobs: Mapping[str, Any]
            ) -> TFModel:
    return TFModel(tf, graph, inputs, knobs)
