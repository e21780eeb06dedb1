"""Any Graph as a TensorFlow model, the way TensorFlow's users write one.

Images are NHWC (the graph's NCHW inputs are transposed once, before
timing, as a TensorFlow user's data already is); weights live in
``tf.Variable``s as Keras keeps them (convolution kernels HWIO, depthwise
kernels HW C M, dense kernels (in, out)); the forward pass is one
``tf.function`` of ``tf.nn`` / ``tf.linalg`` ops, each graph node's ops
under its own name scope so that profiler events lead back to it. Batch
norm on images is ``FusedBatchNormV3`` in inference mode (what Keras 2's
fused batch norm ran; Grappler fuses it with the ReLU after it). XLA is off
unless the mode is ``xla``.

This module is imported only in a framework child process, after
TensorFlow (see :mod:`pyparbench.frameworks.child`).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
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
from pyparbench.models._blocks import same_padding

__all__ = ["TFModel", "configure", "parse_trace_json", "parse_xplane", "prepare"]

# NCHW axis -> NHWC axis.
_TO_NHWC_AXIS = {0: 0, 1: 3, 2: 1, 3: 2}
# FusedBatchNorm raises a smaller epsilon to this (cuDNN's minimum).
_FUSED_BN_MIN_EPS = 1.001e-5
_CONV_TYPES = ("Conv2D", "DepthwiseConv2dNative", "_FusedConv2D", "_MklNativeConv2D",
               "_MklNativeFusedConv2D", "_MklNativeDepthwiseConv2dNative",
               "_MklNativeFusedDepthwiseConv2dNative", "_FusedDepthwiseConv2dNative",
               "_MklNativePadWithConv2D", "_MklNativePadWithFusedConv2D")
_MATMUL_TYPES = ("MatMul", "_FusedMatMul", "_MklNativeMatMul", "_MklNativeFusedMatMul",
                 "BatchMatMulV2", "BatchMatMulV3", "_MklNativeBatchMatMulV2",
                 "_MklBatchMatMulV2", "_MklNativeFusedBatchMatMulV2", "_MklFusedBatchMatMulV2")
# Bookkeeping kernels: they run, but compute nothing of the model.
_BOOKKEEPING = frozenset({"ReadVariableOp", "Identity", "IdentityN", "Const", "NoOp", "_Arg",
                          "_Retval", "_Recv", "_Send", "Shape"})
_CONTAINERS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
_ITERATION = "ppb_iteration"


def configure(tf: Any, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Thread pools and the scheduler, set before TensorFlow runs any op;
    returns what TensorFlow reports back."""
    tf.config.threading.set_inter_op_parallelism_threads(int(knobs["inter_op_parallelism_threads"]))
    tf.config.threading.set_intra_op_parallelism_threads(int(knobs["intra_op_parallelism_threads"]))
    tf.config.experimental.set_synchronous_execution(bool(knobs["synchronous_execution"]))
    return {
        "inter_op_parallelism_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "intra_op_parallelism_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "synchronous_execution": tf.config.experimental.get_synchronous_execution(),
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
        "version": tf.__version__,
    }


def _is_depthwise(node: Node, in_channels: int) -> bool:
    g = int(node.attrs["groups"])
    return g > 1 and g == in_channels and node.attrs["stride"][0] == node.attrs["stride"][1]


class TFModel:
    """A graph as a ``tf.function`` over ``tf.Variable`` weights (see the module docstring)."""

    def __init__(self, tf: Any, graph: Graph, inputs: Mapping[str, Array],
                 knobs: Mapping[str, Any]) -> None:
        self._tf = tf
        self.graph = graph
        self.info: dict[str, Any] = {"layout": "NHWC", "jit_compile": bool(knobs["jit_compile"])}
        self._vars: dict[int, dict[str, Any]] = {}
        for node in graph.nodes:
            self._make_vars(node)
        self._feeds = []
        for i in graph.inputs:
            node = graph.nodes[i]
            x = np.asarray(inputs[node.name])
            if node.dtype == "float32" and x.ndim == 4:
                x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
            self._feeds.append(tf.constant(x))
        self._fn = tf.function(self._forward, jit_compile=bool(knobs["jit_compile"]))
        self._sync = bool(knobs["synchronous_execution"])

    # ------------------------------------------------------------ weights

    def _make_vars(self, node: Node) -> None:
        tf = self._tf
        p = node.params
        v: dict[str, Any] = {}

        def var(name: str, arr: Array) -> Any:
            return tf.Variable(np.ascontiguousarray(arr, dtype=np.float32), trainable=False,
                               name=f"{scope_name(node)}.{name}")

        if node.op == "conv2d":
            w = np.asarray(p["weight"])
            cin = self.graph.nodes[node.inputs[0]].shape[1]
            if _is_depthwise(node, cin):
                o, _, kh, kw = w.shape
                v["weight"] = var("depthwise_kernel",
                                  w.reshape(cin, o // cin, kh, kw).transpose(2, 3, 0, 1))
            else:
                v["weight"] = var("kernel", w.transpose(2, 3, 1, 0))
            if "bias" in p:
                v["bias"] = var("bias", p["bias"])
        elif node.op == "linear":
            v["weight"] = var("kernel", np.asarray(p["weight"]).T)
            if "bias" in p:
                v["bias"] = var("bias", p["bias"])
        elif node.op == "embedding_bag":
            v["table"] = var("embeddings", p["table"])
        elif node.op == "batch_norm":
            c = node.shape[1]
            v["mean"], v["var"], v["shift"] = (var(k, p[k]) for k in ("mean", "var", "shift"))
            v["scale"] = var("scale", p["scale"] if "scale" in p else np.ones(c, np.float32))
        elif node.op == "layer_norm":
            v["scale"], v["shift"] = var("gamma", p["scale"]), var("beta", p["shift"])
        elif node.op == "tril_flatten":
            n = self.graph.nodes[node.inputs[0]].shape[1]
            li, lj = np.tril_indices(n, k=-1)
            v["index"] = tf.constant((li * n + lj).astype(np.int64))
        if v:
            self._vars[node.id] = v

    # ------------------------------------------------------------ forward

    def _forward(self, *xs: Any) -> list[Any]:
        tf = self._tf
        vals: dict[int, tuple[Any, bool]] = {}
        for i, x in zip(self.graph.inputs, xs, strict=True):
            node = self.graph.nodes[i]
            vals[i] = (x, node.dtype == "float32" and len(node.shape) == 4)
        for node in self.graph.nodes:
            if node.op == "input":
                continue
            with tf.name_scope(scope_name(node)):
                vals[node.id] = self._op(node, [vals[j] for j in node.inputs])
        return [self._nchw(vals[o]) for o in self.graph.outputs]

    def _nchw(self, v: tuple[Any, bool]) -> Any:
        t, nhwc = v
        return self._tf.transpose(t, [0, 3, 1, 2]) if nhwc else t

    def _nhwc(self, v: tuple[Any, bool]) -> Any:
        t, nhwc = v
        return t if nhwc else self._tf.transpose(t, [0, 2, 3, 1])

    def _act(self, kind: str, x: Any) -> Any:
        tf = self._tf
        fn = {"relu": tf.nn.relu, "relu6": tf.nn.relu6, "sigmoid": tf.math.sigmoid,
              "tanh": tf.math.tanh}.get(kind)
        return fn(x) if fn is not None else tf.nn.gelu(x, approximate=False)

    def _op(self, node: Node, ins: list[tuple[Any, bool]]) -> tuple[Any, bool]:
        if node.op == "reorder":  # a layout change of the native plan: an identity here
            return ins[0]
        if node.op == "slice":  # a micro-batch of the native plan: rows of the batch
            start = node.attrs["start"]
            return ins[0][0][start:start + node.shape[0]], ins[0][1]
        y, nhwc = self._compute(node, ins)
        # What the optimisation passes fuse: a conv's residual, then an activation.
        if node.op == "conv2d" and len(ins) == 2:
            y = y + self._nhwc(ins[1])
        kind = node.attrs.get("activation")
        return (self._act(kind, y) if kind else y), nhwc

    def _compute(self, node: Node, ins: list[tuple[Any, bool]]) -> tuple[Any, bool]:
        tf = self._tf
        a = node.attrs
        op = node.op
        if op == "conv2d":
            return self._conv2d(node, ins[0]), True
        if op == "linear":
            x = self._nchw(ins[0])
            var = self._vars[node.id]
            shape = self.graph.nodes[node.inputs[0]].shape
            if len(shape) != 2:  # Keras' Dense on 3-D: one 2-D product, then the shape back
                x = tf.reshape(x, [-1, shape[-1]])
            y = tf.linalg.matmul(x, var["weight"])
            if "bias" in var:
                y = tf.nn.bias_add(y, var["bias"])
            if a["relu"]:
                y = tf.nn.relu(y)
            if len(shape) != 2:
                y = tf.reshape(y, list(node.shape))
            return y, False
        if op == "matmul":
            return tf.linalg.matmul(self._nchw(ins[0]), self._nchw(ins[1]),
                                    transpose_b=bool(a["trans_b"])), False
        if op == "embedding_bag":
            rows = tf.nn.embedding_lookup(self._vars[node.id]["table"], ins[0][0])
            reduce = tf.reduce_sum if a["mode"] == "sum" else tf.reduce_mean
            return reduce(rows, axis=1), False
        if op == "eltwise":
            x, nhwc = ins[0]
            return self._act(a["kind"], x), nhwc
        if op in ("add", "mul"):
            (x, lx), (y, ly) = ins
            if lx != ly:
                y = self._nhwc(ins[1]) if lx else self._nchw(ins[1])
            out = x + y if op == "add" else x * y
            if op == "add" and a["relu"]:
                out = tf.nn.relu(out)
            return out, lx
        if op == "concat":
            if any(nhwc for _, nhwc in ins):
                return tf.concat([self._nhwc(v) for v in ins], _TO_NHWC_AXIS[a["axis"]]), True
            return tf.concat([t for t, _ in ins], a["axis"]), False
        if op == "pool2d":
            return self._pool(node, self._nhwc(ins[0])), True
        if op == "global_avg_pool":
            x, nhwc = ins[0]
            return tf.reduce_mean(x, axis=[1, 2] if nhwc else [2, 3]), False
        if op == "batch_norm":
            return self._batch_norm(node, ins[0])
        if op == "layer_norm":
            var = self._vars[node.id]
            x = self._nchw(ins[0])
            mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
            return tf.nn.batch_normalization(x, mean, variance, var["shift"], var["scale"],
                                             a["eps"]), False
        if op == "softmax":
            x, nhwc = ins[0]
            axis = _TO_NHWC_AXIS[a["axis"]] if nhwc else a["axis"]
            return tf.nn.softmax(x, axis=axis), nhwc
        if op == "reshape":
            return tf.reshape(self._nchw(ins[0]), list(a["shape"])), False
        if op == "transpose":
            return tf.transpose(self._nchw(ins[0]), list(a["perm"])), False
        if op == "tril_flatten":
            x = self._nchw(ins[0])
            b, n = node.shape[0], self.graph.nodes[node.inputs[0]].shape[1]
            return tf.gather(tf.reshape(x, [b, n * n]), self._vars[node.id]["index"],
                             axis=1), False
        raise ValueError(f"node {node.name!r}: op {op!r} has no TensorFlow form")

    def _conv2d(self, node: Node, x_in: tuple[Any, bool]) -> Any:
        tf = self._tf
        a = node.attrs
        x = self._nhwc(x_in)
        var = self._vars[node.id]
        _, cin, h, w = self.graph.nodes[node.inputs[0]].shape
        (sh, sw), (dh, dw), pad = a["stride"], a["dilation"], tuple(a["padding"])
        kh, kw = node.params.specs["weight"].shape[2:]
        ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
        padding: Any
        if pad == (0, 0, 0, 0):
            padding = "VALID"
        elif pad == (*same_padding(h, ekh, sh), *same_padding(w, ekw, sw)):
            padding = "SAME"
        else:
            padding = [[0, 0], [pad[0], pad[1]], [pad[2], pad[3]], [0, 0]]
        if _is_depthwise(node, cin):
            y = tf.nn.depthwise_conv2d(x, var["weight"], [1, sh, sw, 1], padding,
                                       dilations=[dh, dw])
        elif (dh, dw) == (1, 1):
            y = tf.nn.conv2d(x, var["weight"], [1, sh, sw, 1], padding)
        else:
            if not isinstance(padding, str):
                x = tf.pad(x, padding)
                padding = "VALID"
            y = tf.nn.convolution(x, var["weight"], strides=[sh, sw], padding=padding,
                                  dilations=[dh, dw])
        if "bias" in var:
            y = tf.nn.bias_add(y, var["bias"])
        return tf.nn.relu(y) if a["relu"] else y

    def _pool(self, node: Node, x: Any) -> Any:
        tf = self._tf
        shape = self.graph.nodes[node.inputs[0]].shape
        g = pool_geometry(node, shape)
        (kh, kw), (sh, sw) = g.kernel, g.stride
        pool = tf.nn.max_pool2d if g.kind == "max" else tf.nn.avg_pool2d
        if not g.overhang:
            if g.padding == (0, 0, 0, 0):
                return pool(x, [kh, kw], [sh, sw], "VALID")
            same = (*same_padding(shape[2], kh, sh), *same_padding(shape[3], kw, sw))
            # TensorFlow's SAME never counts padding: max, or average without it.
            if g.padding == same and (g.kind == "max" or not node.attrs["count_include_pad"]):
                return pool(x, [kh, kw], [sh, sw], "SAME")
        pt, pb, pl, pr = g.pads
        grid = [[0, 0], [pt, pb], [pl, pr], [0, 0]]
        oh, ow = g.out
        if g.kind == "max":
            y = pool(tf.pad(x, grid, constant_values=-np.inf), [kh, kw], [sh, sw], "VALID")
            return y[:, :oh, :ow, :]
        # Window sums over the zero-padded input, divided by the graph's count.
        y = pool(tf.pad(x, grid), [kh, kw], [sh, sw], "VALID")[:, :oh, :ow, :]
        assert g.count is not None
        return y * tf.constant((kh * kw / g.count)[None, :, :, None].astype(np.float32))

    def _batch_norm(self, node: Node, x_in: tuple[Any, bool]) -> tuple[Any, bool]:
        tf = self._tf
        var = self._vars[node.id]
        eps = float(node.attrs["eps"])
        x, nhwc = x_in
        if nhwc and eps >= _FUSED_BN_MIN_EPS:
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(
                x, var["scale"], var["shift"], var["mean"], var["var"], epsilon=eps,
                data_format="NHWC", is_training=False)
            return y, True
        rank = len(node.shape)
        shape = [-1] if nhwc else [1, -1] + [1] * (rank - 2)

        def p(k: str) -> Any:
            return tf.reshape(var[k], shape)

        return tf.nn.batch_normalization(x, p("mean"), p("var"), p("shift"), p("scale"),
                                         eps), nhwc

    # --------------------------------------------------------------- runs

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
        protobuf, the fallback where the converter is missing). Each
        iteration runs inside a ``ppb_iteration`` trace event."""
        tf = self._tf
        if parser not in ("trace_json", "xplane"):
            raise ValueError(f"parser must be 'trace_json' or 'xplane', got {parser!r}")
        self.step()
        logdir = tempfile.mkdtemp(prefix="ppb-tf-profile-")
        try:
            tf.profiler.experimental.start(logdir)
            try:
                for _ in range(iterations):
                    with tf.profiler.experimental.Trace(_ITERATION):
                        self.step()
            finally:
                tf.profiler.experimental.stop()
            paths = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))
            if not paths:
                raise RuntimeError(f"the TensorFlow profiler wrote no trace under {logdir}")
            if parser == "trace_json":
                try:
                    events, windows = parse_trace_json(paths[-1])
                    self.info["profile_parser"] = "trace_json"
                except ImportError:
                    events, windows = parse_xplane(paths[-1])
                    self.info["profile_parser"] = "xplane (no trace converter)"
            else:
                events, windows = parse_xplane(paths[-1])
                self.info["profile_parser"] = "xplane"
        finally:
            shutil.rmtree(logdir, ignore_errors=True)
        return aggregate([(start, self._charge(name, kind), kind, ns)
                          for start, name, kind, ns in events if kind not in _CONTAINERS],
                         windows)

    def _charge(self, name: str, kind: str) -> str:
        """The graph op type a TensorFlow kernel is charged to."""
        if kind in _BOOKKEEPING:
            return "other"
        nid = node_of_scope(name)
        op = self.graph.nodes[nid].op if nid is not None and nid < len(self.graph.nodes) \
            else "other"
        # A fused kernel is charged to the heavy op it computes.
        if kind in _CONV_TYPES and op != "conv2d":
            return "conv2d"
        if kind in _MATMUL_TYPES and op not in ("linear", "matmul"):
            return "linear"
        if self.info["jit_compile"] and nid is None:
            return "xla"
        return op


Events = list[tuple[float, str, str, float]]  # (start ns, op name, op type, ns)
Windows = list[tuple[float, float]]


def parse_trace_json(xplane_path: str) -> tuple[Events, Windows]:
    """Every TensorFlow op event (start, op name, op type, ns) in a profile and
    the iteration windows, from the trace viewer JSON that TensorFlow's
    profiler converter makes of it."""
    from tensorflow.python.profiler.internal import (  # type: ignore[import-untyped]
        _pywrap_profiler_plugin as plugin,
    )

    data, ok = plugin.xspace_to_tools_data([xplane_path], "trace_viewer@", {})
    if not ok:
        raise RuntimeError(f"TensorFlow could not convert the profile {xplane_path}")
    trace = json.loads(data)
    frames = trace.get("stackFrames", {})
    events: Events = []
    windows: Windows = []
    for e in trace.get("traceEvents", []):
        if e.get("ph") != "X":
            continue
        start, dur = float(e.get("ts", 0.0)) * 1e3, float(e.get("dur", 0.0)) * 1e3
        if e.get("name") == _ITERATION:
            windows.append((start, start + dur))
            continue
        label = frames.get(str(e.get("sf")), {}).get("name", "") if "sf" in e else ""
        if ":" in label:
            name, kind = label.rsplit(":", 1)
            events.append((start, name, kind, dur))
    return events, windows


def parse_xplane(xplane_path: str) -> tuple[Events, Windows]:
    """The same, read straight from the XSpace protobuf: TensorFlow names an
    op's events 'op name:op type'."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # type: ignore[import-untyped]

    space = xplane_pb2.XSpace()
    with open(xplane_path, "rb") as fh:
        space.ParseFromString(fh.read())
    events: Events = []
    windows: Windows = []
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        meta = plane.event_metadata
        for line in plane.lines:
            for e in line.events:
                label = meta[e.metadata_id].name
                start = line.timestamp_ns + e.offset_ps / 1e3
                dur = e.duration_ps / 1e3
                if label == _ITERATION:
                    windows.append((start, start + dur))
                    continue
                name, sep, kind = label.rpartition(":")
                if sep and name and kind and " " not in kind and not kind.startswith(":"):
                    events.append((start, name, kind, dur))
    return events, windows


def prepare(tf: Any, graph: Graph, inputs: Mapping[str, Array], knobs: Mapping[str, Any]
            ) -> TFModel:
    return TFModel(tf, graph, inputs, knobs)
