"""Reading an ONNX file: its bytes within a size bound, its external data,
onnx's checker and the bounds on geometry attributes, the opset, the file's
inputs (shapes with the batch set, dtypes) and initialisers, and the model
with its inputs fixed, shape-inferred. Every refusal is one line naming the
file."""

from __future__ import annotations

import ast
import hashlib
import math
import operator
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference
from onnx.reference import ReferenceEvaluator

from pyparbench._checks import check_shapes
from pyparbench.graph.onnx.values import F32, INT_TYPES, Array, bad

__all__ = ["DEFAULT_MAX_BYTES", "FileInputs", "check", "default_opset", "load",
           "read_inputs", "symbolic_dims", "with_fixed_inputs"]

# Largest file (with its external data) the importer reads: 4 GiB.
DEFAULT_MAX_BYTES = 4 << 30
# The oldest opset of the default domain that maps.
OLDEST_OPSET = 7


def load(model: str | os.PathLike[str] | onnx.ModelProto, max_bytes: int
         ) -> tuple[onnx.ModelProto, str, str]:
    """The model with its external data, a name for messages, its content hash."""
    if isinstance(model, onnx.ModelProto):
        data = model.SerializeToString()
        if len(data) > max_bytes:
            raise bad("model", f"{len(data)} bytes is more than max_bytes={max_bytes}")
        return model, "model", hashlib.sha256(data).hexdigest()
    path = Path(os.fspath(model))
    src = f"ONNX file {str(path)!r}"
    if not path.is_file():
        raise bad(src, "no such file")
    size = path.stat().st_size
    if size > max_bytes:
        raise bad(src, f"{size} bytes is more than max_bytes={max_bytes}")
    data = path.read_bytes()
    if not data:
        raise bad(src, "the file is empty: not an ONNX model")
    try:
        proto = onnx.load_model_from_string(data)
    except Exception as e:  # protobuf's DecodeError and the like
        raise bad(src, f"not an ONNX model, or a truncated one ({type(e).__name__})") from None
    if not proto.graph.node and not proto.graph.output or not proto.opset_import:
        raise bad(src, "not an ONNX model (no graph, outputs or opset), or a truncated one")
    external = [t for t in _all_tensors(proto.graph)
                if t.data_location == onnx.TensorProto.EXTERNAL]
    if external:
        total = size
        for t in external:
            info = {e.key: e.value for e in t.external_data}
            loc = path.parent / info.get("location", "")
            if not info.get("location") or not loc.is_file():
                raise bad(src, f"external data of tensor {t.name!r} is missing "
                          f"({str(loc)!r} not found)")
            total += int(info.get("length", loc.stat().st_size))
            if total > max_bytes:
                raise bad(src, f"with its external data more than max_bytes={max_bytes} "
                          "bytes")
        try:
            onnx.external_data_helper.load_external_data_for_model(proto, str(path.parent))
        except Exception as e:
            raise bad(src, f"external data cannot be read: {e}") from None
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
# The ops whose weights (input 1) hold the kernel in their axes 2 and on.
_KERNEL_OPS = frozenset({"Conv", "ConvTranspose"})
_DEFAULT_DOMAINS = ("", "ai.onnx")


def check(proto: onnx.ModelProto, src: str) -> None:
    """onnx's checker, the bound on every geometry attribute, and each
    convolution's kernel_shape against its weights."""
    try:
        onnx.checker.check_model(proto)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise bad(src, f"not a valid ONNX model, or a truncated one: {first}") from None
    for n in proto.graph.node:
        for a in n.attribute:
            if a.name not in _GEOMETRY_ATTRS:
                continue
            values = [a.i] if a.type == onnx.AttributeProto.INT else list(a.ints)
            if any(abs(v) > _GEOMETRY_BOUND for v in values):
                raise bad(src, f"node {n.name or n.op_type!r} ({n.op_type}) has {a.name} "
                          f"{values}: beyond {_GEOMETRY_BOUND} (not a real network's)")
    _check_kernel_shapes(proto.graph, src)
    _check_not_quantized(proto.graph, src)


# The ops of quantized files that the importer does not map (QDQ pairs,
# dynamic quantization's DynamicQuantizeLinear -> MatMulInteger /
# ConvInteger and the QOperator format's QLinear ops are imported,
# graph/onnx/convert_quantized.py, convert_dynamic_quant.py,
# convert_qoperator.py): ONNX Runtime's fused and contrib ops.
_QUANTIZED_OPS = ("MatMulIntegerToFloat", "QAttention",
                  "QEmbedLayerNormalization", "DynamicQuantizeLSTM", "QLinearLeakyRelu",
                  "QLinearReduceMean", "QLinearWhere", "QOrderedMatMul", "QLinearConvTranspose")


def _check_not_quantized(g: onnx.GraphProto, src: str) -> None:
    """A quantized file (onnxruntime.quantization, Neural Compressor, NNCF)
    with an op the importer does not map is refused saying so and naming
    those ops, before any of its int8 tensors is reported on its own."""
    found: dict[str, int] = {}
    for n in g.node:
        if n.op_type in _QUANTIZED_OPS and n.domain == "com.microsoft":
            found[n.op_type] = found.get(n.op_type, 0) + 1
    if found:
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(found.items()))
        raise bad(src, f"a quantized model ({ops}): these ONNX Runtime quantized ops are not "
                  "imported; import the float32 model it was made from, or quantize it "
                  "with QuantFormat.QDQ (quantize_static) or quantize_dynamic without "
                  "graph optimisation")


def _check_kernel_shapes(g: onnx.GraphProto, src: str) -> None:
    """A convolution's kernel_shape must be its weights' spatial shape (onnx's
    checker lets a 99x99 kernel_shape over 3x3 weights through). The weights
    checked are the file's own, initialisers or Constant nodes; the Conv
    converter checks weights computed from them."""
    shapes = {t.name: tuple(t.dims) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.domain in _DEFAULT_DOMAINS and n.output:
            for a in n.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    shapes[n.output[0]] = tuple(a.t.dims)
    for n in g.node:
        if n.op_type not in _KERNEL_OPS or n.domain not in _DEFAULT_DOMAINS or len(n.input) < 2:
            continue
        weights = shapes.get(n.input[1])
        kernel = next((list(a.ints) for a in n.attribute if a.name == "kernel_shape"), None)
        if weights is not None and kernel is not None and kernel != list(weights[2:]):
            raise bad(src, f"node {n.name or n.op_type!r} ({n.op_type}) has kernel_shape "
                      f"{kernel}, but its weights {n.input[1]!r} have shape {weights}: a "
                      f"kernel of {weights[2:]}")


def default_opset(proto: onnx.ModelProto, src: str) -> int:
    """The opset of the default domain the model declares, from the oldest
    that maps to the newest the installed onnx knows: a newer one's ops would
    be read (checked, shape-inferred, folded) with an older opset's semantics."""
    opset = next((o.version for o in proto.opset_import if o.domain in _DEFAULT_DOMAINS), 0)
    if opset < OLDEST_OPSET:
        raise bad(src, f"opset {opset} is older than the oldest supported ({OLDEST_OPSET})")
    newest = onnx.defs.onnx_opset_version()
    if opset > newest:
        raise bad(src, f"opset {opset} is newer than opset {newest}, the newest the installed "
                  f"onnx {onnx.__version__} knows (its ops would be read with an older "
                  "opset's semantics)")
    return opset


@dataclass(frozen=True)
class FileInputs:
    """The file's initialisers and graph inputs as the import reads them."""

    initialisers: dict[str, Array]
    shapes: dict[str, tuple[int, ...]]  # each input's shape, the batch set
    dtypes: dict[str, str]  # "float32", or "int64" for indices of either int width
    batch: int


def symbolic_dims(g: onnx.GraphProto) -> dict[str, list[tuple[str, int]]]:
    """Each named symbolic dimension of the graph's inputs past axis 0 (the
    batch): name -> the (input, axis) pairs it sizes. A dimension written as
    arithmetic on others (``past_len + 1``, as ``torch.export`` names a
    derived one) is not listed itself: the names it reads are."""
    weights = {t.name for t in g.initializer}
    out: dict[str, list[tuple[str, int]]] = {}
    for vi in g.input:
        if vi.name in weights or not vi.type.HasField("tensor_type"):
            continue
        for ax, d in enumerate(vi.type.tensor_type.shape.dim):
            if ax > 0 and not (d.HasField("dim_value") and d.dim_value > 0) and d.dim_param:
                for name in _dimension_names(d.dim_param):
                    out.setdefault(name, []).append((vi.name, ax))
    return out


# The arithmetic a derived dimension's name may write.
_DIM_OPERATORS: dict[type[ast.AST], Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def _dimension_expression(param: str) -> ast.expr | None:
    """``param`` parsed as integer arithmetic on names (``past_len + 1``,
    ``2*s0``, as sympy prints them), or None when it is not one (a plain
    name is one; so is ``seq-len``, with no space around its ``-``)."""
    if not any(c in param for c in " */%("):
        return None
    try:
        tree = ast.parse(param, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        allowed = (isinstance(node, ast.Name | ast.Load) or type(node) in _DIM_OPERATORS
                   or isinstance(node, ast.BinOp) and type(node.op) in _DIM_OPERATORS
                   or isinstance(node, ast.Constant) and type(node.value) is int)
        if not allowed:
            return None
    return tree


def _dimension_names(param: str) -> list[str]:
    """The names a symbolic dimension is sized by: itself, or those its
    arithmetic reads."""
    tree = _dimension_expression(param)
    if tree is None or isinstance(tree, ast.Name):
        return [param]
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)})


def _derived_size(param: str, sizes: Mapping[str, int]) -> int | None:
    """A derived dimension's size from the sizes of the names it reads, or
    None when it is not arithmetic or reads a name without a size."""
    tree = _dimension_expression(param)
    if tree is None or isinstance(tree, ast.Name):
        return None

    def value(node: ast.expr) -> int | None:
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, int) else None
        if isinstance(node, ast.Name):
            return sizes.get(node.id)
        assert isinstance(node, ast.BinOp)  # _dimension_expression allows nothing else
        left, right = value(node.left), value(node.right)
        if left is None or right is None or (right == 0 and type(node.op) in (ast.FloorDiv,
                                                                               ast.Mod)):
            return None
        return _DIM_OPERATORS[type(node.op)](left, right)

    return value(tree)


# Integer types of a quantized file's weights and zero points.
_GRID_TYPES = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
# The ops that read them: QDQ pairs, dynamic quantization, the QOperator
# format (its com.microsoft ops included).
_GRID_READERS = {"QuantizeLinear", "DequantizeLinear", "MatMulInteger", "ConvInteger",
                 "QLinearConv", "QLinearMatMul"}
_CONTRIB_GRID_READERS = {"QGemm", "DynamicQuantizeMatMul", "QLinearAdd", "QLinearMul", "QLinearSigmoid",
                         "QLinearLeakyRelu", "QLinearGlobalAveragePool", "QLinearAveragePool",
                         "QLinearConcat", "QLinearSoftmax"}


def _grid_values(g: onnx.GraphProto) -> set[str]:
    """Names read by quantized ops alone: a quantized file's int8 / uint8
    weights and zero points, which no other op computes with (a Gather of
    a quantized embedding table whose rows a DequantizeLinear reads counts
    as one)."""
    readers: dict[str, set[str]] = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, set()).add(n.op_type)
    quant: set[str] = set()
    other: set[str] = set()
    for n in g.node:
        q = (n.op_type in _GRID_READERS and n.domain in _DEFAULT_DOMAINS) or (
            n.op_type in _CONTRIB_GRID_READERS and n.domain == "com.microsoft") or (
            n.op_type == "Gather" and readers.get(n.output[0]) == {"DequantizeLinear"})
        (quant if q else other).update(n.input[:1] if q and n.op_type == "Gather" else n.input)
    return quant - other


def read_inputs(g: onnx.GraphProto, src: str, want_batch: int | None,
                want_shapes: Mapping[str, int] | None = None) -> FileInputs:
    """The initialisers (float32, integer or bool, finite) and every graph
    input's dtype and shape, a symbolic batch set to ``want_batch`` (or 1)
    and every other symbolic dimension to its size in ``want_shapes`` (by
    the name the file gives it: ``past_sequence_length``, ``seq``)."""
    want_shapes = check_shapes(want_shapes)
    named = symbolic_dims(g)
    # A name given whole matches too (a dimension named "seq-len" is not seq - len).
    written = {d.dim_param for vi in g.input if vi.type.HasField("tensor_type")
               for d in vi.type.tensor_type.shape.dim}
    unknown = sorted(set(want_shapes) - set(named) - written)
    if unknown:
        has = ", ".join(sorted(named)) or "none"
        raise bad(src, f"shapes names {', '.join(map(repr, unknown))}, which no input "
                  f"has past its batch axis (the file's symbolic dimensions: {has})")
    initialisers: dict[str, Array] = {}
    grid_values = _grid_values(g)
    for t in g.initializer:
        if t.data_type not in (F32, *INT_TYPES, onnx.TensorProto.BOOL) and not (
                t.data_type in _GRID_TYPES and t.name in grid_values):
            dt = onnx.TensorProto.DataType.Name(t.data_type).lower()
            raise bad(src, f"initializer {t.name!r} is {dt}: only float32 models "
                      "are supported (compute dtype must be float32)")
        arr = numpy_helper.to_array(t)
        if t.data_type == F32 and not np.isfinite(arr).all():
            broken = int(arr.size - np.isfinite(arr).sum())
            raise bad(src, f"initializer {t.name!r} has {broken} NaN or infinite "
                      f"value(s) of {arr.size}: a broken weight (and NaN timing is "
                      "not the model's)")
        initialisers[t.name] = arr
    batch = want_batch or 1
    fixed_batch: int | None = None
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, str] = {}
    for vi in g.input:
        if vi.name in initialisers:
            continue
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise bad(src, f"input {vi.name!r} is not a tensor")
        if tt.elem_type == F32:
            dtype = "float32"
        elif tt.elem_type in INT_TYPES:
            dtype = "int64"
        else:
            dt = onnx.TensorProto.DataType.Name(tt.elem_type).lower()
            raise bad(src, f"input {vi.name!r} is {dt}: only float32 models (with "
                      "int64 indices) are supported (compute dtype must be float32)")
        if not tt.HasField("shape"):
            raise bad(src, f"input {vi.name!r} has no shape")
        dims: list[int] = []
        for ax, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                if ax == 0:
                    if want_batch is not None and d.dim_value != want_batch:
                        raise bad(src, f"input {vi.name!r} has a fixed batch of "
                                  f"{d.dim_value}, not the batch={want_batch} asked "
                                  "for")
                    fixed_batch = d.dim_value
                dims.append(int(d.dim_value))
            elif ax == 0:
                dims.append(batch)
            elif d.dim_param in want_shapes:
                dims.append(want_shapes[d.dim_param])
            elif d.dim_param:
                size = _derived_size(d.dim_param, want_shapes)
                if size is None:
                    need = [n for n in _dimension_names(d.dim_param) if n not in want_shapes]
                    raise bad(src, f"input {vi.name!r} has a symbolic dimension "
                              f"{d.dim_param!r} at axis {ax}: give its size with "
                              f"shapes={{{', '.join(f'{n!r}: N' for n in need)}}} ("
                              + " ".join(f"--shape {n}=N" for n in need) + "); "
                              f"the file's symbolic dimensions: {', '.join(sorted(named))}")
                if size < 1:
                    raise bad(src, f"input {vi.name!r}'s dimension {d.dim_param!r} at axis "
                              f"{ax} is {size} with the sizes given: it must be >= 1")
                dims.append(size)
            else:
                raise bad(src, f"input {vi.name!r} has an unnamed symbolic dimension at "
                          f"axis {ax}: only a named one (or the batch, axis 0) can be set")
        shapes[vi.name] = tuple(dims)
        dtypes[vi.name] = dtype
    if want_batch is None and fixed_batch is not None:
        batch = fixed_batch
    return FileInputs(initialisers, shapes, dtypes, batch)


def with_fixed_inputs(proto: onnx.ModelProto, shapes: dict[str, tuple[int, ...]], src: str
                      ) -> onnx.ModelProto:
    """The model with every input's shape fixed, shape-inferred."""
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    for vi in m.graph.input:
        if vi.name in shapes:
            shape = vi.type.tensor_type.shape
            for d, v in zip(shape.dim, shapes[vi.name], strict=True):
                d.Clear()
                d.dim_value = v
    try:
        inferred = shape_inference.infer_shapes(m, check_type=False, strict_mode=False,
                                                data_prop=True)
    except Exception as e:
        raise bad(src, f"shape inference fails: {str(e).splitlines()[0]}") from None
    try:
        return _through_shape_arithmetic(inferred)
    except Exception:  # more shapes only where the arithmetic evaluates
        return inferred


# Ops of the integer arithmetic exporters write on a tensor's shape (a
# symbolic past's length + 1, a Range of positions, the mask's sizes).
_SHAPE_ARITHMETIC = frozenset({
    "Add", "Sub", "Mul", "Div", "Cast", "Concat", "Gather", "Unsqueeze", "Squeeze", "Slice",
    "Range", "Reshape", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Where",
    "Min", "Max", "Neg", "Abs", "Identity", "Not", "And", "Or", "ConstantOfShape", "Expand"})
# Largest value folded while following shape arithmetic.
_FOLD_LIMIT = 1 << 16


# The ops whose output broadcasts their inputs.
_BROADCASTING = frozenset({"Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater", "LessOrEqual",
                           "GreaterOrEqual", "Where", "Min", "Max", "And", "Or"})


def _small_output(n: onnx.NodeProto, ins: list[Array | None]) -> bool:
    """Whether ``n``'s output on ``ins`` has at most _FOLD_LIMIT elements,
    known before it is made (a Range's count, a broadcast's shape, a
    Gather's rows, a ConstantOfShape's or an Expand's shape); the other ops'
    outputs are no larger than their inputs."""
    try:
        arrays = [np.asarray(v) for v in ins]
        if n.op_type == "Range":
            start, limit, delta = (float(a.reshape(-1)[0]) for a in arrays)
            return delta != 0 and 0 <= (limit - start) / delta <= _FOLD_LIMIT
        if n.op_type in _BROADCASTING:
            return math.prod(np.broadcast_shapes(*(a.shape for a in arrays))) <= _FOLD_LIMIT
        if n.op_type == "ConstantOfShape":
            dims = [int(d) for d in arrays[0].reshape(-1)]
            return all(d >= 0 for d in dims) and math.prod(dims) <= _FOLD_LIMIT
        if n.op_type == "Expand":
            to = tuple(int(d) for d in arrays[1].reshape(-1))
            return math.prod(np.broadcast_shapes(arrays[0].shape, to)) <= _FOLD_LIMIT
        if n.op_type == "Gather":
            return arrays[0].size * max(1, arrays[1].size) <= _FOLD_LIMIT
        return True
    except Exception:
        return False


def _fully_known(vi: onnx.ValueInfoProto) -> bool:
    tt = vi.type.tensor_type
    return tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)


def _through_shape_arithmetic(inferred: onnx.ModelProto, rounds: int = 8) -> onnx.ModelProto:
    """The shape-inferred model with the shapes of values computed from
    tensors' shapes alone added where onnx's inference stops (a Range whose
    limit is a symbolic past's length plus one, set at import): those values
    are evaluated on a copy, folded there, and shapes inferred again until
    nothing more is known. Only shapes are added; the nodes stay as they are."""
    if not any(n.op_type in ("Shape", "Size") for n in inferred.graph.node):
        return inferred
    opset = next((o.version for o in inferred.opset_import if o.domain in ("", "ai.onnx")), 0)
    folded: dict[str, Array] = {}
    m = inferred
    for _ in range(rounds):
        shapes = {vi.name: tuple(int(d.dim_value) for d in vi.type.tensor_type.shape.dim)
                  for vi in (*m.graph.input, *m.graph.value_info, *m.graph.output)
                  if _fully_known(vi)}
        small = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer
                 if np.prod(t.dims) <= _FOLD_LIMIT}
        for n in m.graph.node:
            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value" \
                    and np.prod(n.attribute[0].t.dims) <= _FOLD_LIMIT:
                small[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        new: dict[str, Array] = {}
        keep = []
        for n in m.graph.node:
            ins = [i for i in n.input if i]
            out: list[Array] | None = None
            if n.op_type in ("Shape", "Size") and ins and ins[0] in shapes:
                dims = np.array(shapes[ins[0]], np.int64)
                if n.op_type == "Size":
                    out = [np.array(int(np.prod(dims)), np.int64)]
                else:
                    a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
                    out = [dims[a.get("start", 0):a.get("end", len(dims))]]
            elif n.op_type in _SHAPE_ARITHMETIC and any(i in new for i in ins) and all(
                    i in new or i in small for i in ins) and _small_output(
                        n, [new.get(i, small.get(i)) for i in ins]):
                try:
                    res = ReferenceEvaluator(n, opsets={"": opset}).run(
                        None, {i: new.get(i, small.get(i)) for i in ins})
                    out = [np.asarray(r) for r in res]
                except Exception:
                    out = None
                if out is not None and any(r.size > _FOLD_LIMIT for r in out):
                    out = None
            if out is None:
                keep.append(n)
                continue
            new.update(zip(n.output, out, strict=False))
        if not new:
            break
        folded.update(new)
        g = helper.make_graph(
            keep, m.graph.name, m.graph.input, m.graph.output,
            [*m.graph.initializer, *(numpy_helper.from_array(v, k) for k, v in new.items())])
        copy = helper.make_model(g, opset_imports=m.opset_import)
        copy.ir_version = m.ir_version
        m = shape_inference.infer_shapes(copy, check_type=False, strict_mode=False,
                                         data_prop=True)
    if not folded:
        return inferred
    # Each value's most complete entry: the folded value's own shape, else
    # the later inference's, else the first's.
    entries = {vi.name: vi for vi in inferred.graph.value_info}
    entries.update({vi.name: vi for vi in m.graph.value_info
                    if _fully_known(vi) or vi.name not in entries})
    entries.update({k: helper.make_tensor_value_info(
        k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in folded.items()})
    outputs = {o.name for o in inferred.graph.output}
    out_model = onnx.ModelProto()
    out_model.CopyFrom(inferred)
    del out_model.graph.value_info[:]
    out_model.graph.value_info.extend(vi for k, vi in entries.items() if k not in outputs)
    later = {vi.name: vi for vi in m.graph.output if _fully_known(vi)}
    for o in out_model.graph.output:
        if not _fully_known(o) and o.name in later:
            o.CopyFrom(later[o.name])
    return out_model
