"""The import of one ONNX file's nodes: the value of every ONNX name (a node
of the graph being built, a constant, or poison), constant folding, node
names, and the one list of problems.

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

A node that folds into nothing is handed to the converter of its op type
(a :data:`Converter`, found in the table the importer is given), which
builds it through the importer's public methods: :meth:`Importer.node_of`,
:meth:`~Importer.const_of`, :meth:`~Importer.shape`,
:meth:`~Importer.reshape`, :meth:`~Importer.affine`,
:meth:`~Importer.elem_shape`, :meth:`~Importer.fresh` and the builder.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from pyparbench.graph.builder import GraphBuilder
from pyparbench.graph.ir import Graph
from pyparbench.graph.onnx.attention import fuse_attention
from pyparbench.graph.onnx.attributes import node_attrs
from pyparbench.graph.onnx.id_values import IdValue
from pyparbench.graph.onnx.load import FileInputs, with_fixed_inputs
from pyparbench.graph.onnx.liveness import live_nodes
from pyparbench.graph.onnx.mask_values import MaskValue, find_mask_values
from pyparbench.graph.onnx.quant_grid import QuantGrid
from pyparbench.graph.onnx.rewrites import REWRITES
from pyparbench.graph.onnx.rotary import POSITIONS_OP, fuse_rotary
from pyparbench.graph.onnx.values import (
    F32,
    MAX_FOLD_ELEMENTS,
    POISON,
    Array,
    Poison,
    Unsupported,
    Value,
)

__all__ = ["Converter", "Importer", "op_key"]

# Ops a constant may flow through without making any float computation of
# the network (folded at import whatever their dtype).
_NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                               "RandomUniformLike", "Multinomial", "Bernoulli"})
# The batch norm that computes x * scale + shift: its eps (the native kernel
# takes eps > 0) and var = 1 - eps are exact in float32 and sum to 1.
_AFFINE_EPS = 2.0 ** -20
# The ops reading an int64 input of the file themselves (int_input), and at
# which input: a Gather's indices, a rotary's positions.
_INT_INPUT_AT = {"Gather": 1, POSITIONS_OP: 1, "RotaryEmbedding": 3}


class Importer:
    """One file's import. Converters read and write :attr:`values` (ONNX
    name -> value), build through :attr:`builder` with :attr:`node_name` (the
    current node's name) or :meth:`fresh` names, and use the methods without
    a leading underscore."""

    def __init__(self, proto: onnx.ModelProto, src: str, inputs: FileInputs, name: str,
                 opset: int, converters: Mapping[str, Converter],
                 integer_readers: frozenset[str] = frozenset()) -> None:
        self.proto = proto
        self.src = src
        self.opset = opset
        self.converters = converters
        self.g = proto.graph
        self.builder = GraphBuilder(name)
        self.values: dict[str, Value] = dict(inputs.initialisers)
        self.problems: list[tuple[str, str, str]] = []  # (op type, node name, reason)
        self.consumers: dict[str, int] = {}
        self.readers: dict[str, list[int]] = {}  # ONNX name -> the nodes that read it
        # QDQ files: the grid of each DequantizeLinear output (its value
        # rounded there, or read by int8 nodes that round it themselves), and
        # the nodes whose values lie on a grid already.
        self.grids: dict[str, QuantGrid] = {}
        self.on_grid: dict[int, QuantGrid] = {}
        # QOperator files: the grid of each integer value, which the graph
        # holds as its real value ((q - zero point) * scale); only the ops
        # in integer_readers (their converters know the grid) may read one.
        self.integer_grids: dict[str, QuantGrid] = {}
        self.integer_readers = integer_readers
        self.absorbed: set[int] = set()  # ONNX node indexes folded into an earlier one
        self.input_shapes = inputs.shapes
        self.input_dtypes = inputs.dtypes
        self.int_inputs: dict[str, int] = {}  # int64 input -> its node
        # Padding masks of a decoder whose causal part (of this finite fill)
        # an attention applies: node -> the fill.
        self.causal_masks: dict[int, float] = {}
        # Activations whose one reader multiplies them by an up projection
        # (ONNX name -> the glu kind): the name's value is the gate itself.
        self.glu_gates: dict[str, str] = {}
        self.index_inputs: dict[str, int] = {}  # int64 input -> its (numel, 1) node
        self.float_inputs: dict[str, int] = {}
        self.used_names: set[str] = set()
        self.constant_nodes: dict[int, tuple[Array, int]] = {}  # id -> (array, its node)
        self.batch = inputs.batch
        self.elem_types: dict[str, int] = {}
        self.inferred_shapes: dict[str, tuple[int, ...]] = {}
        self.nodes: list[onnx.NodeProto] = []  # the file's nodes, rewritten
        self.producer: dict[str, int] = {}
        self.output_names: set[str] = set()
        self.node_name = ""  # the name of the node being converted

    # ---------------------------------------------------------- main loop

    def run(self) -> Graph:
        """The graph of the file's network, or one ValueError listing every
        node the IR cannot run."""
        inferred = with_fixed_inputs(self.proto, self.input_shapes, self.src)
        infos = (*inferred.graph.value_info, *inferred.graph.output)
        self.elem_types = {vi.name: vi.type.tensor_type.elem_type for vi in infos}
        for vi in infos:
            tt = vi.type.tensor_type
            if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
                self.inferred_shapes[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
        outputs = {o.name for o in self.g.output}
        nodes = list(self.g.node)
        for rewrite in REWRITES:
            nodes = rewrite(nodes, self.values, outputs)
        shapes = {**self.input_shapes, **self.inferred_shapes}
        ints = {k: v for k, v in self.input_shapes.items() if self.input_dtypes[k] == "int64"}
        nodes = fuse_rotary(nodes, self.values, outputs, shapes, self.opset, ints)
        nodes = fuse_attention(nodes, self.values, outputs, shapes, self.opset)
        for k, n in enumerate(nodes):
            for i in n.input:
                if i:
                    self.consumers[i] = self.consumers.get(i, 0) + 1
                    self.readers.setdefault(i, []).append(k)
        self.producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
        self.nodes = nodes
        live = live_nodes(nodes, [o.name for o in self.g.output],
                          known_at_import=("Shape", "Size"))
        self.output_names = {o.name for o in self.g.output}
        self._mask_values(nodes)
        for k, n in enumerate(nodes):
            if k not in live or k in self.absorbed:
                continue
            self._node(k, n)
        outs: list[int] = []
        for o in self.g.output:
            v = self._value(o.name)
            if isinstance(v, Poison):
                continue
            if not isinstance(v, int):
                self.problems.append(("(output)", o.name, "a constant graph output"))
                continue
            if self.builder.shape(v) and self.builder.dtype(v) != "float32":
                self.problems.append(("(output)", o.name, "an int64 graph output"))
                continue
            outs.append(v)
        if self.problems:
            raise ValueError(self._problem_text())
        meta = {"batch": self.batch, "family": "onnx", "opset": self.opset,
                "onnx_input_shapes": {k: list(v) for k, v in self.input_shapes.items()
                                      if k in self.float_inputs or k in self.index_inputs
                                      or k in self.int_inputs}}
        graph = self.builder.build(outs, meta)
        for node in graph.nodes:
            if any(i in self.causal_masks for i in node.inputs) and not (
                    node.op == "attention" and node.inputs.index(next(
                        i for i in node.inputs if i in self.causal_masks)) == 3):
                self.problems.append(("(causal mask)", node.name, "a decoder's causal mask "
                                      "read other than as an attention's mask"))
        if self.problems:
            raise ValueError(self._problem_text())
        return graph

    def _mask_values(self, nodes: Sequence[onnx.NodeProto]) -> None:
        """Values computed from an int64 mask alone, each one embedding
        lookup of the mask (see :mod:`~pyparbench.graph.onnx.mask_values`)."""
        try:
            found, found_ids, chain, shapes = find_mask_values(
                nodes, self.values, self.input_shapes, self.input_dtypes, self.output_names,
                self.opset, {**self.input_shapes, **self.inferred_shapes})
        except Unsupported as e:
            self.problems.append(("(computed from an int64 input)", "", str(e)))
            return
        self.absorbed |= chain
        self.values.update(shapes)
        for mv in found:
            self.values[mv.name] = self._mask_node(mv)
        for iv in found_ids:
            if iv.constant is not None:
                self.values[iv.name] = iv.constant
            elif iv.reshaped:
                self.node_name = self.node_name_for(iv.name, iv.name)
                self.values[iv.name] = self.builder.reshape(
                    self.int_input(iv.ids), iv.reshaped, name=self.node_name)
            else:
                self.values[iv.name] = self._positions_node(iv)

    def _positions_node(self, iv: IdValue) -> int:
        """The padding-aware positions of the ids: an int64 node, which a
        Gather of a constant table reads as an embedding lookup."""
        self.node_name = self.node_name_for(iv.name, iv.name)
        return self.builder.position_ids(self.int_input(iv.ids), pad_id=iv.pad_id,
                                         offset=iv.offset, name=self.node_name)

    def _mask_node(self, mv: MaskValue) -> int:
        self.node_name = self.node_name_for(mv.name, mv.name)
        e = self.builder.embedding_bag(self.index_input(mv.mask), 2, 1, mode="sum",
                                       name=self.fresh("lookup"))
        self.builder.set_weights(e, {"table": np.array([[mv.rows[0]], [mv.rows[1]]],
                                                       np.float32)})
        if not mv.causal:
            return self.reshape(e, mv.view, final=True)
        if not np.isneginf(mv.rows[0]):
            # A finite mask value: only an attention can take it, as its
            # padding mask and causal masking with that fill.
            y = self.reshape(e, mv.view, final=True)
            self.causal_masks[y] = mv.rows[0]
            return y
        # A decoder's mask: the lookup (0 or -inf per key) plus the causal
        # bias (-inf above the diagonal): -inf wherever either hides the key.
        queries, keys = mv.shape[-2:]
        seen = np.arange(keys)[None, :] <= np.arange(queries)[:, None] + keys - queries
        bias = np.broadcast_to(np.where(seen, np.float32(0), np.float32(-np.inf)),
                               mv.shape).astype(np.float32)
        return self.builder.add(self.node_of(bias, "a causal mask"), self.reshape(e, mv.view),
                                name=self.node_name)

    def int_input(self, name: str) -> int:
        """The int64 graph input ``name``, of the file's shape."""
        if name not in self.int_inputs:
            self.int_inputs[name] = self.builder.input(name, self.input_shapes[name], "int64")
        return self.int_inputs[name]

    def index_input(self, name: str) -> int:
        """The int64 graph input ``name`` (of the file's shape) viewed as
        (numel, 1): one lookup per index, as an embedding reads it."""
        if name not in self.index_inputs:
            x = self.int_input(name)
            self.index_inputs[name] = self.as_indices(x, self.node_name_for("", f"{name}/as_indices"))
        return self.index_inputs[name]

    def as_indices(self, x: int, name: str) -> int:
        """The int64 node ``x`` viewed as (numel, 1), as an embedding reads it."""
        shape = self.shape(x)
        numel = math.prod(shape)
        return x if shape == (numel, 1) else self.builder.reshape(x, (numel, 1), name=name)

    def _problem_text(self) -> str:
        counts: dict[str, list[Any]] = {}
        for op, node, why in self.problems:
            c = counts.setdefault(op, [0, node, why])
            c[0] += 1
        parts = []
        for op, (k, node, why) in counts.items():
            parts.append(f"{op} x{k} (node {node!r}{': ' + why if why else ''})")
        return f"{self.src}: unsupported ONNX ops: " + ", ".join(parts)

    def _value(self, name: str) -> Value:
        if name in self.values:
            return self.values[name]
        if name in self.input_shapes:
            if self.input_dtypes[name] == "float32":
                nid = self.builder.input(name, self.input_shapes[name])
                self.float_inputs[name] = nid
                self.values[name] = nid
                return nid
            raise Unsupported(f"int64 input {name!r} is read other than as Gather indices "
                              "of a constant table")
        raise Unsupported(f"value {name!r} is not produced by any node")

    def _node(self, k: int, n: onnx.NodeProto) -> None:
        label = n.name or (n.output[0] if n.output else f"node_{k}")
        read = n.input[0] if n.input else ""
        known = self.input_shapes.get(read, self.inferred_shapes.get(read))
        if n.op_type in ("Shape", "Size") and read not in self.values and known is not None:
            # The shape of a value nothing else needs run (see live_nodes), or of
            # an input (sized at import: a file exported with dynamic axes
            # reads its ids' shape).
            shape = np.array(known, np.int64)
            a = node_attrs(n)
            self.values[n.output[0]] = (
                np.array(int(np.prod(shape)), np.int64) if n.op_type == "Size"
                else shape[a.get("start", 0):a.get("end", len(shape))])
            return
        try:
            ins: list[Value | None] = []
            for i in n.input:
                if not i:
                    ins.append(None)
                elif _INT_INPUT_AT.get(n.op_type, len(n.input)) < len(n.input) \
                        and i == n.input[_INT_INPUT_AT[n.op_type]] \
                        and i in self.input_shapes and self.input_dtypes[i] == "int64":
                    ins.append(None)  # handled by the op's mapping (int_input)
                else:
                    ins.append(self._value(i))
        except Unsupported as e:
            self.problems.append((n.op_type, label, str(e)))
            self._poison(n)
            return
        key = op_key(n)
        if any(isinstance(v, Poison) for v in ins):
            if key not in self.converters and n.op_type != "Constant":
                self.problems.append((n.op_type, label, ""))
            self._poison(n)
            return
        try:
            if n.domain not in ("", "ai.onnx") and key not in self.converters:
                raise Unsupported(f"domain {n.domain!r}")
            if self._fold(n, ins):
                return
            fn = self.converters.get(key)
            if fn is None:
                self.problems.append((n.op_type, label, ""))
                self._poison(n)
                return
            read = next((i for i in n.input if i in self.integer_grids), None)
            if read is not None and key not in self.integer_readers:
                raise Unsupported(f"it reads the integer value {read!r} (a quantized op's "
                                  "output, which QOperator ops and DequantizeLinear read)")
            if read is None:
                self._float_dtype_check(n)
            self.node_name = self._node_name(n, label)
            outs = fn(self, k, n, ins, node_attrs(n))
        except Unsupported as e:
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
        return self.node_name_for(n.output[0] if n.output else "", label)

    def node_name_for(self, output: str, label: str) -> str:
        """A fresh node name: the output's when it is a graph output, else ``label``."""
        return self._unique(output if output in self.output_names else label)

    def fresh(self, suffix: str) -> str:
        """A fresh name for a further node the current one makes."""
        return self._unique(f"{self.node_name}/{suffix}")

    def _unique(self, base: str) -> str:
        """``base``, or ``base_2``, ``base_3``...: the first no node or input has."""
        name, i = base, 1
        while name in self.used_names or name in self.input_shapes:
            i += 1
            name = f"{base}_{i}"
        self.used_names.add(name)
        return name

    def rename_as_output(self, output: str) -> None:
        """The current node takes the name of the graph output ``output``
        (a node it absorbed wrote that output)."""
        self.used_names.discard(self.node_name)
        self.node_name = self.node_name_for(output, output)

    def absorb(self, k: int) -> None:
        """Node ``k`` of the file is folded into the current one: it is skipped."""
        self.absorbed.add(k)

    def _poison(self, n: onnx.NodeProto) -> None:
        for o in n.output:
            if o:
                self.values[o] = POISON

    # ---------------------------------------------------------- folding

    def _fold(self, n: onnx.NodeProto, ins: Sequence[Value | None]) -> bool:
        """Evaluate ``n`` now when its inputs are constants (or it reads only shapes)."""
        if n.op_type == "Constant":
            (out,) = _run_node(n, {}, self.opset)
            self.values[n.output[0]] = out
            return True
        if n.op_type in ("Shape", "Size") and isinstance(ins[0], int):
            shape = np.array(self.builder.shape(ins[0]), np.int64)
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
            # IEEE arithmetic, as a runtime computes it: T5's position buckets
            # take log(0) = -inf where a Where then picks the other branch.
            with np.errstate(all="ignore"):
                outs = _run_node(n, feeds, self.opset)
        except Exception as e:
            raise Unsupported(f"cannot fold constants: {str(e).splitlines()[0]}") from None
        for o, v in zip(n.output, outs, strict=False):
            if o:
                arr = np.asarray(v)
                if arr.dtype == np.float64 or arr.dtype == np.float16:
                    raise Unsupported(f"a constant of dtype {arr.dtype} (compute dtype must "
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
        if not size <= MAX_FOLD_ELEMENTS:
            raise Unsupported(f"a constant of {size:.3g} elements (at most "
                              f"{MAX_FOLD_ELEMENTS} are folded)")

    # ---------------------------------------------------------- helpers

    def node_of(self, v: Value | None, what: str) -> int:
        """The node of a value; a float constant read as data (a class token
        concatenated to the patches) becomes a constant node, one per array."""
        if isinstance(v, int):
            return v
        if not isinstance(v, np.ndarray):
            raise Unsupported(f"{what} is missing")
        if v.dtype.kind != "f" or v.ndim == 0:
            raise Unsupported(f"{what} is a {v.dtype} constant of shape {v.shape} (a data "
                              "input must be a float32 tensor)")
        made = self.constant_nodes.get(id(v))
        if made is None:
            nid = self.builder.constant(v.shape, name=self.fresh("constant"))
            self.builder.set_weights(nid, {"value": v})
            # Held here, the array keeps its id for the import.
            made = self.constant_nodes[id(v)] = (v, nid)
        return made[1]

    def const_of(self, v: Value | None, what: str) -> Array:
        """The constant array of a value, refused where it is computed."""
        if isinstance(v, np.ndarray):
            return v
        raise Unsupported(f"{what} must be a constant")

    def shape(self, x: int) -> tuple[int, ...]:
        """The shape of node ``x``."""
        return self.builder.shape(x)

    def reshape(self, x: int, shape: Sequence[int], final: bool = False) -> int:
        """``x`` as ``shape`` (itself where it has it already, unless ``final``:
        the node then takes the current node's name)."""
        shape = tuple(int(d) for d in shape)
        if self.shape(x) == shape and not final:
            return x
        return self.builder.reshape(x, shape,
                                    name=self.node_name if final else self.fresh("reshape"))

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
            raise Unsupported(f"a constant of shape {cshape if consts else ()} does not "
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
        last = view == s and final
        bn = self.builder.batch_norm(y, eps=_AFFINE_EPS, scale=scale is not None,
                                     name=self.node_name if last else self.fresh("affine"))
        # var + eps is exactly 1 in float32: y = x * scale + shift.
        arrays = {"mean": np.zeros(inner), "var": np.full(inner, 1.0 - _AFFINE_EPS),
                  "shift": expand(shift, 0.0)}
        if scale is not None:
            arrays["scale"] = expand(scale, 1.0)
        self.builder.set_weights(bn, arrays)
        if view == s:
            return bn
        return self.reshape(bn, s, final=final)

    def elem_shape(self, name: str) -> tuple[int, ...] | None:
        """The value's shape from ONNX's shape inference, when fully known."""
        return self.inferred_shapes.get(name)

    def _float_dtype_check(self, n: onnx.NodeProto) -> None:
        if n.op_type == "QuantizeLinear":  # read by DequantizeLinear alone (convert_quantized)
            return
        for o in n.output:
            t = self.elem_types.get(o)
            if t is not None and t not in (0, F32):
                dt = onnx.TensorProto.DataType.Name(t).lower()
                raise Unsupported(f"output {o!r} is {dt} (compute dtype must be float32)")


def op_key(n: onnx.NodeProto) -> str:
    """The key of ``n``'s converter: its op type, prefixed with its domain
    outside the default one (``com.microsoft.QLinearAdd``)."""
    return n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"


def _block(c: Array, i: int, j: int) -> Array:
    """The constant's axes i..j (its others have size 1)."""
    idx = tuple(slice(None) if i <= a <= j else 0 for a in range(c.ndim))
    return c[idx]


def _run_node(n: onnx.NodeProto, feeds: Mapping[str, Array], opset: int) -> list[Array]:
    """The node's outputs on constant inputs, by onnx's reference evaluator."""
    if n.op_type == "GatherElements":  # the reference evaluator's fails on a (1, n) table
        data, idx = (np.asarray(feeds[i]) for i in n.input[:2])
        axis = int(node_attrs(n).get("axis", 0)) % data.ndim
        idx = np.where(idx < 0, idx + data.shape[axis], idx)
        return [np.take_along_axis(data, idx, axis)]
    ev = ReferenceEvaluator(n, opsets={"": opset})
    return [np.asarray(v) for v in ev.run(None, dict(feeds))]


# A converter: (the importer, the node's index, the node, its input values
# (None for an absent optional input), its attributes) -> its output values.
Converter = Callable[[Importer, int, onnx.NodeProto, list[Value | None], dict[str, Any]],
                     list[Value]]
