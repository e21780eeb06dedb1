"""Values computed from an int64 attention mask alone: the additive mask an
exporter builds from a (batch, sequence) mask of 0 / 1 (Cast to bool,
gathers and expands of shapes, And with constant masks, Where(m, 0, min)).

Such a chain is no compute of the network: its result is one of two
constants per element, picked by the mask element of its (batch, key). It
is found without reading the pattern: every node whose inputs depend on the
mask and on nothing else but constants is evaluated (onnx's reference
evaluator) on all-zero, all-one and random 0 / 1 masks, and where each value
read by the rest of the network is ``where(mask[b, k], c1, c0)`` broadcast
along its other axes, it runs natively as a two-row embedding lookup of the
mask (the cast) viewed as (batch, 1, ..., 1, sequence).

The same search finds the integer values computed from int64 ids alone
(an input read other than as embedding indices); those are probed with ids
rather than masks (:mod:`~pyparbench.graph.onnx.id_values`). An embedding
lookup (rows of a constant float table) ends a chain: what the network
computes from the rows is no value of the input alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from pyparbench.graph.onnx.id_values import IdValue, as_id_value
from pyparbench.graph.onnx.liveness import live_nodes
from pyparbench.graph.onnx.values import Array, Unsupported

__all__ = ["MaskValue", "find_mask_values"]

# Ops that read only their input's shape, fixed at import.
_SHAPE_ONLY = frozenset({"Shape", "Size"})
# Random masks tried beside all zeros and all ones.
_PROBES = 4


class GatherElements(OpRun):
    """GatherElements by numpy (the reference evaluator's fails on a (1, n) table;
    the evaluator takes an op by its class name)."""

    op_domain = ""

    def _run(self, data: Array, indices: Array, axis: int = 0) -> tuple[Array]:
        axis %= data.ndim
        idx = np.where(indices < 0, indices + data.shape[axis], indices)
        return (np.take_along_axis(data, idx, axis),)


@dataclass(frozen=True)
class MaskValue:
    """A value of ONNX name ``name``: ``rows[mask[b, k]]`` viewed as ``view``."""

    name: str
    mask: str
    rows: tuple[float, float]  # the value where the mask is 0, where it is 1
    view: tuple[int, ...]
    # Causal as well: of shape ``shape``, (..., Sq, Sk), key j > i + Sk - Sq
    # of query i is the value where the mask is 0 whatever the mask.
    causal: bool = False
    shape: tuple[int, ...] = ()


def _depends(nodes: Sequence[onnx.NodeProto], graph_inputs: set[str],
             constants: Mapping[str, object]) -> dict[str, set[str]]:
    """The graph inputs each value depends on (a shape read depends on none;
    an embedding lookup, rows of a constant float table by ids the network
    computes on, on a source of its own)."""
    deps: dict[str, set[str]] = {i: {i} for i in graph_inputs}
    for n in nodes:
        d: set[str] = set()
        table = constants.get(n.input[0]) if n.input else None
        if n.op_type == "Gather" and isinstance(table, np.ndarray) and table.dtype.kind == "f":
            d = {f"{n.output[0]} (a lookup)"}
        elif n.op_type not in _SHAPE_ONLY:
            for i in n.input:
                d |= deps.get(i, set())
        for o in n.output:
            deps[o] = d
    return deps


def find_mask_values(nodes: Sequence[onnx.NodeProto], constants: Mapping[str, object],
                     input_shapes: Mapping[str, tuple[int, ...]],
                     input_dtypes: Mapping[str, str], outputs: set[str], opset: int,
                     shapes_of: Mapping[str, tuple[int, ...]]
                     ) -> tuple[list[MaskValue], list[IdValue], set[int], dict[str, Array]]:
    """The mask values and the integer values of ids
    (:mod:`~pyparbench.graph.onnx.id_values`) the rest of ``nodes`` reads,
    the indexes of the nodes they replace, and the shape reads among those
    that the rest reads as constants. ``constants`` holds the file's
    initialisers (name -> array).

    Raises :class:`Unsupported` for a float value computed from a mask that
    is not one of two constants per (batch, key) element, or an integer one
    that is neither constant nor padding-aware positions. ``shapes_of``
    holds the values' shapes from shape inference."""
    ints = {i for i, t in input_dtypes.items() if t == "int64"}
    deps = _depends(nodes, set(input_shapes), constants)
    # What no output reads (a pattern fused away) neither reads a mask value
    # nor makes one.
    live = live_nodes(nodes, outputs)
    # The int64 inputs that some node reads other than as a Gather's indices.
    masks = sorted({i for k, n in enumerate(nodes) for j, i in enumerate(n.input)
                    if i in ints and k in live and not (n.op_type == "Gather" and j == 1)})
    found: list[MaskValue] = []
    found_ids: list[IdValue] = []
    chain: set[int] = set()
    shapes: dict[str, Array] = {}
    for mask in masks:
        inside = {k for k, n in enumerate(nodes)
                  if k in live and (deps.get(n.input[0]) == {mask} if n.op_type in _SHAPE_ONLY
                                    else bool(n.output) and deps.get(n.output[0]) == {mask})}
        while True:
            try:
                _find_in(nodes, live, constants, input_shapes, outputs, opset, shapes_of, mask,
                         inside, found, found_ids, chain, shapes)
                break
            except Unsupported:
                # A constant added to a mask value (T5's position bias beside
                # its padding mask) is the network's sum: the mask value ends
                # before it. Retried without the sums; else refused.
                sums = _constant_sums(nodes, inside, deps, constants)
                if not sums:
                    raise
                inside -= sums
    return found, found_ids, chain, shapes


def _constant_sums(nodes: Sequence[onnx.NodeProto], inside: set[int],
                   deps: Mapping[str, set[str]], constants: Mapping[str, object]) -> set[int]:
    """The Adds of ``inside`` of a computed value and a float constant (a
    file's constant or a value of constants alone) of more than one element."""
    out = set()
    for k in inside:
        n = nodes[k]
        if n.op_type != "Add" or len(n.input) != 2:
            continue
        fixed = [i for i in n.input if not deps.get(i)]
        c = constants.get(fixed[0]) if len(fixed) == 1 else None
        if len(fixed) == 1 and (c is None or isinstance(c, np.ndarray) and c.size > 1
                                and c.dtype.kind == "f"):
            out.add(k)
    return out


def _find_in(nodes: Sequence[onnx.NodeProto], live: set[int],
             constants: Mapping[str, object],
             input_shapes: Mapping[str, tuple[int, ...]], outputs: set[str], opset: int,
             shapes_of: Mapping[str, tuple[int, ...]], mask: str, inside: set[int],
             found: list[MaskValue], found_ids: list[IdValue], chain: set[int],
             shapes: dict[str, Array]) -> None:
    """The mask values and id values of ``mask`` made by the nodes
    ``inside`` and read by the rest (of the ``live`` nodes), added to
    ``found``, ``found_ids``, ``chain`` and ``shapes`` once all are known
    (nothing added where one is refused)."""
    made = {o for k in inside for o in nodes[k].output if o}
    read_outside = [o for o in sorted(made) if o in outputs or any(
        o in n.input for k, n in enumerate(nodes) if k not in inside and k in live)]
    floats: list[str] = []
    for o in read_outside:
        k = next(j for j in inside if o in nodes[j].output)
        if nodes[k].op_type in _SHAPE_ONLY:
            continue
        floats.append(o)
    if not floats:
        return
    shape = input_shapes[mask]
    run, scalars = _evaluator(nodes, inside, constants, mask, shape, floats, opset,
                              shapes_of)
    zeros = _run(run, np.zeros(shape, np.int64))
    integral = [o for o, z in zip(floats, zeros, strict=True) if z.dtype.kind in "iu"]
    reals = [o for o in floats if o not in integral]
    new = [_as_mask_value(o, mask, shape, z, ones, probes)
           for o, (z, ones, probes) in _mask_probes(run, floats, reals, shape).items()]
    new_ids = [as_id_value(o, mask, shape, scalars, _one_of(run, floats.index(o)))
               for o in integral]
    found.extend(new)
    found_ids.extend(new_ids)
    chain |= inside
    for k in inside:
        n = nodes[k]
        if n.op_type in _SHAPE_ONLY and any(o in read_outside for o in n.output):
            shapes[n.output[0]] = _shape_read(n, shapes_of)


def _ancestors(nodes: Sequence[onnx.NodeProto], inside: set[int],
               shapes_of: Mapping[str, tuple[int, ...]]) -> list[onnx.NodeProto]:
    """The nodes of ``inside`` and the constant nodes they read, in file
    order; a shape read is a Constant of the shape (its input may be data)."""
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    keep = set(inside)
    stack = [i for k in inside if nodes[k].op_type not in _SHAPE_ONLY for i in nodes[k].input]
    while stack:
        v = stack.pop()
        k = producer.get(v)
        if k is not None and k not in keep:
            keep.add(k)
            if nodes[k].op_type not in _SHAPE_ONLY:
                stack.extend(nodes[k].input)
    out: list[onnx.NodeProto] = []
    for k in sorted(keep):
        n = nodes[k]
        if n.op_type in _SHAPE_ONLY:
            n = helper.make_node("Constant", [], [n.output[0]],
                                 value=numpy_helper.from_array(_shape_read(n, shapes_of)))
        out.append(n)
    return out


def _shape_read(n: onnx.NodeProto, shapes_of: Mapping[str, tuple[int, ...]]) -> Array:
    """The value of a Shape or Size node, from its input's inferred shape."""
    shape = shapes_of.get(n.input[0])
    if shape is None:
        raise Unsupported(f"the shape of {n.input[0]!r} is not known at import")
    if n.op_type == "Size":
        return np.array(int(np.prod(shape)), np.int64)
    a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
    return np.array(shape, np.int64)[a.get("start", 0):a.get("end", len(shape))]


def _evaluator(nodes: Sequence[onnx.NodeProto], inside: set[int],
               constants: Mapping[str, object], mask: str, shape: tuple[int, ...],
               wanted: list[str], opset: int, shapes_of: Mapping[str, tuple[int, ...]]
               ) -> tuple[Callable[[Array], list[Array]], list[int]]:
    """The computation of the wanted values from the int64 input, and the
    integer scalars it reads (the candidates for an ids' padding id)."""
    sub = _ancestors(nodes, inside, shapes_of)
    made = {o for n in sub for o in n.output}
    read = {i for n in sub for i in n.input if i and i not in made}
    feeds_const = {i: np.asarray(constants[i]) for i in read
                   if i != mask and isinstance(constants.get(i), np.ndarray)}
    missing = read - set(feeds_const) - {mask}
    if missing:
        raise Unsupported(f"a mask computation reads {min(missing)!r}, not a constant")
    scalars = {int(v.reshape(-1)[0]) for v in feeds_const.values()
               if v.size == 1 and v.dtype.kind in "iu"}
    for n in sub:
        for a in n.attribute:
            if n.op_type == "Constant" and a.name in ("value", "value_int"):
                v = np.asarray(helper.get_attribute_value(a) if a.name == "value_int"
                               else numpy_helper.to_array(a.t))
                if v.size == 1 and v.dtype.kind in "iu":
                    scalars.add(int(v.reshape(-1)[0]))
    graph = helper.make_graph(
        sub, "mask",
        [helper.make_tensor_value_info(mask, onnx.TensorProto.INT64, list(shape))],
        [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in wanted],
        [numpy_helper.from_array(v, k) for k, v in feeds_const.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        ev = ReferenceEvaluator(model, new_ops=[GatherElements])
    except Exception as e:
        raise Unsupported(f"cannot evaluate a mask computation: {str(e).splitlines()[0]}"
                          ) from None

    def run(m: Array) -> list[Array]:
        try:
            return [np.asarray(v) for v in ev.run(wanted, {mask: m})]
        except Exception as e:  # the input's rank or size contradicts what reads it
            raise Unsupported(f"cannot evaluate a mask computation of the int64 input "
                              f"{mask!r} of shape {tuple(m.shape)}: "
                              f"{str(e).splitlines()[0]}") from None

    return run, sorted(scalars)


def _run(run: Callable[[Array], list[Array]], m: Array) -> list[Array]:
    """The wanted values for the input ``m``; Unsupported where it fails."""
    try:
        return run(m)
    except Unsupported:
        raise
    except Exception as e:
        raise Unsupported(f"cannot evaluate a mask computation: {str(e).splitlines()[0]}"
                          ) from None


def _one_of(run: Callable[[Array], list[Array]], j: int) -> Callable[[Array], Array]:
    """The computation of the ``j``-th wanted value alone."""
    return lambda m: _run(run, m)[j]


def _mask_probes(run: Callable[[Array], list[Array]], wanted: list[str], chosen: list[str],
                 shape: tuple[int, ...]
                 ) -> dict[str, tuple[Array, Array, list[tuple[Array, Array]]]]:
    """Each chosen value (of ``wanted``, what ``run`` computes) on an all-zero
    mask, an all-one mask, and random 0 / 1 masks (with the mask each was
    given)."""
    if not chosen:
        return {}
    zeros = _run(run, np.zeros(shape, np.int64))
    ones = _run(run, np.ones(shape, np.int64))
    rng = np.random.default_rng(0)
    probes: list[list[tuple[Array, Array]]] = [[] for _ in wanted]
    for _ in range(_PROBES):
        m = rng.integers(0, 2, shape).astype(np.int64)
        for j, v in enumerate(_run(run, m)):
            probes[j].append((m, v))
    return {o: (zeros[j], ones[j], probes[j]) for j, o in enumerate(wanted) if o in chosen}


def _as_mask_value(name: str, mask: str, shape: tuple[int, ...], zeros: Array, ones: Array,
                   probes: list[tuple[Array, Array]]) -> MaskValue:
    """The value as two constants picked by the mask's (batch, key) element,
    or that and a causal mask of its (query, key) axes (a decoder's mask)."""
    why = f"value {name!r} computed from the int64 input {mask!r} alone"
    if zeros.dtype != np.float32 or zeros.ndim < len(shape) or len(shape) != 2:
        raise Unsupported(f"{why} is not a float32 value of rank >= 2 (dtype "
                          f"{zeros.dtype}, shape {zeros.shape})")
    c0, c1 = zeros.reshape(-1)[0], ones.reshape(-1)[-1]
    batch, keys = shape
    out = zeros.shape
    if out[0] not in (1, batch) or out[-1] != keys or (out[0] == 1 and batch != 1):
        raise Unsupported(f"{why} of shape {out} is not (batch, ..., sequence)")
    queries = out[-2] if len(out) > 2 else 1
    seen = np.arange(keys)[None, :] <= np.arange(queries)[:, None] + keys - queries
    causal = not np.all(ones == c1) and len(out) > 2
    visible = seen if causal else np.ones_like(seen)
    if not (np.all(zeros == c0) and np.array_equal(ones, np.broadcast_to(
            np.where(visible, c1, c0), out))):
        raise Unsupported(f"{why} differs along its elements where the mask does not (and "
                          "is no causal mask)")
    view = (batch, *(1,) * (len(out) - 2), keys)
    for m, v in probes:
        want = np.where((m.reshape(view) != 0) & visible, c1, c0)
        if v.shape != out or not np.array_equal(np.broadcast_to(want, out), v):
            raise Unsupported(f"{why} is not the mask's (batch, key) element picking one "
                              "of two constants")
    return MaskValue(name, mask, (float(c0), float(c1)), view, bool(causal), tuple(out))
