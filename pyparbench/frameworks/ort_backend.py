"""Any Graph as an ONNX model run by ONNX Runtime's CPU provider.

The model is built with ``onnx.helper`` (opset 17), NCHW, the graph's
parameters as initializers, one or a few ONNX nodes per graph node named
after it (``n<id>_<name>``, so that profiler events lead back to the node):
Conv, Gemm (2-D linear, as exporters write it) or MatMul + Add, Gather +
ReduceSum / ReduceMean (embedding bags), MaxPool / AveragePool,
GlobalAveragePool + Flatten, BatchNormalization, LayerNormalization,
Softmax, Reshape, Transpose, Concat, Gather (DLRM's triangle), and GELU
written as exporters write it (x * 0.5 * (1 + Erf(x / sqrt 2)), which ONNX
Runtime fuses). The session's thread counts, execution mode, optimisation
level, spinning and thread affinities come from the settings.

This module is imported only in a framework child process, after ONNX
Runtime.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from pyparbench.frameworks._common import (
    Array,
    Profile,
    aggregate,
    node_of_scope,
    pool_geometry,
    python_loop,
    scope_name,
)
from pyparbench.graph import Graph, Node

__all__ = ["OrtModel", "build_onnx", "configure", "prepare", "session_options"]

OPSET = 17
# Above this many bytes of weights the model is saved with its weights in a
# side file (a protobuf message cannot pass 2 GiB).
EXTERNAL_DATA_BYTES = 1 << 30
# ONNX Runtime's kernel op name -> graph op type, where the node's own is not
# the one the kernel computes (fusions).
_FUSED = {"FusedConv": "conv2d", "Conv": "conv2d", "NhwcFusedConv": "conv2d",
          "FusedGemm": "linear", "Gemm": "linear", "FusedMatMul": "matmul", "MatMul": "matmul",
          "QuickGelu": "eltwise", "Gelu": "eltwise", "BiasGelu": "eltwise",
          "LayerNormalization": "layer_norm", "SkipLayerNormalization": "layer_norm",
          "SkipSimplifiedLayerNormalization": "layer_norm"}


def configure(ort: Any, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """ONNX Runtime has no process-wide knobs: sessions carry them."""
    ort.set_default_logger_severity(3)
    return {"version": ort.__version__, "providers": ort.get_available_providers()}


def session_options(ort: Any, knobs: Mapping[str, Any], profile_prefix: str | None = None
                    ) -> Any:
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(knobs["intra_op_num_threads"])
    so.inter_op_num_threads = int(knobs["inter_op_num_threads"])
    so.execution_mode = getattr(ort.ExecutionMode, knobs["execution_mode"])
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                          knobs["graph_optimization_level"])
    for key in ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning",
                "session.intra_op_thread_affinities"):
        if key in knobs and knobs[key] != "":
            so.add_session_config_entry(key, str(knobs[key]))
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return so


def reported_options(so: Any) -> dict[str, Any]:
    """What the session options hold, as ONNX Runtime reports them."""
    out: dict[str, Any] = {
        "intra_op_num_threads": so.intra_op_num_threads,
        "inter_op_num_threads": so.inter_op_num_threads,
        "execution_mode": str(so.execution_mode).split(".")[-1],
        "graph_optimization_level": str(so.graph_optimization_level).split(".")[-1],
    }
    for key in ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning",
                "session.intra_op_thread_affinities"):
        try:
            out[key] = so.get_session_config_entry(key)
        except RuntimeError:  # an entry never set: ONNX Runtime raises
            out[key] = None
    return out


class _Builder:
    def __init__(self, graph: Graph) -> None:
        from onnx import TensorProto, helper, numpy_helper

        self.h = helper
        self.np_helper = numpy_helper
        self.tp = TensorProto
        self.graph = graph
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.names: dict[int, str] = {}
        self.bytes = 0

    def init(self, name: str, arr: Array) -> str:
        a = np.ascontiguousarray(arr)
        self.bytes += a.nbytes
        self.inits.append(self.np_helper.from_array(a, name))
        return name

    def node(self, kind: str, ins: list[str], name: str, **attrs: Any) -> str:
        out = f"{name}:out"
        self.nodes.append(self.h.make_node(kind, ins, [out], name=name, **attrs))
        return out

    def add(self, n: Node) -> None:
        a = n.attrs
        s = scope_name(n)
        ins = [self.names[j] for j in n.inputs]
        x = ins[0] if ins else ""
        p = n.params
        op = n.op
        y: str
        if op == "conv2d":
            args = [x, self.init(f"{s}.weight", np.asarray(p["weight"]))]
            if "bias" in p:
                args.append(self.init(f"{s}.bias", np.asarray(p["bias"])))
            pt, pb, pl, pr = a["padding"]
            y = self.node("Conv", args, s, kernel_shape=list(p.specs["weight"].shape[2:]),
                          strides=list(a["stride"]), pads=[pt, pl, pb, pr],
                          dilations=list(a["dilation"]), group=a["groups"])
            if a["relu"]:
                y = self.node("Relu", [y], f"{s}.relu")
        elif op == "linear":
            w = np.asarray(p["weight"])
            rank = len(self.graph.nodes[n.inputs[0]].shape)
            if rank == 2:
                args = [x, self.init(f"{s}.weight", w)]
                if "bias" in p:
                    args.append(self.init(f"{s}.bias", np.asarray(p["bias"])))
                y = self.node("Gemm", args, s, transB=1)
            else:
                y = self.node("MatMul", [x, self.init(f"{s}.weight_t",
                                                      np.ascontiguousarray(w.T))], s)
                if "bias" in p:
                    y = self.node("Add", [y, self.init(f"{s}.bias", np.asarray(p["bias"]))],
                                  f"{s}.bias_add")
            if a["relu"]:
                y = self.node("Relu", [y], f"{s}.relu")
        elif op == "matmul":
            b = ins[1]
            if a["trans_b"]:
                rank = len(self.graph.nodes[n.inputs[1]].shape)
                b = self.node("Transpose", [b], f"{s}.transpose_b",
                              perm=[1, 0] if rank == 2 else [0, 2, 1])
            y = self.node("MatMul", [x, b], s)
        elif op == "embedding_bag":
            rows = self.node("Gather", [self.init(f"{s}.table", np.asarray(p["table"])), x],
                             f"{s}.gather", axis=0)
            if a["mode"] == "sum":
                axes = self.init(f"{s}.axes", np.array([1], np.int64))
                y = self.node("ReduceSum", [rows, axes], s, keepdims=0)
            else:
                y = self.node("ReduceMean", [rows], s, axes=[1], keepdims=0)
        elif op == "eltwise":
            y = self.act(a["kind"], x, s)
        elif op == "add":
            y = self.node("Add", ins, s)
            if a["relu"]:
                y = self.node("Relu", [y], f"{s}.relu")
        elif op == "mul":
            y = self.node("Mul", ins, s)
        elif op == "concat":
            y = self.node("Concat", ins, s, axis=a["axis"])
        elif op == "pool2d":
            y = self._pool(n, x, s)
        elif op == "global_avg_pool":
            y = self.node("Flatten", [self.node("GlobalAveragePool", [x], s)], f"{s}.flatten",
                          axis=1)
        elif op == "batch_norm":
            c = n.shape[1]
            scale = np.asarray(p["scale"]) if "scale" in p else np.ones(c, np.float32)
            y = self.node("BatchNormalization",
                          [x, self.init(f"{s}.scale", scale),
                           self.init(f"{s}.shift", np.asarray(p["shift"])),
                           self.init(f"{s}.mean", np.asarray(p["mean"])),
                           self.init(f"{s}.var", np.asarray(p["var"]))], s, epsilon=a["eps"])
        elif op == "layer_norm":
            y = self.node("LayerNormalization",
                          [x, self.init(f"{s}.scale", np.asarray(p["scale"])),
                           self.init(f"{s}.shift", np.asarray(p["shift"]))], s, axis=-1,
                          epsilon=a["eps"])
        elif op == "softmax":
            y = self.node("Softmax", [x], s, axis=a["axis"])
        elif op == "reshape":
            y = self.node("Reshape", [x, self.init(f"{s}.shape",
                                                   np.array(a["shape"], np.int64))], s)
        elif op == "transpose":
            y = self.node("Transpose", [x], s, perm=list(a["perm"]))
        elif op == "tril_flatten":
            bsz, k = self.graph.nodes[n.inputs[0]].shape[:2]
            li, lj = np.tril_indices(k, k=-1)
            flat = self.node("Reshape", [x, self.init(f"{s}.shape",
                                                      np.array([bsz, k * k], np.int64))],
                             f"{s}.flatten")
            y = self.node("Gather", [flat, self.init(f"{s}.index", (li * k + lj).astype(
                np.int64))], s, axis=1)
        elif op == "reorder":  # a layout change of the native plan: an identity here
            y = self.node("Identity", [x], s)
        elif op == "slice":  # a micro-batch of the native plan: rows of the batch
            bounds = np.array([a["start"], a["start"] + n.shape[0]], np.int64)
            y = self.node("Slice", [x, self.init(f"{s}.starts", bounds[:1]),
                                    self.init(f"{s}.ends", bounds[1:]),
                                    self.init(f"{s}.axes", np.zeros(1, np.int64))], s)
        else:
            raise ValueError(f"node {n.name!r}: op {op!r} has no ONNX form")
        # What the optimisation passes fuse: a conv's residual, then an activation.
        if op == "conv2d" and len(ins) == 2:
            y = self.node("Add", [y, ins[1]], f"{s}.residual")
        if a.get("activation"):
            y = self.act(a["activation"], y, f"{s}.activation")
        self.names[n.id] = y

    def act(self, kind: str, x: str, s: str) -> str:
        """An activation, GELU as exporters write it (ONNX Runtime fuses it)."""
        if kind == "relu6":
            return self.node("Clip", [x, self.init(f"{s}.min", np.array(0, np.float32)),
                                      self.init(f"{s}.max", np.array(6, np.float32))], s)
        if kind == "gelu":
            d = self.node("Div", [x, self.init(f"{s}.sqrt2", np.array(math.sqrt(2),
                                                                      np.float32))], f"{s}.div")
            e = self.node("Erf", [d], f"{s}.erf")
            e1 = self.node("Add", [e, self.init(f"{s}.one", np.array(1, np.float32))],
                           f"{s}.add")
            m = self.node("Mul", [x, e1], f"{s}.mul")
            return self.node("Mul", [m, self.init(f"{s}.half", np.array(0.5, np.float32))], s)
        return self.node({"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh"}[kind], [x], s)

    def _pool(self, n: Node, x: str, s: str) -> str:
        a = n.attrs
        geo = pool_geometry(n, self.graph.nodes[n.inputs[0]].shape)
        (kh, kw), (sh, sw) = geo.kernel, geo.stride
        pt, pb, pl, pr = geo.padding
        oh, ow = geo.out
        if geo.kind == "max" or not geo.overhang:
            kind = "MaxPool" if geo.kind == "max" else "AveragePool"
            extra = {} if geo.kind == "max" else {"count_include_pad": int(
                a["count_include_pad"])}
            y = self.node(kind, [x], s, kernel_shape=[kh, kw], strides=[sh, sw],
                          pads=[pt, pl, pb, pr], ceil_mode=int(a["ceil_mode"]), **extra)
        else:
            # An average window past the padding: sums over zero padding, divided
            # by the graph's count of each window.
            qt, qb, ql, qr = geo.pads
            padded = self.node("Pad", [x, self.init(f"{s}.pads", np.array(
                [0, 0, qt, ql, 0, 0, qb, qr], np.int64))], f"{s}.pad")
            avg = self.node("AveragePool", [padded], s, kernel_shape=[kh, kw],
                            strides=[sh, sw])
            assert geo.count is not None
            y = self.node("Mul", [avg, self.init(f"{s}.scale", (kh * kw / geo.count).astype(
                np.float32))], f"{s}.count")
        # ONNX Runtime may keep a last ceil-mode window PyTorch drops.
        return self.node("Slice", [y, self.init(f"{s}.starts", np.array([0, 0], np.int64)),
                                   self.init(f"{s}.ends", np.array([oh, ow], np.int64)),
                                   self.init(f"{s}.axes", np.array([2, 3], np.int64))],
                         f"{s}.crop") if a["ceil_mode"] or geo.overhang else y

    def model(self) -> Any:
        h, tp = self.h, self.tp
        g = self.graph
        inputs = []
        for i in g.inputs:
            n = g.nodes[i]
            self.names[i] = n.name
            elem = tp.INT64 if n.dtype == "int64" else tp.FLOAT
            inputs.append(h.make_tensor_value_info(n.name, elem, list(n.shape)))
        for n in g.nodes:
            if n.op != "input":
                self.add(n)
        outputs = []
        for o in g.outputs:
            n = g.nodes[o]
            name = self.node("Identity", [self.names[o]], f"{scope_name(n)}.output")
            outputs.append(h.make_tensor_value_info(name, tp.FLOAT, list(n.shape)))
        graph = h.make_graph(self.nodes, g.name, inputs, outputs, self.inits)
        return h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)],
                            producer_name="pyparbench")


def build_onnx(graph: Graph, directory: str | None = None) -> Any:
    """The graph as a checked ONNX model: a ModelProto, or, when its weights
    pass :data:`EXTERNAL_DATA_BYTES`, the path of a model file written to
    ``directory`` with its weights in a side file."""
    import onnx

    builder = _Builder(graph)
    model = builder.model()
    if builder.bytes <= EXTERNAL_DATA_BYTES:
        onnx.checker.check_model(model, full_check=True)
        return model
    if directory is None:
        raise ValueError(f"graph {graph.name!r} holds {builder.bytes} bytes of weights: "
                         "an ONNX file with external data needs a directory")
    path = os.path.join(directory, "model.onnx")
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin")
    onnx.checker.check_model(path, full_check=True)
    return path


class OrtModel:
    """A graph as an ONNX Runtime inference session."""

    def __init__(self, ort: Any, graph: Graph, inputs: Mapping[str, Array],
                 knobs: Mapping[str, Any]) -> None:
        self._ort = ort
        self._knobs = dict(knobs)
        self.graph = graph
        self._dir = tempfile.TemporaryDirectory(prefix="ppb-onnx-")
        built = build_onnx(graph, self._dir.name)
        self._model: str | bytes = built if isinstance(built, str) else built.SerializeToString()
        so = session_options(ort, knobs)
        self.session = ort.InferenceSession(self._model, so, providers=["CPUExecutionProvider"])
        self.info: dict[str, Any] = {"session_options": reported_options(so),
                                     "opset": OPSET}
        self._feeds = {graph.nodes[i].name: np.ascontiguousarray(inputs[graph.nodes[i].name])
                       for i in graph.inputs}
        self._out_names = [o.name for o in self.session.get_outputs()]

    def step(self) -> None:
        self.session.run(self._out_names, self._feeds)

    def time(self, repeats: int, warmup: int) -> list[float]:
        return python_loop(self.step, repeats, warmup)

    def outputs(self) -> dict[str, Array]:
        outs = self.session.run(self._out_names, self._feeds)
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
            with open(sess.end_profiling()) as fh:
                events = json.load(fh)
        # The first run plans memory: leave it out.
        windows = sorted((float(e["ts"]) * 1e3, float(e["ts"] + e["dur"]) * 1e3)
                         for e in events if e.get("name") == "model_run")[1:]
        charged = []
        for e in events:
            if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
                continue
            kind = e.get("args", {}).get("op_name", "")
            charged.append((float(e["ts"]) * 1e3, self._charge(e["name"], kind), kind,
                            float(e.get("dur", 0.0)) * 1e3))
        return aggregate(charged, windows)

    def _charge(self, name: str, kind: str) -> str:
        """The graph op type an ONNX Runtime kernel is charged to. A fused
        node keeps one of its nodes' names (often the activation's), so a
        kernel type that says what it computes decides first: a convolution
        or matrix product is charged to that heavy op, whatever it absorbed."""
        if kind == "Identity":
            return "other"
        nid = node_of_scope(name)
        op = self.graph.nodes[nid].op if nid is not None and nid < len(
            self.graph.nodes) else "other"
        fused = _FUSED.get(kind)
        if fused in ("linear", "matmul") and op in ("linear", "matmul"):
            return op  # a 3-D linear is a MatMul too
        return fused if fused is not None else op


def prepare(ort: Any, graph: Graph, inputs: Mapping[str, Array], knobs: Mapping[str, Any]
            ) -> OrtModel:
    return OrtModel(ort, graph, inputs, knobs)
