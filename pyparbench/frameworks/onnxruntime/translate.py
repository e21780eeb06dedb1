"""A Graph as an ONNX model, built node by node with ``onnx.helper``.

NCHW, the graph's parameters as initializers, one or a few ONNX nodes per
graph node named after it (``n<id>_<name>``, so that profiler events lead
back to the node): Conv, Gemm (2-D linear, as exporters write it) or MatMul
+ Add, Gather + ReduceSum / ReduceMean (embedding bags), MaxPool /
AveragePool, GlobalAveragePool + Flatten, BatchNormalization,
LayerNormalization, Softmax, Reshape, Transpose, Concat, Gather (DLRM's
triangle), and GELU written as exporters write it (x * 0.5 * (1 + Erf(x /
sqrt 2)), which ONNX Runtime fuses); the decoder's ops as exporters of
Llama write them at this opset: RMS normalisation in Pow / ReduceMean /
Sqrt / Div (fused to SimplifiedLayerNormalization), rotary positions in
Slice / Neg / Concat / Mul, attention in MatMul / Softmax (grouped-query
heads as row blocks of q: k and v are never repeated), SwiGLU as SiLU
times up. The nodes are opset 17's forms, in the
IR version :mod:`.versions` chooses.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from pyparbench.frameworks._common import Array, pool_geometry, scope_name
from pyparbench.frameworks.onnxruntime.versions import ModelVersions, model_versions
from pyparbench.graph import Graph, Node

__all__ = ["EXTERNAL_DATA_BYTES", "build_onnx"]

# Above this many bytes of weights the model is saved with its weights in a
# side file (a protobuf message cannot pass 2 GiB).
EXTERNAL_DATA_BYTES = 1 << 30


class _Builder:
    def __init__(self, graph: Graph, versions: ModelVersions) -> None:
        from onnx import TensorProto, helper, numpy_helper

        self.versions = versions
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
        if op == "constant":
            y = self.init(f"{s}.value", np.asarray(p["value"], np.float32))
        elif op == "conv2d":
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
        elif op == "rms_norm":
            y = self._rms_norm(n, x, s)
        elif op == "rotary":
            y = self._rotary(n, x, s)
        elif op == "attention":
            y = self._attention(n, ins, s)
        elif op == "glu":
            y = self.node("Mul", [self.act(a["kind"], x, f"{s}.act"), ins[1]], s)
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
        """An activation, GELU and SiLU as exporters write them (ONNX Runtime fuses
        GELU)."""
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
        if kind == "gelu_tanh":  # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
            def c(tag: str, v: float) -> str:
                return self.init(f"{s}.{tag}", np.array(v, np.float32))
            cube = self.node("Mul", [x, self.node("Mul", [x, x], f"{s}.sq")], f"{s}.cube")
            inner = self.node("Add", [x, self.node("Mul", [cube, c("k", 0.044715)],
                                                   f"{s}.kcube")], f"{s}.inner")
            t = self.node("Tanh", [self.node("Mul", [inner, c("c", math.sqrt(2 / math.pi))],
                                             f"{s}.scaled")], f"{s}.tanh")
            t1 = self.node("Add", [t, c("one", 1.0)], f"{s}.add")
            return self.node("Mul", [self.node("Mul", [x, c("half", 0.5)], f"{s}.halfx"), t1], s)
        if kind == "swish":  # x * sigmoid(x), as exporters write SiLU
            return self.node("Mul", [x, self.node("Sigmoid", [x], f"{s}.sigmoid")], s)
        return self.node({"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh",
                          "hardswish": "HardSwish"}[kind], [x], s)

    def const(self, s: str, tag: str, value: Any, dtype: Any = np.float32) -> str:
        return self.init(f"{s}.{tag}", np.asarray(value, dtype))

    def _rms_norm(self, n: Node, x: str, s: str) -> str:
        """x / sqrt(mean(x^2) + eps) * scale, as exporters write it (ONNX
        Runtime fuses it into one SimplifiedLayerNormalization)."""
        sq = self.node("Pow", [x, self.const(s, "two", 2.0)], f"{s}.pow")
        mean = self.node("ReduceMean", [sq], f"{s}.mean", axes=[-1], keepdims=1)
        std = self.node("Sqrt", [self.node("Add", [mean, self.const(s, "eps", n.attrs["eps"])],
                                           f"{s}.add_eps")], f"{s}.sqrt")
        normed = self.node("Div", [x, std], f"{s}.div")
        return self.node("Mul", [normed, self.init(f"{s}.scale",
                                                   np.asarray(n.params["scale"]))], s)

    def _rotary(self, n: Node, x: str, s: str) -> str:
        """x * cos + rotate_half(x) * sin, rotate_half as exporters write it
        (two Slices, a Neg and a Concat)."""
        if "inv_freq" in n.params:
            raise ValueError(f"node {n.name!r}: a rotary computing its tables from positions "
                             "has no ONNX form here (run its own file)")
        d = n.shape[-1]
        half = d // 2
        axis = self.const(s, "axis", [-1], np.int64)
        lo = self.node("Slice", [x, self.const(s, "zero", [0], np.int64),
                                 self.const(s, "half", [half], np.int64), axis], f"{s}.lo")
        hi = self.node("Slice", [x, self.const(s, "half_start", [half], np.int64),
                                 self.const(s, "end", [d], np.int64), axis], f"{s}.hi")
        turned = self.node("Concat", [self.node("Neg", [hi], f"{s}.neg"), lo], f"{s}.turn",
                           axis=-1)
        cos = self.node("Mul", [x, self.init(f"{s}.cos", np.asarray(n.params["cos"]))],
                        f"{s}.mul_cos")
        sin = self.node("Mul", [turned, self.init(f"{s}.sin", np.asarray(n.params["sin"]))],
                        f"{s}.mul_sin")
        return self.node("Add", [cos, sin], s)

    def _attention(self, n: Node, ins: list[str], s: str) -> str:
        """softmax(scale q k^T + mask) v in MatMul / Softmax. Grouped-query
        heads: the G query heads that read one key / value head are one
        (G * Sq)-row block of q (a Reshape, no copy of k or v); hidden
        causal scores are a Where on a constant pattern."""
        a = n.attrs
        qs, ks = (self.graph.nodes[j].shape for j in n.inputs[:2])
        b, h, sq, _ = qs
        hkv, sk = ks[1], ks[2]
        q, k, v = ins[:3]
        grouped = h != hkv
        if grouped:
            q = self.node("Reshape", [q, self.const(s, "group_shape", [b, hkv, -1, qs[3]],
                                                    np.int64)], f"{s}.group")
        kt = self.node("Transpose", [k], f"{s}.k_t", perm=[0, 1, 3, 2])
        scores = self.node("Mul", [self.node("MatMul", [q, kt], f"{s}.qk"),
                                   self.const(s, "scale", a["scale"])], f"{s}.scaled")
        if grouped:
            scores = self.node("Reshape", [scores, self.const(s, "score_shape", [b, h, sq, sk],
                                                              np.int64)], f"{s}.heads")
        if len(ins) > 3:
            scores = self.node("Add", [scores, ins[3]], f"{s}.mask")
        if a["causal"]:
            hidden = np.arange(sk)[None, :] > np.arange(sq)[:, None] + sk - sq
            scores = self.node("Where", [self.const(s, "hidden", hidden, np.bool_),
                                         self.const(s, "fill", a["causal_fill"]), scores],
                               f"{s}.causal")
        probs = self.node("Softmax", [scores], f"{s}.softmax", axis=-1)
        if grouped:
            probs = self.node("Reshape", [probs, self.const(s, "group_probs",
                                                            [b, hkv, -1, sk], np.int64)],
                              f"{s}.probs_group")
        y = self.node("MatMul", [probs, v], f"{s}.pv" if grouped else s)
        if grouped:
            y = self.node("Reshape", [y, self.const(s, "out_shape", list(n.shape), np.int64)],
                          s)
        return y

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
            # by the graph's count of each window. count_include_pad=1 says what
            # the pool computes (every window holds kh * kw cells of the padded
            # input); with the default 0, onnxruntime 1.20's Pad fusion moves
            # the Pad into the pool's pads and then leaves those cells out.
            qt, qb, ql, qr = geo.pads
            padded = self.node("Pad", [x, self.init(f"{s}.pads", np.array(
                [0, 0, qt, ql, 0, 0, qb, qr], np.int64))], f"{s}.pad")
            avg = self.node("AveragePool", [padded], s, kernel_shape=[kh, kw],
                            strides=[sh, sw], count_include_pad=1)
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
        return h.make_model(graph, opset_imports=[h.make_opsetid("", self.versions.opset)],
                            ir_version=self.versions.ir_version, producer_name="pyparbench")


def build_onnx(graph: Graph, directory: str | None = None,
               versions: ModelVersions | None = None) -> Any:
    """The graph as a checked ONNX model: a ModelProto, or, when its weights
    pass :data:`EXTERNAL_DATA_BYTES`, the path of a model file written to
    ``directory`` with its weights in a side file. ``versions``: the IR
    version and opset (default :func:`.versions.model_versions`, what a
    runtime's :func:`.versions.probe` returns)."""
    import onnx

    builder = _Builder(graph, versions if versions is not None else model_versions())
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
