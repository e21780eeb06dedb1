"""A graph's ONNX model read by OpenVINO's ONNX front end and compiled for its CPU plugin.

A built-in graph is the ONNX model ONNX Runtime runs
(:func:`pyparbench.frameworks.onnxruntime.translate.build_onnx`); a graph
imported from a user's file (``meta["onnx_file"]``) runs as that file,
unchanged, its inputs fixed to the run's shapes (``Model.reshape``, as
``benchmark_app -shape`` does).

A step runs one infer request per stream, all started together and all
waited for: with one stream (the settings' one instance) that is one
synchronous inference; with S streams, S copies of the batch at once, as
S instances of the native executor run.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from pyparbench.frameworks._common import Array, Profile, python_loop
from pyparbench.frameworks.onnxruntime.translate import build_onnx
from pyparbench.frameworks.onnxruntime.versions import model_versions
from pyparbench.frameworks.precision import framework_precision
from pyparbench.frameworks.openvino.knobs import (
    compile_model,
    compile_properties,
    reported_properties,
)
from pyparbench.frameworks.openvino.profile import (
    Counter,
    FileNodes,
    file_nodes,
    read_counters,
)
from pyparbench.graph import Graph

__all__ = ["OvModel", "prepare"]


class OvModel:
    """A graph compiled by OpenVINO for the CPU, with one infer request per
    stream (``OPTIMAL_NUMBER_OF_INFER_REQUESTS`` when the streams are left
    to OpenVINO's tuner)."""

    def __init__(self, ov: Any, graph: Graph, inputs: Mapping[str, Array],
                 knobs: Mapping[str, Any]) -> None:
        self._ov = ov
        self._knobs = dict(knobs)
        self.graph = graph
        self._dir = tempfile.TemporaryDirectory(prefix="ppb-openvino-")
        source = graph.meta.get("onnx_file")
        shapes: dict[str, Any] = dict(graph.meta.get("onnx_input_shapes", {})) if source else {}
        if source:
            self.path = str(source)
        else:
            built = build_onnx(graph, self._dir.name, model_versions())
            if isinstance(built, str):
                self.path = built
            else:
                self.path = os.path.join(self._dir.name, "model.onnx")
                with open(self.path, "wb") as fh:
                    fh.write(built.SerializeToString())
        self.core = ov.Core()
        names = [graph.nodes[i].name for i in graph.inputs]
        self._feeds = {n: np.ascontiguousarray(inputs[n]).reshape(shapes.get(n, inputs[n].shape))
                       for n in names}
        self.model = self.core.read_model(self.path)
        if source:  # a file's dynamic dimensions fixed to this run's inputs
            self.model.reshape({n: list(a.shape) for n, a in self._feeds.items()})
        self.compiled = compile_model(self.core, self.model, knobs)
        reported = reported_properties(self.compiled)
        streams = reported.get("NUM_STREAMS")
        requests = int(streams) if isinstance(streams, int) and streams > 0 else \
            int(reported.get("OPTIMAL_NUMBER_OF_INFER_REQUESTS") or 1)
        self.requests = [self.compiled.create_infer_request() for _ in range(requests)]
        self._out_names = [o.get_any_name() for o in self.compiled.outputs]
        for r in self.requests:
            for n, a in self._feeds.items():
                r.set_tensor(n, ov.Tensor(a))
        self.info: dict[str, Any] = {"compiled_properties": reported, "requests": requests,
                                     "model_file": self.path}
        # The precision the compiled model holds, read back (None: a defaults run's pick).
        hint = reported.get("INFERENCE_PRECISION_HINT")
        asked = knobs.get("INFERENCE_PRECISION_HINT")
        self.info["framework_precision"] = framework_precision(
            "bf16" if hint == "bf16" else "fp32" if hint == "f32" else str(hint),
            f"INFERENCE_PRECISION_HINT={asked}" if asked else "OpenVINO's own pick",
            inference_precision_hint=hint)
        if source:
            self.info["onnx_file"] = str(source)

    def step(self) -> None:
        if len(self.requests) == 1:
            self.requests[0].infer()
            return
        for r in self.requests:
            r.start_async()
        for r in self.requests:
            r.wait()

    def time(self, repeats: int, warmup: int) -> list[float]:
        return python_loop(self.step, repeats, warmup)

    def outputs(self) -> dict[str, Array]:
        r = self.requests[0]
        r.infer()
        outs = [np.array(r.get_output_tensor(i).data) for i in range(len(self._out_names))]
        if self.graph.meta.get("onnx_file"):  # the file's outputs, by their names
            return dict(zip(self._out_names, outs, strict=True))
        return {self.graph.nodes[o].name: v
                for o, v in zip(self.graph.outputs, outs, strict=True)}

    def profile(self, iterations: int) -> Profile:
        """Node times from OpenVINO's performance counters (the model
        compiled again with ``PERF_COUNT``, same properties): one request's
        counters read after its first run and after the profiled ones."""
        compiled = self.core.compile_model(self.model, "CPU", {
            **compile_properties(self._knobs), "PERF_COUNT": True})
        request = compiled.create_infer_request()
        for n, a in self._feeds.items():
            request.set_tensor(n, self._ov.Tensor(a))
        request.infer()  # the first run, which plans memory, is left out
        before = _counters(request)
        walls = []
        for _ in range(iterations):
            t0 = time.perf_counter_ns()
            request.infer()
            walls.append(float(time.perf_counter_ns() - t0))
        return read_counters(before, _counters(request), iterations, walls, self.graph,
                             self._file_nodes())

    def _file_nodes(self) -> FileNodes | None:
        source = self.graph.meta.get("onnx_file")
        return file_nodes(str(source), self.graph) if source else None


def _counters(request: Any) -> list[Counter]:
    return [(str(p.node_name), str(p.node_type), str(p.exec_type),
             p.real_time.total_seconds() * 1e9, str(p.status))
            for p in request.get_profiling_info()]


def prepare(ov: Any, graph: Graph, inputs: Mapping[str, Array], knobs: Mapping[str, Any]
            ) -> OvModel:
    return OvModel(ov, graph, inputs, knobs)
