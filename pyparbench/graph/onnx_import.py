"""A user's ONNX file as a :class:`~pyparbench.graph.ir.Graph`, with the file's own weights.

:func:`from_onnx` reads the file, fixes every input shape (a symbolic batch
dimension takes ``batch``), folds the shape arithmetic, and maps each
remaining ONNX node onto the IR's ops (:mod:`pyparbench.graph.opdefs`), so
that the native executor, the numpy reference and every graph pass run the
file's network as they run a built one.

Shape arithmetic is folded with onnx's own machinery: ``onnx.shape_inference``
checks the file and types its values, and ``onnx.reference.ReferenceEvaluator``
evaluates, one node at a time, every node whose inputs are all constants
(Shape of a value whose shape is fixed counts as a constant). The reference
evaluator is chosen over onnxscript's optimizer or onnxsim because it ships
with ``onnx`` itself (no further dependency, no native build), it implements
every standard op at every opset with the standard's own semantics (so a
folded ``Where`` / ``Range`` / ``Expand`` means what the exporter meant), and
evaluating node by node keeps the folding exact and bounded: only values the
importer would otherwise reject are computed, and nothing else of the file
is rewritten.

Patterns that exporters write as several nodes (the erf form of GELU, a
value gated by its own sigmoid, a zero Pad before a Conv) are first
rewritten as one (:mod:`pyparbench.graph.onnx_rewrites`).

What maps (everything else is refused, see below): Conv (2-D, groups
incl. depthwise, dilation, asymmetric pads, auto_pad; 1-D as a 2-D one of
width 1; a zero Pad of H and W before it folded into its pads), Gemm (alpha, beta, transA / transB) and MatMul with a constant
weight (``linear``, a following bias Add folded in), MatMul of two values
(2-D, batched, equal batch dims), Add / Sub / Mul / Div by a constant (a
per-channel affine: a ``batch_norm`` with mean 0, var 1, eps 0 over a view
of the tensor), Add / Sub / Mul of two values broadcasting one way, Relu,
Sigmoid, Tanh, Gelu (exact), Clip as ReLU / ReLU6, HardSigmoid (affine,
ReLU6, affine), HardSwish and Swish (one eltwise kernel each, as are
x * Sigmoid(x) and x * HardSigmoid(x) with HardSwish's constants), MaxPool / AveragePool (2-D, pads,
ceil_mode, count_include_pad), GlobalAveragePool, GlobalMaxPool,
ReduceMean over (H, W), BatchNormalization (inference), LayerNormalization
(last axis), Softmax (any axis), Concat, Reshape / Flatten / Squeeze /
Unsqueeze (views), Transpose, Split along one axis and Slice along any
axes with any positive step (per axis a view of rows where the axes before
it have size 1, else between two transposes; a step > 1 takes one column of
the axis seen as (count, step)), Pad in constant mode (a concat of constant
blocks; zero pads a view), Gather of a value by constant indices that run in a row
(``x[:, 0]``, an exporter's ``as_strided``: the same part), Gather of rows
of a constant table by an int64
graph input (``embedding_bag`` of bags of one; the input is fed as
``(numel, 1)`` indices, its file shape kept in ``graph.meta``), Identity,
Dropout and Cast to float32 (removed). A float constant that an op reads
as data rather than as its weight (a vision transformer's class token
concatenated to the patches) becomes a ``constant`` node.

A file that does not map fully is refused with ONE ValueError before
anything is built for it to run, listing every unsupported op type with its
count and first node. A file that is not ONNX, truncated, larger than
``max_bytes``, missing its external data, or computing in a dtype other
than float32 is refused with one line naming the file.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import numpy_helper, shape_inference
from onnx.reference import ReferenceEvaluator

from pyparbench.graph.builder import GraphBuilder
from pyparbench.graph.ir import Graph
from pyparbench.graph.onnx_rewrites import REWRITES, as_text, node_attrs

__all__ = ["DEFAULT_MAX_BYTES", "from_onnx"]

# Largest file (with its external data) the importer reads: 4 GiB.
DEFAULT_MAX_BYTES = 4 << 30

Array = npt.NDArray[Any]
_F32 = onnx.TensorProto.FLOAT
_INT_TYPES = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)
# Ops a constant may flow through without making any float computation of
# the network (folded at import whatever their dtype).
_NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                               "RandomUniformLike", "Multinomial", "Bernoulli"})


class _Unsupported(Exception):
    """A node of a supported op type that this file uses in a way the IR lacks."""


@dataclass(frozen=True)
class _Poison:
    """The value of a node that could not be mapped (its readers are skipped)."""


_POISON = _Poison()
# The batch norm that computes x * scale + shift: its eps (the native kernel
# takes eps > 0) and var = 1 - eps are exact in float32 and sum to 1.
_AFFINE_EPS = 2.0 ** -20
# The most elements one folded constant may have.
_MAX_FOLD_ELEMENTS = 1 << 26
Value = int | Array | _Poison  # a node id, a constant, or poison


def _bad(source: str, why: str) -> ValueError:
    return ValueError(f"{source}: {why}")


# ------------------------------------------------------------------ loading


def _load(model: str | os.PathLike[str] | onnx.ModelProto, max_bytes: int
          ) -> tuple[onnx.ModelProto, str, str]:
    """The model with its external data, a name for messages, its content hash."""
    if isinstance(model, onnx.ModelProto):
        data = model.SerializeToString()
        if len(data) > max_bytes:
            raise _bad("model", f"{len(data)} bytes is more than max_bytes={max_bytes}")
        return model, "model", hashlib.sha256(data).hexdigest()
    path = Path(os.fspath(model))
    src = f"ONNX file {str(path)!r}"
    if not path.is_file():
        raise _bad(src, "no such file")
    size = path.stat().st_size
    if size > max_bytes:
        raise _bad(src, f"{size} bytes is more than max_bytes={max_bytes}")
    data = path.read_bytes()
    if not data:
        raise _bad(src, "the file is empty: not an ONNX model")
    try:
        proto = onnx.load_model_from_string(data)
    except Exception as e:  # protobuf's DecodeError and the like
        raise _bad(src, f"not an ONNX model, or a truncated one ({type(e).__name__})") from None
    if not proto.graph.node and not proto.graph.output or not proto.opset_import:
        raise _bad(src, "not an ONNX model (no graph, outputs or opset), or a truncated one")
    external = [t for t in _all_tensors(proto.graph)
                if t.data_location == onnx.TensorProto.EXTERNAL]
    if external:
        total = size
        for t in external:
            info = {e.key: e.value for e in t.external_data}
            loc = path.parent / info.get("location", "")
            if not info.get("location") or not loc.is_file():
                raise _bad(src, f"external data of tensor {t.name!r} is missing "
                           f"({str(loc)!r} not found)")
            total += int(info.get("length", loc.stat().st_size))
            if total > max_bytes:
                raise _bad(src, f"with its external data more than max_bytes={max_bytes} "
                           "bytes")
        try:
            onnx.external_data_helper.load_external_data_for_model(proto, str(path.parent))
        except Exception as e:
            raise _bad(src, f"external data cannot be read: {e}") from None
    return proto, src, hashlib.sha256(data).hexdigest()


def _all_tensors(g: onnx.GraphProto) -> list[onnx.TensorProto]:
    out = list(g.initializer)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                out.append(a.t)
            elif a.type == onnx.AttributeProto.GRAPH:
                out.extend(_all_tensors(a.g))
    return out


# Attributes that onnx's shape inference does arithmetic on; a value beyond
# this bound is no real network's, and onnx's C++ aborts the process on some
# (a MaxPool dilation of 2**40 fails an assertion in std::clamp).
_GEOMETRY_ATTRS = frozenset({"kernel_shape", "strides", "dilations", "pads", "group",
                             "output_padding", "output_shape"})
_GEOMETRY_BOUND = 1 << 24


def _check(proto: onnx.ModelProto, src: str) -> None:
    try:
        onnx.checker.check_model(proto)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _bad(src, f"not a valid ONNX model, or a truncated one: {first}") from None
    for n in proto.graph.node:
        for a in n.attribute:
            if a.name not in _GEOMETRY_ATTRS:
                continue
            values = [a.i] if a.type == onnx.AttributeProto.INT else list(a.ints)
            if any(abs(v) > _GEOMETRY_BOUND for v in values):
                raise _bad(src, f"node {n.name or n.op_type!r} ({n.op_type}) has {a.name} "
                           f"{values}: beyond {_GEOMETRY_BOUND} (not a real network's)")


# ------------------------------------------------------------------ the import


def from_onnx(model: str | os.PathLike[str] | onnx.ModelProto, *, batch: int | None = None,
              name: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> Graph:
    """The ONNX model ``model`` (a path or a ModelProto) as a Graph with its own weights.

    Parameters
    ----------
    model
        A path to an ``.onnx`` file (external data beside it), or a ModelProto.
    batch
        The batch size of every input whose first dimension is symbolic
        (default 1); an input whose first dimension is fixed must have
        this batch when one is given.
    name
        The graph's name (default: the file's stem, or the model's graph name).
    max_bytes
        The largest file (with its external data) read.

    Returns
    -------
    Graph
        Its ``meta`` holds ``batch``, ``family`` "onnx", ``source`` (the file
        name), ``sha256`` (of the file's bytes), ``opset`` and
        ``onnx_input_shapes`` (each input's shape in the file, with the batch
        set: a Gather's int64 indices are fed to the graph as ``(numel, 1)``).

    Raises
    ------
    ValueError
        One line for a file that is not ONNX, truncated, too large, missing
        its external data, computing in another dtype than float32, or with
        NaN or infinite weights; for a
        batch that contradicts a fixed one; and one listing every op the IR
        cannot run (type, count, first node), before anything is built.
    """
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)
                              or batch < 1):
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"max_bytes must be an int >= 1, got {max_bytes!r}")
    proto, src, digest = _load(model, max_bytes)
    _check(proto, src)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 7:
        raise _bad(src, f"opset {opset} is older than the oldest supported (7)")
    if name is None:
        name = (Path(os.fspath(model)).stem if not isinstance(model, onnx.ModelProto)
                else proto.graph.name or "onnx_model")
    imp = _Importer(proto, src, batch, name, opset)
    graph = imp.run()
    graph.meta.update({"source": Path(os.fspath(model)).name
                       if not isinstance(model, onnx.ModelProto) else "model",
                       "sha256": digest})
    return graph


class _Importer:
    def __init__(self, proto: onnx.ModelProto, src: str, batch: int | None, name: str,
                 opset: int) -> None:
        self.proto = proto
        self.src = src
        self.opset = opset
        self.want_batch = batch
        self.g = proto.graph
        self.b = GraphBuilder(name)
        self.values: dict[str, Value] = {}
        self.problems: list[tuple[str, str, str]] = []  # (op type, node name, reason)
        self.consumers: dict[str, int] = {}
        self.absorbed: set[int] = set()  # ONNX node indexes folded into an earlier one
        self.input_shapes: dict[str, tuple[int, ...]] = {}
        self.input_dtypes: dict[str, str] = {}
        self.index_inputs: dict[str, int] = {}  # int64 input -> its (numel, 1) node
        self.float_inputs: dict[str, int] = {}
        self.used_names: set[str] = set()
        self.constant_nodes: dict[int, tuple[Array, int]] = {}  # id -> (array, its node)
        self.batch = batch or 1

    # ---------------------------------------------------------- set-up

    def _inputs(self) -> None:
        inits = {t.name for t in self.g.initializer}
        for t in self.g.initializer:
            if t.data_type not in (_F32, *_INT_TYPES, onnx.TensorProto.BOOL):
                dt = onnx.TensorProto.DataType.Name(t.data_type).lower()
                raise _bad(self.src, f"initializer {t.name!r} is {dt}: only float32 models "
                           "are supported (compute dtype must be float32)")
            arr = numpy_helper.to_array(t)
            if t.data_type == _F32 and not np.isfinite(arr).all():
                bad = int(arr.size - np.isfinite(arr).sum())
                raise _bad(self.src, f"initializer {t.name!r} has {bad} NaN or infinite "
                           f"value(s) of {arr.size}: a broken weight (and NaN timing is "
                           "not the model's)")
            self.values[t.name] = arr
        fixed_batch: int | None = None
        for vi in self.g.input:
            if vi.name in inits:
                continue
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                raise _bad(self.src, f"input {vi.name!r} is not a tensor")
            if tt.elem_type == _F32:
                dtype = "float32"
            elif tt.elem_type in _INT_TYPES:
                dtype = "int64"
            else:
                dt = onnx.TensorProto.DataType.Name(tt.elem_type).lower()
                raise _bad(self.src, f"input {vi.name!r} is {dt}: only float32 models (with "
                           "int64 indices) are supported (compute dtype must be float32)")
            if not tt.HasField("shape"):
                raise _bad(self.src, f"input {vi.name!r} has no shape")
            dims: list[int] = []
            for ax, d in enumerate(tt.shape.dim):
                if d.HasField("dim_value") and d.dim_value > 0:
                    if ax == 0:
                        if self.want_batch is not None and d.dim_value != self.want_batch:
                            raise _bad(self.src, f"input {vi.name!r} has a fixed batch of "
                                       f"{d.dim_value}, not the batch={self.want_batch} asked "
                                       "for")
                        fixed_batch = d.dim_value
                    dims.append(int(d.dim_value))
                elif ax == 0:
                    dims.append(self.batch)
                else:
                    sym = d.dim_param or "?"
                    raise _bad(self.src, f"input {vi.name!r} has a symbolic dimension {sym!r} "
                               f"at axis {ax}: only the batch (axis 0) may be symbolic")
            self.input_shapes[vi.name] = tuple(dims)
            self.input_dtypes[vi.name] = dtype
        if self.want_batch is None and fixed_batch is not None:
            self.batch = fixed_batch

    def _fixed_model(self) -> onnx.ModelProto:
        """The model with every input's shape fixed, shape-inferred."""
        m = onnx.ModelProto()
        m.CopyFrom(self.proto)
        for vi in m.graph.input:
            if vi.name in self.input_shapes:
                shape = vi.type.tensor_type.shape
                for d, v in zip(shape.dim, self.input_shapes[vi.name], strict=True):
                    d.Clear()
                    d.dim_value = v
        try:
            return shape_inference.infer_shapes(m, check_type=False, strict_mode=False,
                                                data_prop=True)
        except Exception as e:
            raise _bad(self.src, f"shape inference fails: {str(e).splitlines()[0]}") from None

    # ---------------------------------------------------------- main loop

    def run(self) -> Graph:
        self._inputs()
        inferred = self._fixed_model()
        infos = (*inferred.graph.value_info, *inferred.graph.output)
        self.elem_types = {vi.name: vi.type.tensor_type.elem_type for vi in infos}
        self.inferred_shapes: dict[str, tuple[int, ...]] = {}
        for vi in infos:
            tt = vi.type.tensor_type
            if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
                self.inferred_shapes[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
        outputs = {o.name for o in self.g.output}
        nodes = list(self.g.node)
        for rewrite in REWRITES:
            nodes = rewrite(nodes, self.values, outputs)
        for n in nodes:
            for i in n.input:
                if i:
                    self.consumers[i] = self.consumers.get(i, 0) + 1
        self.producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
        self.nodes = nodes
        live = self._live(nodes)
        self.output_names = {o.name for o in self.g.output}
        for k, n in enumerate(nodes):
            if k not in live or k in self.absorbed:
                continue
            self._node(k, n)
        outs: list[int] = []
        for o in self.g.output:
            v = self._value(o.name)
            if isinstance(v, _Poison):
                continue
            if not isinstance(v, int):
                self.problems.append(("(output)", o.name, "a constant graph output"))
                continue
            if self.b.shape(v) and self.b._nodes[v].dtype != "float32":
                self.problems.append(("(output)", o.name, "an int64 graph output"))
                continue
            outs.append(v)
        if self.problems:
            raise ValueError(self._problem_text())
        meta = {"batch": self.batch, "family": "onnx", "opset": self.opset,
                "onnx_input_shapes": {k: list(v) for k, v in self.input_shapes.items()
                                      if k in self.float_inputs or k in self.index_inputs}}
        return self.b.build(outs, meta)

    def _problem_text(self) -> str:
        counts: dict[str, list[Any]] = {}
        for op, node, why in self.problems:
            c = counts.setdefault(op, [0, node, why])
            c[0] += 1
        parts = []
        for op, (k, node, why) in counts.items():
            parts.append(f"{op} x{k} (node {node!r}{': ' + why if why else ''})")
        return f"{self.src}: unsupported ONNX ops: " + ", ".join(parts)

    def _live(self, nodes: Sequence[onnx.NodeProto]) -> set[int]:
        live: set[int] = set()
        stack = [o.name for o in self.g.output]
        seen: set[str] = set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            k = self.producer.get(v)
            if k is not None and k not in live:
                live.add(k)
                stack.extend(i for i in nodes[k].input if i)
        return live

    def _value(self, name: str) -> Value:
        if name in self.values:
            return self.values[name]
        if name in self.input_shapes:
            if self.input_dtypes[name] == "float32":
                nid = self.b.input(name, self.input_shapes[name])
                self.float_inputs[name] = nid
                self.values[name] = nid
                return nid
            raise _Unsupported(f"int64 input {name!r} is read other than as Gather indices "
                               "of a constant table")
        raise _Unsupported(f"value {name!r} is not produced by any node")

    def _node(self, k: int, n: onnx.NodeProto) -> None:
        label = n.name or (n.output[0] if n.output else f"node_{k}")
        try:
            ins: list[Value | None] = []
            for i in n.input:
                if not i:
                    ins.append(None)
                elif n.op_type == "Gather" and i == n.input[1] and i in self.input_shapes \
                        and self.input_dtypes[i] == "int64":
                    ins.append(None)  # handled by the Gather mapping
                else:
                    ins.append(self._value(i))
        except _Unsupported as e:
            self.problems.append((n.op_type, label, str(e)))
            self._poison(n)
            return
        if any(isinstance(v, _Poison) for v in ins):
            if n.op_type not in _MAPPINGS and n.op_type != "Constant":
                self.problems.append((n.op_type, label, ""))
            self._poison(n)
            return
        try:
            if n.domain not in ("", "ai.onnx"):
                raise _Unsupported(f"domain {n.domain!r}")
            if self._fold(n, ins):
                return
            fn = _MAPPINGS.get(n.op_type)
            if fn is None:
                self.problems.append((n.op_type, label, ""))
                self._poison(n)
                return
            self.float_dtype_check(n)
            self._name = self._node_name(n, label)
            outs = fn(self, k, n, ins, node_attrs(n))
        except _Unsupported as e:
            self.problems.append((n.op_type, label, str(e)))
            self._poison(n)
            return
        except ValueError as e:
            self.problems.append((n.op_type, label, str(e)))
            self._poison(n)
            return
        except (IndexError, KeyError, TypeError, ArithmeticError) as e:
            # A malformed node (an attribute of the wrong length or type, an
            # input missing) that no check above names: refused as it is.
            self.problems.append((n.op_type, label, f"malformed ({type(e).__name__}: {e})"))
            self._poison(n)
            return
        for o, v in zip(n.output, outs, strict=False):
            if o:
                self.values[o] = v

    def _node_name(self, n: onnx.NodeProto, label: str) -> str:
        return self._node_name_for(n.output[0] if n.output else "", label)

    def _node_name_for(self, output: str, label: str) -> str:
        """A fresh node name: the output's when it is a graph output, else ``label``."""
        base = output if output in self.output_names else label
        name, i = base, 1
        while name in self.used_names or name in self.input_shapes:
            i += 1
            name = f"{base}_{i}"
        self.used_names.add(name)
        return name

    def _fresh(self, suffix: str) -> str:
        name, i = f"{self._name}/{suffix}", 1
        while name in self.used_names or name in self.input_shapes:
            i += 1
            name = f"{self._name}/{suffix}_{i}"
        self.used_names.add(name)
        return name

    def _poison(self, n: onnx.NodeProto) -> None:
        for o in n.output:
            if o:
                self.values[o] = _POISON

    # ---------------------------------------------------------- folding

    def _fold(self, n: onnx.NodeProto, ins: Sequence[Value | None]) -> bool:
        """Evaluate ``n`` now when its inputs are constants (or it reads only shapes)."""
        if n.op_type == "Constant":
            (out,) = _run_node(n, {}, self.opset)
            self.values[n.output[0]] = out
            return True
        if n.op_type in ("Shape", "Size") and isinstance(ins[0], int):
            shape = np.array(self.b.shape(ins[0]), np.int64)
            if n.op_type == "Size":
                self.values[n.output[0]] = np.array(int(np.prod(shape)), np.int64)
            else:
                a = node_attrs(n)
                self.values[n.output[0]] = shape[a.get("start", 0):a.get("end", len(shape))]
            return True
        if n.op_type in _NONDETERMINISTIC:
            return False
        if not n.input or any(isinstance(v, int) for v in ins):
            return False
        feeds = {i: v for i, v in zip(n.input, ins, strict=True)
                 if i and isinstance(v, np.ndarray)}
        if len(feeds) != len({i for i in n.input if i}):  # a name may be read twice
            return False
        self._fold_size_check(n, feeds)
        try:
            outs = _run_node(n, feeds, self.opset)
        except Exception as e:
            raise _Unsupported(f"cannot fold constants: {str(e).splitlines()[0]}") from None
        for o, v in zip(n.output, outs, strict=False):
            if o:
                arr = np.asarray(v)
                if arr.dtype == np.float64 or arr.dtype == np.float16:
                    raise _Unsupported(f"a constant of dtype {arr.dtype} (compute dtype must "
                                       "be float32)")
                self.values[o] = arr
        return True

    def _fold_size_check(self, n: onnx.NodeProto, feeds: Mapping[str, Array]) -> None:
        """Refuse to fold a constant larger than a file could mean (a hostile
        ConstantOfShape / Expand / Tile / Range would exhaust memory)."""
        size: float = 0
        want = self.elem_shape(n.output[0]) if n.output else None
        if want is not None:
            size = math.prod(want)
        elif n.op_type == "ConstantOfShape":
            size = float(np.prod(np.asarray(feeds[n.input[0]], np.float64)))
        elif n.op_type in ("Expand", "Tile", "Range"):
            vals = [np.asarray(v, np.float64) for v in feeds.values()]
            if n.op_type == "Range" and all(v.size == 1 for v in vals):
                start, limit, delta = (float(v.reshape(-1)[0]) for v in vals)
                size = abs((limit - start) / delta) if delta else math.inf
            else:  # the product of the sizes and the shape / repeats values
                size = float(np.prod([float(v.size) for v in vals])) * float(
                    np.prod(np.abs(vals[-1]))) if vals else 0.0
        if not size <= _MAX_FOLD_ELEMENTS:
            raise _Unsupported(f"a constant of {size:.3g} elements (at most "
                               f"{_MAX_FOLD_ELEMENTS} are folded)")

    # ---------------------------------------------------------- helpers

    def node_of(self, v: Value | None, what: str) -> int:
        """The node of a value; a float constant read as data (a class token
        concatenated to the patches) becomes a constant node, one per array."""
        if isinstance(v, int):
            return v
        if not isinstance(v, np.ndarray):
            raise _Unsupported(f"{what} is missing")
        if v.dtype.kind != "f" or v.ndim == 0:
            raise _Unsupported(f"{what} is a {v.dtype} constant of shape {v.shape} (a data "
                               "input must be a float32 tensor)")
        made = self.constant_nodes.get(id(v))
        if made is None:
            nid = self.b.constant(v.shape, name=self._fresh("constant"))
            self.b.set_weights(nid, {"value": v})
            # Held here, the array keeps its id for the import.
            made = self.constant_nodes[id(v)] = (v, nid)
        return made[1]

    def const_of(self, v: Value | None, what: str) -> Array:
        if isinstance(v, np.ndarray):
            return v
        raise _Unsupported(f"{what} must be a constant")

    def shape(self, x: int) -> tuple[int, ...]:
        return self.b.shape(x)

    def reshape(self, x: int, shape: Sequence[int], final: bool = False) -> int:
        shape = tuple(int(d) for d in shape)
        if self.shape(x) == shape and not final:
            return x
        return self.b.reshape(x, shape, name=self._name if final else self._fresh("reshape"))

    def affine(self, x: int, scale: Array | None, shift: Array | None, final: bool = True
               ) -> int:
        """x * scale + shift with constants broadcast into x's shape: a batch
        norm (mean 0, var + eps = 1) over a view whose axis 1 holds the span of
        axes the constants vary along."""
        s = self.shape(x)
        r = len(s)
        consts = [np.asarray(c, np.float64) for c in (scale, shift) if c is not None]
        try:
            cshape = np.broadcast_shapes(*(c.shape for c in consts))
            if len(cshape) > r or np.broadcast_shapes(cshape, s) != s:
                raise ValueError
        except ValueError:
            raise _Unsupported(f"a constant of shape {cshape if consts else ()} does not "
                               f"broadcast into {s}") from None
        full = (1,) * (r - len(cshape)) + tuple(cshape)
        varying = [i for i, d in enumerate(full) if d != 1]
        if varying:
            i, j = varying[0], varying[-1]
        else:
            i = j = 1 if r >= 2 else 0
        block = s[i:j + 1]
        before, inner, after = math.prod(s[:i]), math.prod(block), math.prod(s[j + 1:])

        def expand(c: Array | None, fill: float) -> Array:
            if c is None:
                return np.full(inner, fill)
            c = np.asarray(c, np.float64).reshape((1,) * (r - c.ndim) + c.shape)
            return np.broadcast_to(_block(c, i, j), block).reshape(inner)

        # Constants along the channels alone (or scalars, spread over them):
        # the tensor itself, so that its layout (NHWC in the native plan) and
        # the fusion passes carry through; else a view of the span.
        view = s if i == j == 1 else (before, inner) if after == 1 else (before, inner, after)
        y = self.reshape(x, view)
        bn = self.b.batch_norm(y, eps=_AFFINE_EPS, scale=scale is not None,
                               name=self._name if view == s and final else self._fresh("affine"))
        # var + eps is exactly 1 in float32: y = x * scale + shift.
        arrays = {"mean": np.zeros(inner), "var": np.full(inner, 1.0 - _AFFINE_EPS),
                  "shift": expand(shift, 0.0)}
        if scale is not None:
            arrays["scale"] = expand(scale, 1.0)
        self.b.set_weights(bn, arrays)
        if view == s:
            return bn
        return self.reshape(bn, s, final=final)

    def elem_shape(self, name: str) -> tuple[int, ...] | None:
        """The value's shape from ONNX's shape inference, when fully known."""
        return self.inferred_shapes.get(name)

    def float_dtype_check(self, n: onnx.NodeProto) -> None:
        for o in n.output:
            t = self.elem_types.get(o)
            if t is not None and t not in (0, _F32):
                dt = onnx.TensorProto.DataType.Name(t).lower()
                raise _Unsupported(f"output {o!r} is {dt} (compute dtype must be float32)")


def _block(c: Array, i: int, j: int) -> Array:
    """The constant's axes i..j (its others have size 1)."""
    idx = tuple(slice(None) if i <= a <= j else 0 for a in range(c.ndim))
    return c[idx]


def _run_node(n: onnx.NodeProto, feeds: Mapping[str, Array], opset: int) -> list[Array]:
    ev = ReferenceEvaluator(n, opsets={"": opset})
    return [np.asarray(v) for v in ev.run(None, dict(feeds))]


# ------------------------------------------------------------------ mappings

Mapping_ = Callable[[_Importer, int, onnx.NodeProto, list[Value | None], dict[str, Any]],
                    list[Value]]


def _spatial(a: dict[str, Any], name: str, nd: int, default: int) -> tuple[int, ...]:
    """A per-spatial-axis attribute (strides, dilations), ``nd`` values."""
    v = tuple(int(x) for x in a.get(name, [default] * nd))
    if len(v) != nd:
        raise _Unsupported(f"{name} {list(v)} for {nd} spatial axes")
    return v


def _conv_pads(auto_pad: str, size: Sequence[int], k: Sequence[int], s: Sequence[int],
               d: Sequence[int], pads: Sequence[int]) -> list[tuple[int, int]]:
    nd = len(size)
    if pads and len(pads) != 2 * nd:
        raise _Unsupported(f"pads {list(pads)} for {nd} spatial axes (2 x {nd} values)")
    if auto_pad in ("", "NOTSET"):
        p = list(pads) or [0] * (2 * nd)
        return [(p[a], p[a + nd]) for a in range(nd)]
    if auto_pad == "VALID":
        return [(0, 0)] * nd
    out = []
    for a in range(nd):
        o = -(-size[a] // s[a])
        total = max(0, (o - 1) * s[a] + (k[a] - 1) * d[a] + 1 - size[a])
        lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        out.append((lo, total - lo))
    return out


def _conv(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
          a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Conv's input")
    w = im.const_of(ins[1], "Conv's weight")
    bias = im.const_of(ins[2], "Conv's bias") if len(ins) > 2 and ins[2] is not None else None
    xs = im.shape(x)
    if w.ndim == 3 and len(xs) == 3:  # 1-D: a 2-D conv of width 1
        x4 = im.reshape(x, (*xs, 1))
        w4 = w[..., None]
        a = dict(a)
        for key in ("strides", "dilations"):
            if key in a:
                a[key] = [*a[key], 1]
        if "pads" in a:
            a["pads"] = [a["pads"][0], 0, a["pads"][1], 0]
        if "kernel_shape" in a:
            a["kernel_shape"] = [*a["kernel_shape"], 1]
        y = _conv2d(im, x4, w4, bias, a, final=False)
        return [im.reshape(y, im.shape(y)[:3], final=True)]
    if w.ndim != 4 or len(xs) != 4:
        raise _Unsupported(f"a {w.ndim - 2}-D convolution (only 1-D and 2-D map)")
    return [_conv2d(im, x, w, bias, a, final=True)]


def _conv2d(im: _Importer, x: int, w: Array, bias: Array | None, a: dict[str, Any],
            final: bool) -> int:
    xs = im.shape(x)
    k = tuple(int(d) for d in w.shape[2:])
    s = _spatial(a, "strides", 2, 1)
    d = _spatial(a, "dilations", 2, 1)
    pads = _conv_pads(as_text(a.get("auto_pad", "NOTSET")), xs[2:], k, s, d, a.get("pads", []))
    pad = (pads[0][0], pads[0][1], pads[1][0], pads[1][1])
    y = im.b.conv2d(x, int(w.shape[0]), k, stride=s, padding=pad, dilation=d,
                    groups=int(a.get("group", 1)), bias=bias is not None,
                    name=im._name if final else im._fresh("conv"))
    arrays = {"weight": w}
    if bias is not None:
        arrays["bias"] = bias
    im.b.set_weights(y, arrays)
    return y


def _bias_after(im: _Importer, n: onnx.NodeProto, out_features: int
                ) -> tuple[Array | None, str | None]:
    """The constant bias of an Add that is the sole reader of ``n``'s output
    and adds along its last axis, and that Add's output, marked absorbed
    (its output becomes the linear's)."""
    out = n.output[0]
    if im.consumers.get(out) != 1 or out in im.output_names:
        return None, None
    k = next((j for j, m in enumerate(im.nodes) if out in m.input), None)
    if k is None or im.nodes[k].op_type != "Add":
        return None, None
    m = im.nodes[k]
    other = m.input[1] if m.input[0] == out else m.input[0]
    c = im.values.get(other)
    if not isinstance(c, np.ndarray) or c.dtype != np.float32 or c.size != out_features \
            or c.shape[-1:] != (out_features,):
        return None, None
    im.absorbed.add(k)
    return c.reshape(out_features), m.output[0]


def _linear(im: _Importer, x: int, weight: Array, n: onnx.NodeProto) -> int:
    """x · weightᵀ (+ a following Add's bias) over the last axis of any rank
    >= 2 (views around it)."""
    xs = im.shape(x)
    if len(xs) < 2:
        raise _Unsupported(f"a matrix product of a {len(xs)}-D input")
    bias, alias = _bias_after(im, n, int(weight.shape[0]))
    if alias is not None and alias in im.output_names:
        im.used_names.discard(im._name)
        im._name = im._node_name_for(alias, alias)
    final = len(xs) in (2, 3)
    x2 = x if final else im.reshape(x, (math.prod(xs[:-1]), xs[-1]))
    y = im.b.linear(x2, int(weight.shape[0]), bias=bias is not None,
                    name=im._name if final else im._fresh("linear"))
    arrays = {"weight": weight}
    if bias is not None:
        arrays["bias"] = bias
    im.b.set_weights(y, arrays)
    if not final:
        y = im.reshape(y, (*xs[:-1], int(weight.shape[0])), final=True)
    if alias is not None:
        im.values[alias] = y
    return y


def _gemm(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
          a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Gemm's A")
    bmat = im.const_of(ins[1], "Gemm's B")
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    if a.get("transA", 0):
        x = im.b.transpose(x, (1, 0), name=im._fresh("transpose"))
    w = ((bmat.T if a.get("transB", 0) else bmat) * np.float64(alpha)).T
    c = ins[2] if len(ins) > 2 else None
    if c is None or beta == 0:
        return [_linear(im, x, w, n)]
    cc = im.const_of(c, "Gemm's C") * np.float64(beta)
    full = np.broadcast_to(cc, (im.shape(x)[0], w.shape[0]))
    if not np.all(full == full[:1]):
        raise _Unsupported("a C that differs between rows")
    bias = full[0]
    y = im.b.linear(x, int(w.shape[0]), bias=True, name=im._name)
    im.b.set_weights(y, {"weight": w, "bias": bias})
    return [y]


def _matmul(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
            a: dict[str, Any]) -> list[Value]:
    if isinstance(ins[1], np.ndarray):
        w = ins[1]
        if w.ndim != 2:
            raise _Unsupported(f"a constant right operand of {w.ndim} dims")
        x = im.node_of(ins[0], "MatMul's A")
        return [_linear(im, x, np.ascontiguousarray(w.T), n)]
    x, y = im.node_of(ins[0], "MatMul's A"), im.node_of(ins[1], "MatMul's B")
    sa, sb = im.shape(x), im.shape(y)
    if len(sa) < 2 or len(sb) < 2:
        raise _Unsupported("a matrix product of 1-D operands")
    if len(sa) != len(sb) or sa[:-2] != sb[:-2]:
        raise _Unsupported(f"batch dims that broadcast ({sa} by {sb})")
    if len(sa) <= 3:
        return [im.b.matmul(x, y, name=im._name)]
    bt = math.prod(sa[:-2])
    x3 = im.reshape(x, (bt, *sa[-2:]))
    y3 = im.reshape(y, (bt, *sb[-2:]))
    z = im.b.matmul(x3, y3, name=im._fresh("matmul"))
    return [im.reshape(z, (*sa[:-1], sb[-1]), final=True)]


def _binary(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
            a: dict[str, Any]) -> list[Value]:
    op = n.op_type
    p, q = ins[0], ins[1]
    if isinstance(p, np.ndarray) and isinstance(q, int):
        if op == "Add":
            return [im.affine(q, None, p)]
        if op == "Mul":
            return [im.affine(q, p, None)]
        if op == "Sub":
            return [im.affine(q, -np.ones(1), p)]
        raise _Unsupported("a constant divided by a value (a reciprocal kernel is needed)")
    if isinstance(p, int) and isinstance(q, np.ndarray):
        c = q.astype(np.float64)
        if op == "Add":
            return [im.affine(p, None, c)]
        if op == "Sub":
            return [im.affine(p, None, -c)]
        if op == "Mul":
            return [im.affine(p, c, None)]
        return [im.affine(p, 1.0 / c, None)]
    x, y = im.node_of(p, f"{op}'s A"), im.node_of(q, f"{op}'s B")
    if op == "Div":
        raise _Unsupported("a division of two values (a division kernel is needed)")
    if op == "Sub":
        y = im.affine(y, -np.ones(1), None, final=False)
    sx, sy = im.shape(x), im.shape(y)
    try:
        out = np.broadcast_shapes(sx, sy)
    except ValueError:
        raise _Unsupported(f"shapes {sx} and {sy} do not broadcast") from None
    if out != sx:
        if out != sy:
            raise _Unsupported(f"shapes {sx} and {sy} broadcast both ways (an expand is "
                               "needed)")
        x, y, sx, sy = y, x, sy, sx
    if len(sy) < len(sx):
        y = im.reshape(y, (1,) * (len(sx) - len(sy)) + sy)
    if op == "Mul":
        return [im.b.mul(x, y, name=im._name)]
    return [im.b.add(x, y, name=im._name)]


def _eltwise(kind: str) -> Mapping_:
    def f(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
          a: dict[str, Any]) -> list[Value]:
        if kind == "gelu" and as_text(a.get("approximate", "none")) != "none":
            raise _Unsupported("the tanh approximation (a kernel is needed)")
        return [im.b.eltwise(im.node_of(ins[0], n.op_type), kind, name=im._name)]
    return f


def _clip(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
          a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Clip's input")
    lo = a.get("min", -np.inf)
    hi = a.get("max", np.inf)
    if len(ins) > 1 and ins[1] is not None:
        lo = float(im.const_of(ins[1], "Clip's min"))
    if len(ins) > 2 and ins[2] is not None:
        hi = float(im.const_of(ins[2], "Clip's max"))
    if lo == 0 and hi == 6:
        return [im.b.eltwise(x, "relu6", name=im._name)]
    if lo == 0 and hi == np.inf:
        return [im.b.eltwise(x, "relu", name=im._name)]
    raise _Unsupported(f"Clip to [{lo}, {hi}] (only ReLU and ReLU6 map; a clip kernel is "
                       "needed)")


def _hard_sigmoid_of(im: _Importer, x: int, alpha: float, beta: float, final: bool) -> int:
    """max(0, min(1, alpha x + beta)) = relu6(6 alpha x + 6 beta) / 6."""
    t = im.affine(x, np.array([6.0 * alpha]), np.array([6.0 * beta]), final=False)
    r = im.b.eltwise(t, "relu6", name=im._fresh("relu6"))
    return im.affine(r, np.array([1.0 / 6.0]), None, final=final)


def _hard_sigmoid(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                  a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "HardSigmoid's input")
    return [_hard_sigmoid_of(im, x, float(a.get("alpha", 0.2)), float(a.get("beta", 0.5)),
                             True)]




def _pool(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
          a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], f"{n.op_type}'s input")
    if len(n.output) > 1 and n.output[1]:
        raise _Unsupported("the indices output")
    xs = im.shape(x)
    ks = tuple(a.get("kernel_shape", []))
    if len(xs) != 4 or len(ks) != 2:
        raise _Unsupported(f"a {len(ks)}-D pooling (only 2-D maps)")
    if any(d != 1 for d in _spatial(a, "dilations", 2, 1)):
        raise _Unsupported("dilated pooling (a kernel is needed)")
    s = _spatial(a, "strides", 2, 1)
    pads = _conv_pads(as_text(a.get("auto_pad", "NOTSET")), xs[2:], ks, s, (1, 1),
                      a.get("pads", []))
    pad = (pads[0][0], pads[0][1], pads[1][0], pads[1][1])
    kind = "max" if n.op_type == "MaxPool" else "avg"
    ceil = bool(a.get("ceil_mode", 0))
    y = im.b.pool2d(x, kind, ks, stride=s, padding=pad, ceil_mode=ceil,
                    count_include_pad=bool(a.get("count_include_pad", 0)), name=im._name)
    want = im.elem_shape(n.output[0])
    if want is not None and want != im.shape(y):
        raise _Unsupported(f"output shape {im.shape(y)} differs from ONNX's {want} "
                           "(ceil_mode rule)")
    return [y]


def _global_pool(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                 a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], f"{n.op_type}'s input")
    xs = im.shape(x)
    if len(xs) != 4:
        raise _Unsupported(f"a {len(xs) - 2}-D global pooling (only 2-D maps)")
    if n.op_type == "GlobalMaxPool":
        return [im.b.pool2d(x, "max", xs[2:], stride=1, name=im._name)]
    y = im.b.global_avg_pool(x, name=im._fresh("gap"))
    return [im.reshape(y, (*xs[:2], 1, 1), final=True)]


def _reduce_mean(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                 a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "ReduceMean's input")
    xs = im.shape(x)
    axes = a.get("axes")
    if len(ins) > 1 and ins[1] is not None:
        axes = [int(v) for v in im.const_of(ins[1], "ReduceMean's axes").reshape(-1)]
    if axes is None:
        raise _Unsupported("a mean over every axis")
    ax = sorted(int(v) % len(xs) for v in axes)
    if len(xs) != 4 or ax != [2, 3]:
        raise _Unsupported(f"a mean over axes {ax} of {xs} (only (H, W) of NCHW maps)")
    y = im.b.global_avg_pool(x, name=im._fresh("gap"))
    keep = int(a.get("keepdims", 1))
    return [im.reshape(y, (*xs[:2], 1, 1) if keep else xs[:2], final=True)]


def _batch_norm(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                a: dict[str, Any]) -> list[Value]:
    if a.get("training_mode", 0) or (len(n.output) > 1 and any(n.output[1:])):
        raise _Unsupported("training mode")
    x = im.node_of(ins[0], "BatchNormalization's input")
    sc, sh, mean, var = (im.const_of(v, "BatchNormalization's statistics") for v in ins[1:5])
    y = im.b.batch_norm(x, eps=float(a.get("epsilon", 1e-5)), name=im._name)
    im.b.set_weights(y, {"mean": mean, "var": var, "scale": sc, "shift": sh})
    return [y]


def _layer_norm(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
                a: dict[str, Any]) -> list[Value]:
    if len(n.output) > 1 and any(n.output[1:]):
        raise _Unsupported("the mean / inverse std outputs")
    x = im.node_of(ins[0], "LayerNormalization's input")
    xs = im.shape(x)
    if int(a.get("axis", -1)) % len(xs) != len(xs) - 1:
        raise _Unsupported("normalisation over more than the last axis (a kernel is needed)")
    d = xs[-1]
    scale = np.broadcast_to(im.const_of(ins[1], "LayerNormalization's scale"), (d,))
    shift = (np.broadcast_to(im.const_of(ins[2], "LayerNormalization's bias"), (d,))
             if len(ins) > 2 and ins[2] is not None else np.zeros(d, np.float32))
    y = im.b.layer_norm(x, eps=float(a.get("epsilon", 1e-5)), name=im._name)
    im.b.set_weights(y, {"scale": scale, "shift": shift})
    return [y]


def _softmax(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
             a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Softmax's input")
    xs = im.shape(x)
    default = -1 if im.opset >= 13 else 1
    ax = int(a.get("axis", default)) % len(xs)
    if im.opset >= 13 or ax == len(xs) - 1:
        return [im.b.softmax(x, axis=ax, name=im._name)]
    # Before opset 13: softmax of the input flattened to 2-D at the axis.
    x2 = im.reshape(x, (math.prod(xs[:ax]), math.prod(xs[ax:])))
    y = im.b.softmax(x2, axis=1, name=im._fresh("softmax"))
    return [im.reshape(y, xs, final=True)]


def _concat(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
            a: dict[str, Any]) -> list[Value]:
    xs = [im.node_of(v, "a Concat input") for v in ins if v is not None]
    rank = len(im.shape(xs[0]))
    return [im.b.concat(xs, axis=int(a["axis"]) % rank, name=im._name)]


def _view(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
          a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], f"{n.op_type}'s input")
    want = im.elem_shape(n.output[0])
    xs = im.shape(x)
    if n.op_type == "Reshape":
        shape = [int(v) for v in im.const_of(ins[1], "Reshape's shape").reshape(-1)]
        if not a.get("allowzero", 0):
            shape = [xs[i] if d == 0 else d for i, d in enumerate(shape)]
        out: tuple[int, ...] = tuple(shape)
        if -1 in out:
            rest = -math.prod(out)
            out = tuple(math.prod(xs) // rest if d == -1 else d for d in out)
    elif n.op_type == "Flatten":
        ax = int(a.get("axis", 1)) % (len(xs) + 1) if xs else 0
        out = (math.prod(xs[:ax]), math.prod(xs[ax:]))
    else:
        axes = a.get("axes")
        if len(ins) > 1 and ins[1] is not None:
            axes = [int(v) for v in im.const_of(ins[1], "the axes").reshape(-1)]
        if n.op_type == "Squeeze":
            drop = ({int(v) % len(xs) for v in axes} if axes is not None
                    else {i for i, d in enumerate(xs) if d == 1})
            out = tuple(d for i, d in enumerate(xs) if i not in drop)
        else:
            r = len(xs) + len(axes or [])
            add = {int(v) % r for v in axes or []}
            it = iter(xs)
            out = tuple(1 if i in add else next(it) for i in range(r))
    if want is not None and want != out:
        raise _Unsupported(f"output shape {out} differs from ONNX's {want}")
    if not out:
        raise _Unsupported("a 0-D result")
    return [im.b.reshape(x, out, name=im._name)]


def _part(im: _Importer, x: int, axis: int, start: int, length: int, name: str) -> int:
    """Elements ``start .. start + length - 1`` of ``x`` along ``axis``: a
    view (reshape, rows, reshape) where every axis before it has size 1, else
    moved to the front by a transpose, taken as rows, and moved back."""
    xs = im.shape(x)
    out = (*xs[:axis], length, *xs[axis + 1:])
    if start == 0 and length == xs[axis]:
        return im.b.reshape(x, out, name=name)
    if math.prod(xs[:axis]) == 1:
        rows = im.b.slice(im.reshape(x, xs[axis:]), start, length, name=im._fresh("rows"))
        return im.b.reshape(rows, out, name=name)
    perm = [axis, *(i for i in range(len(xs)) if i != axis)]
    front = im.b.transpose(x, perm, name=im._fresh("to_front"))
    rows = im.b.slice(front, start, length, name=im._fresh("rows"))
    return im.b.transpose(rows, [perm.index(i) for i in range(len(xs))], name=name)


def _split(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
           a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Split's input")
    xs = im.shape(x)
    axis = int(a.get("axis", 0)) % len(xs)
    if len(ins) > 1 and ins[1] is not None:
        sizes = [int(v) for v in im.const_of(ins[1], "Split's sizes").reshape(-1)]
    elif "split" in a:
        sizes = [int(v) for v in a["split"]]
    else:
        parts = int(a.get("num_outputs", len(n.output)))
        each = -(-xs[axis] // parts)
        sizes = [min(each, xs[axis] - i * each) for i in range(parts)]
    if len(sizes) != len(n.output) or sum(sizes) != xs[axis] or min(sizes) < 1:
        raise _Unsupported(f"sizes {sizes} do not split axis {axis} of {xs} into "
                           f"{len(n.output)} parts")
    out: list[Value] = []
    start = 0
    for i, (o, size) in enumerate(zip(n.output, sizes, strict=True)):
        out.append(_part(im, x, axis, start, size, im._node_name_for(o, f"{im._name}/{i}")))
        start += size
    return out


def _slice(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
           a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Slice's input")
    xs = im.shape(x)
    starts, ends = (im.const_of(v, f"Slice's {w}").reshape(-1).tolist()
                    for v, w in ((ins[1], "starts"), (ins[2], "ends")))
    axes = (im.const_of(ins[3], "Slice's axes").reshape(-1).tolist()
            if len(ins) > 3 and ins[3] is not None else list(range(len(starts))))
    steps = (im.const_of(ins[4], "Slice's steps").reshape(-1).tolist()
             if len(ins) > 4 and ins[4] is not None else [1] * len(starts))
    cuts: list[tuple[int, int, int, int]] = []
    for s0, e0, ax0, st in zip(starts, ends, axes, steps, strict=True):
        ax = int(ax0) % len(xs)
        if int(st) < 1:
            raise _Unsupported(f"a step of {st} on axis {ax} (positive steps map)")
        begin, end, step = slice(int(s0), int(e0), int(st)).indices(xs[ax])
        count = len(range(begin, end, step))
        if count < 1:
            raise _Unsupported("an empty slice")
        if count != xs[ax]:
            cuts.append((ax, begin, step, count))
    if not cuts:
        return [im.reshape(x, xs, final=True)]
    y = x
    for i, (ax, begin, step, count) in enumerate(cuts):
        y = _strided_part(im, y, ax, begin, step, count,
                          im._name if i == len(cuts) - 1 else im._fresh("slice"))
    return [y]


def _strided_part(im: _Importer, x: int, axis: int, start: int, step: int, count: int,
                  name: str) -> int:
    """Elements start, start + step, ... (``count`` of them) of ``x`` along
    ``axis``: with step 1 a part; else a part of ``count * step`` elements
    seen as (count, step), of which one column is taken (a patch merge's
    ``x[:, 0::2, 1::2]``); where the axis holds fewer, it is first lengthened
    by a constant block."""
    if step == 1:
        return _part(im, x, axis, start, count, name)
    xs = im.shape(x)
    span = count * step
    if span > xs[axis]:
        extra = (*xs[:axis], start + span - xs[axis], *xs[axis + 1:])
        x = im.b.concat([x, im.node_of(np.zeros(extra, np.float32), "a step's end")],
                        axis=axis, name=im._fresh("lengthen"))
        xs = im.shape(x)
    column = max(0, start + span - xs[axis])  # the part ends within the axis
    whole = _part(im, x, axis, start - column, span, im._fresh("span"))
    grid = im.reshape(whole, (*xs[:axis], count, step, *xs[axis + 1:]))
    picked = _part(im, grid, axis + 1, column, 1, im._fresh("every"))
    return im.b.reshape(picked, (*xs[:axis], count, *xs[axis + 1:]), name=name)


def _pad(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
         a: dict[str, Any]) -> list[Value]:
    """A constant-mode Pad of a value: per padded axis, a concat of constant
    blocks of the pad value around it (zero pads, as a window's padding to a
    multiple of its size often is, make a view)."""
    if as_text(a.get("mode", "constant")) != "constant":
        raise _Unsupported(f"mode {as_text(a['mode'])!r} (only 'constant' maps)")
    x = im.node_of(ins[0], "Pad's input")
    xs = im.shape(x)
    if len(ins) > 1:  # opset 11 on: pads, value and axes are inputs
        pads = im.const_of(ins[1], "Pad's pads").reshape(-1).tolist()
        value = (float(im.const_of(ins[2], "Pad's value").reshape(-1)[0])
                 if len(ins) > 2 and ins[2] is not None else 0.0)
        axes = (im.const_of(ins[3], "Pad's axes").reshape(-1).tolist()
                if len(ins) > 3 and ins[3] is not None else list(range(len(xs))))
    else:
        pads, value, axes = list(a.get("pads", [])), float(a.get("value", 0.0)), \
            list(range(len(xs)))
    if len(pads) != 2 * len(axes):
        raise _Unsupported(f"{len(pads)} pads for {len(axes)} axes")
    y = x
    padded = [(int(ax) % len(xs), int(b), int(e))
              for ax, b, e in zip(axes, pads[:len(axes)], pads[len(axes):], strict=True)
              if b or e]
    grown = list(xs)
    for ax, before, after in padded:
        if before < 0 or after < 0:
            raise _Unsupported(f"a negative pad (a crop) on axis {ax}")
        grown[ax] += before + after
    if math.prod(grown) > _MAX_FOLD_ELEMENTS:  # a hostile file's pads
        raise _Unsupported(f"a pad to {tuple(grown)} (at most {_MAX_FOLD_ELEMENTS} elements)")
    for ax, before, after in padded:
        ys = im.shape(y)

        def block(size: int) -> int:
            shape = ys[:ax] + (size,) + ys[ax + 1:]
            return im.node_of(np.full(shape, value, np.float32), "Pad's value")

        parts = ([block(before)] if before else []) + [y] + ([block(after)] if after else [])
        last = ax == padded[-1][0]
        y = im.b.concat(parts, axis=ax, name=im._name if last else im._fresh("pad"))
    if not padded:
        return [im.reshape(x, xs, final=True)]
    return [y]


def _transpose(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
               a: dict[str, Any]) -> list[Value]:
    x = im.node_of(ins[0], "Transpose's input")
    r = len(im.shape(x))
    perm = a.get("perm", list(range(r))[::-1])
    return [im.b.transpose(x, [int(p) % r for p in perm], name=im._name)]


def _gather(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
            a: dict[str, Any]) -> list[Value]:
    idx_name = n.input[1]
    table = ins[0]
    if isinstance(table, int) and isinstance(ins[1], np.ndarray):
        return [_gather_range(im, table, ins[1], int(a.get("axis", 0)))]
    if not (isinstance(table, np.ndarray) and table.ndim == 2 and table.dtype == np.float32
            and int(a.get("axis", 0)) == 0 and idx_name in im.input_shapes
            and im.input_dtypes[idx_name] == "int64"):
        raise _Unsupported("only rows of a constant 2-D float table by an int64 graph input "
                           "map (embedding lookups)")
    shape = im.input_shapes[idx_name]
    numel = math.prod(shape)
    if idx_name not in im.index_inputs:
        im.index_inputs[idx_name] = im.b.input(idx_name, (numel, 1), "int64")
    e = im.b.embedding_bag(im.index_inputs[idx_name], int(table.shape[0]), int(table.shape[1]),
                           mode="sum", name=im._fresh("embedding") if shape != (numel,)
                           else im._name)
    im.b.set_weights(e, {"table": table})
    if shape == (numel,):
        return [e]
    return [im.reshape(e, (*shape, int(table.shape[1])), final=True)]


def _gather_range(im: _Importer, x: int, idx: Array, axis: int) -> int:
    """Gather of a value by constant indices that run in a row (``x[:, 0]``,
    an exporter's ``as_strided``): a part of ``x`` along ``axis``, reshaped."""
    xs = im.shape(x)
    axis %= len(xs)
    flat = np.asarray(idx, dtype=np.int64).reshape(-1)
    if flat.size == 0 or np.any((flat < -xs[axis]) | (flat >= xs[axis])):
        raise _Unsupported(f"indices out of range for axis {axis} of {xs}")
    flat = flat % xs[axis]
    if np.any(np.diff(flat) != 1):
        raise _Unsupported("indices that do not run in a row (a general gather of a value)")
    out = (*xs[:axis], *idx.shape, *xs[axis + 1:])
    if not out:
        raise _Unsupported("a 0-D result")
    part = _part(im, x, axis, int(flat[0]), int(flat.size), im._fresh("part"))
    return im.reshape(part, out, final=True)


def _identity(im: _Importer, k: int, n: onnx.NodeProto, ins: list[Value | None],
              a: dict[str, Any]) -> list[Value]:
    if n.op_type == "Cast" and int(a["to"]) != _F32:
        raise _Unsupported(f"a cast of a computed value to "
                           f"{onnx.TensorProto.DataType.Name(int(a['to'])).lower()} (compute "
                           "dtype must be float32)")
    if n.op_type == "Dropout" and len(n.output) > 1 and n.output[1]:
        raise _Unsupported("the mask output")
    x = im.node_of(ins[0], f"{n.op_type}'s input")
    if n.output[0] in im.output_names:  # the output keeps its name
        return [im.b.reshape(x, im.shape(x), name=im._name)]
    return [x]


_MAPPINGS: dict[str, Mapping_] = {
    "Conv": _conv,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Add": _binary,
    "Sub": _binary,
    "Mul": _binary,
    "Div": _binary,
    "Relu": _eltwise("relu"),
    "Sigmoid": _eltwise("sigmoid"),
    "Tanh": _eltwise("tanh"),
    "Gelu": _eltwise("gelu"),
    "Clip": _clip,
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _eltwise("hardswish"),
    "Swish": _eltwise("swish"),
    "MaxPool": _pool,
    "AveragePool": _pool,
    "GlobalAveragePool": _global_pool,
    "GlobalMaxPool": _global_pool,
    "ReduceMean": _reduce_mean,
    "BatchNormalization": _batch_norm,
    "LayerNormalization": _layer_norm,
    "Softmax": _softmax,
    "Concat": _concat,
    "Reshape": _view,
    "Flatten": _view,
    "Squeeze": _view,
    "Unsqueeze": _view,
    "Transpose": _transpose,
    "Split": _split,
    "Slice": _slice,
    "Pad": _pad,
    "Gather": _gather,
    "Identity": _identity,
    "Dropout": _identity,
    "Cast": _identity,
}
