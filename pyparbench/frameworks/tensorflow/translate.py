"""A Graph's weights and forward pass in TensorFlow ops, as its users write them.

Images are NHWC; weights live in ``tf.Variable``s as Keras keeps them
(convolution kernels HWIO, depthwise kernels HW C M, dense kernels (in,
out)); the forward pass is ``tf.nn`` / ``tf.linalg`` ops, each graph node's
ops under its own name scope so that profiler events lead back to it. Batch
norm is ``tf.nn.batch_normalization`` (a multiply and an add on the
activations; Grappler merges the add with a residual's into one AddN), as
Keras 3's BatchNormalization runs it in inference, so that ResNet-50 runs
the very kernels ``tf.keras.applications.ResNet50`` runs. It was
``FusedBatchNormV3``, Keras 2's: one op, but TensorFlow's CPU kernel of it
costs more than the multiply and add (at one thread ResNet-50 b1 spent 59 ms
in batch norm, ReLU and residual adds where Keras spent 39 ms, of ~450 ms),
which made ours 8 % slower than Keras' at batch 1
(bench/framework_fairness.py). The decoder's ops are ``tf`` ops: RMS
normalisation by ``tf.math.rsqrt``, rotary positions by slices and a
concat, attention by two batched matmuls around a softmax (grouped-query
heads' keys and values repeated, as Keras' GroupedQueryAttention does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pyparbench.frameworks._common import Array, pool_geometry, scope_name
from pyparbench.graph import Graph, Node
from pyparbench.models._blocks import same_padding

__all__ = ["GraphFunction"]

# NCHW axis -> NHWC axis.
_TO_NHWC_AXIS = {0: 0, 1: 3, 2: 1, 3: 2}


def _is_depthwise(node: Node, in_channels: int) -> bool:
    g = int(node.attrs["groups"])
    return g > 1 and g == in_channels and node.attrs["stride"][0] == node.attrs["stride"][1]


class GraphFunction:
    """A graph's weights as ``tf.Variable``s and its forward pass in ``tf``
    ops (see the module docstring); call it inside a ``tf.function``."""

    def __init__(self, tf: Any, graph: Graph) -> None:
        self._tf = tf
        self.graph = graph
        self._vars: dict[int, dict[str, Any]] = {}
        for node in graph.nodes:
            self._make_vars(node)

    def feeds(self, inputs: Mapping[str, Array]) -> list[Any]:
        """The graph's inputs as tensors, images NHWC (transposed once, as a
        TensorFlow user's data already is)."""
        out = []
        for i in self.graph.inputs:
            node = self.graph.nodes[i]
            x = np.asarray(inputs[node.name])
            if node.dtype == "float32" and x.ndim == 4:
                x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
            out.append(self._tf.constant(x))
        return out

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
            # No scale where the graph has none (Keras' scale=False): no multiply by ones.
            for k in ("mean", "var", "shift", "scale"):
                if k in p:
                    v[k] = var(k, p[k])
        elif node.op == "layer_norm":
            v["scale"], v["shift"] = var("gamma", p["scale"]), var("beta", p["shift"])
        elif node.op == "rms_norm":
            v["scale"] = var("scale", p["scale"])
        elif node.op == "rotary":
            if "inv_freq" in p:
                raise ValueError(f"node {node.name!r}: a rotary computing its tables from "
                                 "positions has no TensorFlow form (run its ONNX file)")
            v["cos"], v["sin"] = (tf.constant(np.ascontiguousarray(p[k], dtype=np.float32))
                                  for k in ("cos", "sin"))
        elif node.op == "attention" and node.attrs["causal"]:
            sq, sk = node.shape[2], self.graph.nodes[node.inputs[1]].shape[2]
            v["hidden"] = tf.constant(np.arange(sk)[None, :] > np.arange(sq)[:, None] + sk - sq)
        elif node.op == "constant":
            v["value"] = tf.constant(np.ascontiguousarray(p["value"], dtype=np.float32))
        elif node.op == "tril_flatten":
            n = self.graph.nodes[node.inputs[0]].shape[1]
            li, lj = np.tril_indices(n, k=-1)
            v["index"] = tf.constant((li * n + lj).astype(np.int64))
        if v:
            self._vars[node.id] = v

    # ------------------------------------------------------------ forward

    def __call__(self, *xs: Any) -> list[Any]:
        """The graph's outputs (NCHW, as the graph's) from its inputs (images NHWC)."""
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
        if kind == "hardswish":  # as Keras' hard_swish writes it
            return x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0)
        fn = {"relu": tf.nn.relu, "relu6": tf.nn.relu6, "sigmoid": tf.math.sigmoid,
              "tanh": tf.math.tanh, "swish": tf.nn.silu}.get(kind)
        return fn(x) if fn is not None else tf.nn.gelu(x, approximate=kind == "gelu_tanh")

    def _op(self, node: Node, ins: list[tuple[Any, bool]]) -> tuple[Any, bool]:
        if node.op == "reorder":  # a layout change of the native plan: an identity here
            return ins[0]
        if node.op == "constant":  # as the graph stores it (NCHW where 4-D)
            return self._vars[node.id]["value"], False
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
        if op == "rms_norm":
            x = self._nchw(ins[0])
            ms = tf.reduce_mean(tf.square(x), axis=-1, keepdims=True)
            return x * tf.math.rsqrt(ms + a["eps"]) * self._vars[node.id]["scale"], False
        if op == "rotary":
            x, var = self._nchw(ins[0]), self._vars[node.id]
            half = node.shape[-1] // 2
            turned = tf.concat([-x[..., half:], x[..., :half]], axis=-1)
            return x * var["cos"] + turned * var["sin"], False
        if op == "attention":
            return self._attention(node, [self._nchw(v) for v in ins]), False
        if op == "glu":
            return self._act(a["kind"], self._nchw(ins[0])) * self._nchw(ins[1]), False
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

    def _attention(self, node: Node, ins: list[Any]) -> Any:
        """softmax(scale q k^T + mask) v, as Keras' attention layers compute it:
        the key / value heads repeated for grouped-query heads (``tf.repeat``,
        Keras' GroupedQueryAttention), hidden causal scores set to the fill."""
        tf = self._tf
        a = node.attrs
        q, k, v = ins[:3]
        group = node.shape[1] // self.graph.nodes[node.inputs[1]].shape[1]
        if group > 1:
            k, v = tf.repeat(k, group, axis=1), tf.repeat(v, group, axis=1)
        scores = tf.linalg.matmul(q, k, transpose_b=True) * a["scale"]
        if len(ins) > 3:
            scores = scores + ins[3]
        if a["causal"]:
            scores = tf.where(self._vars[node.id]["hidden"], a["causal_fill"], scores)
        return tf.linalg.matmul(tf.nn.softmax(scores, axis=-1), v)

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
        """As Keras 3's BatchNormalization in inference: ``tf.nn.batch_normalization``,
        the statistics as they are where the channels are the last axis (NHWC
        images, (N, C)), else reshaped to broadcast along axis 1."""
        tf = self._tf
        x, nhwc = x_in
        rank = len(node.shape)
        stats = dict(self._vars[node.id])
        if not (nhwc or rank == 2):
            stats = {k: tf.reshape(t, [1, -1] + [1] * (rank - 2)) for k, t in stats.items()}
        return tf.nn.batch_normalization(x, stats["mean"], stats["var"], stats["shift"],
                                         stats.get("scale"), float(node.attrs["eps"])), nhwc
