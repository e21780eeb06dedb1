"""A graph's ONNX model (:mod:`.translate`) run by ONNX Runtime's CPU provider.

A graph imported from a user's file (``meta["onnx_file"]``, see
:mod:`pyparbench.models.files`) runs as that file, unchanged: the model the
user serves, not a translation of what the importer made of it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from pyparbench.frameworks._common import Array, Profile, python_loop
from pyparbench.frameworks.onnxruntime.knobs import (
    open_session,
    reported_options,
    session_options,
)
from pyparbench.frameworks.onnxruntime.profile import file_ops, read_profile
from pyparbench.frameworks.onnxruntime.translate import build_onnx
from pyparbench.frameworks.onnxruntime.versions import probe
from pyparbench.graph import Graph

__all__ = ["OrtModel", "prepare"]


class OrtModel:
    """A graph as an ONNX Runtime inference session, in the IR version and
    opset the runtime was probed to read (:func:`.versions.probe`)."""

    def __init__(self, ort: Any, graph: Graph, inputs: Mapping[str, Array],
                 knobs: Mapping[str, Any]) -> None:
        self._ort = ort
        self._knobs = dict(knobs)
        self.graph = graph
        versions = probe(ort)  # NoCommonVersion: one line, before any work
        self._dir = tempfile.TemporaryDirectory(prefix="ppb-onnx-")
        source = graph.meta.get("onnx_file")
        # The file's own shapes (a graph's input has them; a view keeps a caller's
        # flat feeds working).
        shapes: dict[str, Any] = dict(graph.meta.get("onnx_input_shapes", {})) if source else {}
        self._model: str | bytes
        if source:
            self._model = str(source)
        else:
            built = build_onnx(graph, self._dir.name, versions)
            self._model = built if isinstance(built, str) else built.SerializeToString()
        so = session_options(ort, knobs)
        self.session = open_session(ort, self._model, so, knobs)
        self.info: dict[str, Any] = {"session_options": reported_options(so),
                                     **versions.as_dict()}
        if source:
            self.info["onnx_file"] = str(source)
        names = [graph.nodes[i].name for i in graph.inputs]
        self._feeds = {n: np.ascontiguousarray(inputs[n]).reshape(shapes.get(n, inputs[n].shape))
                       for n in names}
        self._out_names = [o.name for o in self.session.get_outputs()]

    def step(self) -> None:
        self.session.run(self._out_names, self._feeds)

    def time(self, repeats: int, warmup: int) -> list[float]:
        return python_loop(self.step, repeats, warmup)

    def outputs(self) -> dict[str, Array]:
        outs = self.session.run(self._out_names, self._feeds)
        if self.graph.meta.get("onnx_file"):  # the file's outputs, by their names
            return {n: np.asarray(v) for n, v in zip(self._out_names, outs, strict=True)}
        return {self.graph.nodes[o].name: np.asarray(v)
                for o, v in zip(self.graph.outputs, outs, strict=True)}

    def profile(self, iterations: int) -> Profile:
        """Node kernel times from ONNX Runtime's profiler (a second session,
        same options, profiling on)."""
        ort = self._ort
        with tempfile.TemporaryDirectory(prefix="ppb-ort-profile-") as tmp:
            so = session_options(ort, self._knobs, profile_prefix=os.path.join(tmp, "ort"))
            sess = ort.InferenceSession(self._model, so, providers=["CPUExecutionProvider"])
            for _ in range(iterations + 1):
                sess.run(self._out_names, self._feeds)
            return read_profile(sess.end_profiling(), self.graph, self._file_nodes())

    def _file_nodes(self) -> dict[str, str] | None:
        """A user's file: its node names' graph op types (None: a translated graph)."""
        source = self.graph.meta.get("onnx_file")
        if not source:
            return None
        import onnx

        proto = onnx.load(str(source), load_external_data=False)
        return file_ops([(n.name, n.op_type, list(n.output)) for n in proto.graph.node],
                        self.graph)


def prepare(ort: Any, graph: Graph, inputs: Mapping[str, Array], knobs: Mapping[str, Any]
            ) -> OrtModel:
    return OrtModel(ort, graph, inputs, knobs)
