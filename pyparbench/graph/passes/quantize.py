"""The int8 graph of a run at ``Settings(precision="int8")``: which nodes
go int8, and how their grids are chosen from a calibration.

Every float ``conv2d`` and ``linear`` node becomes a ``quantized_conv2d`` /
``quantized_linear`` node of the same name, inputs and ReLU: its input is
quantised per tensor onto a uint8 grid that covers the range the
calibration recorded for it (asymmetric, zero point where 0 falls), its
weights per output channel onto int8 (symmetric, the largest magnitude of
each channel at 127, :func:`~pyparbench.quantization.channel_scales`), its
bias stays float32, and it writes float32; where int8 nodes alone read
its result (a ResNet block's first two convolutions into the next), it
requantises the result onto their input grid first, as a QDQ file's
convolution does, so the value can stay bytes between them
(:mod:`~pyparbench.graph.passes.int8_values`). Every embedding bag whose rows
are a multiple of 4 long reads an 8-bit rowwise table
(:func:`~pyparbench.quantization.byte_rowwise_prepack`, PyTorch's
``embedding_bag_byte_prepack`` layout: per row its uint8 values, float32
scale and bias) and sums in float32: a DLRM's, NCF's and Wide & Deep's
tables. Every other node stays float32: ``matmul`` (a Transformer's
attention scores and context, a DLRM's interaction), attention, softmax,
normalisation, pooling, element-wise ops and the graph's outputs.

The ranges come from running the float graph on generated data
(:func:`pyparbench.executor.int8_graph`): the figures measured on the
result are speed figures, not accuracy ones. Batch normalisation is folded
into the convolutions before (:func:`~pyparbench.graph.passes.fusion.bn_fold`),
as an int8 deployment does, so a folded conv quantises its folded weights,
and a ReLU after a conv2d / linear becomes the int8 node's own
(:func:`int8_ready`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pyparbench.graph.ir import Graph
from pyparbench.graph.node import Node
from pyparbench.graph.passes.fusion import bn_fold, relu_flag_fusion
from pyparbench.graph.passes.rewrite import DerivedParams, Emitter
from pyparbench.quantization import byte_rowwise_prepack, channel_scales, quantize, tensor_params

__all__ = ["INT8_OPS", "Range", "byte_rowwise_table", "calibration_inputs", "converts",
           "int8_ready", "int8_structure", "quantizable", "to_int8"]

# The float ops the int8 graph runs in int8, and the int8 op of each.
INT8_OPS = {"conv2d": "quantized_conv2d", "linear": "quantized_linear"}

# A value's recorded (smallest, largest) element.
Range = tuple[float, float]


def quantizable(n: Node) -> bool:
    """Whether the int8 graph runs node ``n`` in int8: a float32 conv2d or
    linear that no pass has marked (a fused residual, another activation
    than ReLU, a layout or a bf16 precision)."""
    return (n.op in INT8_OPS and n.dtype == "float32" and len(n.inputs) == 1
            and not any(k in n.attrs for k in ("activation", "layout", "precision")))


def byte_rowwise_table(n: Node) -> bool:
    """Whether the int8 graph gives embedding bag ``n`` an 8-bit rowwise
    table: a float32 table whose rows are a multiple of 4 long (the plan
    holds the packed bytes as float32 words)."""
    return (n.op == "embedding_bag" and n.attrs.get("table_format", "float32") == "float32"
            and n.shape[-1] % 4 == 0)


def _packed_table(n: Node) -> DerivedParams:
    """Embedding bag ``n``'s table packed 8-bit rowwise, its bytes viewed as
    float32 words, made on first read (a DLRM's tables are gigabytes)."""
    rows, dim = n.params.shapes["table"]
    return DerivedParams({"table": (rows, (dim + 8) // 4)}, lambda: {
        "table": byte_rowwise_prepack(n.params["table"]).view(np.float32)})


def int8_ready(g: Graph) -> Graph:
    """``g`` as the int8 graph is made from it (and calibrated on): its
    batch norms folded into the conv2d / linear before them, then each ReLU
    after one made its ``relu`` flag, so the int8 node applies it."""
    return relu_flag_fusion(bn_fold(g))


def converts(g: Graph) -> bool:
    """Whether :func:`to_int8` changes anything of ``g`` (an int8 graph
    already, or one without conv2d, linear and embedding bags, stays)."""
    return any(quantizable(n) or byte_rowwise_table(n) for n in g.nodes)


def calibration_inputs(g: Graph) -> dict[str, int]:
    """The values a calibration records: for each quantizable node's name,
    the id of the value it reads."""
    return {n.name: n.inputs[0] for n in g.nodes if quantizable(n)}


def _lazy_int8_params(n: Node, grid: Range, weight_bits: int, out: Range | None
                      ) -> DerivedParams:
    """:func:`_int8_params`, made on first read: a cost model reading the
    int8 graph's shapes makes no weight."""
    w = n.params.shapes["weight"]
    shapes = {"x_scale": (1,), "x_zero_point": (1,), "weight": w, "weight_scale": (w[0],)}
    if "bias" in n.params.shapes:
        shapes["bias"] = (w[0],)
    if out is not None:
        shapes.update(out_scale=(1,), out_zero_point=(1,))
    return DerivedParams(shapes, lambda: _int8_params(n, grid, weight_bits, out))


def _grid(r: Range, prefix: str) -> dict[str, np.ndarray]:
    """The uint8 grid over range ``r`` as an int8 node's ``prefix``_scale /
    ``prefix``_zero_point parameters."""
    scale, zero_point = tensor_params(np.array(r), "uint8")
    return {f"{prefix}_scale": np.array([scale], np.float32),
            f"{prefix}_zero_point": np.array([zero_point], np.float32)}


def _int8_params(n: Node, grid: Range, weight_bits: int, out: Range | None
                 ) -> dict[str, np.ndarray]:
    """A quantizable node's int8 parameters: its input's uint8 grid over
    ``grid``, its weights per output channel on int8 (``weight_bits``
    significant bits, see channel_scales), its bias as it is, and the grid
    over ``out`` its result is requantised onto (None: it writes float32)."""
    w = np.asarray(n.params["weight"], dtype=np.float32)
    scales = channel_scales(w, axis=0, bits=weight_bits)
    q = quantize(w, scales, 0, "int8", axis=0).astype(np.float32)
    arrays = {**_grid(grid, "x"), "weight": q, "weight_scale": scales}
    if "bias" in n.params:
        arrays["bias"] = np.asarray(n.params["bias"], dtype=np.float32)
    if out is not None:
        arrays.update(_grid(out, "out"))
    return arrays


def _output_grids(g: Graph, ranges: Mapping[str, Range]) -> dict[int, Range]:
    """The quantizable nodes whose every reader is a quantizable node (none
    a graph output): the range their readers quantise the value onto, all
    readers of one value having recorded the same one. Such a node writes
    its result requantised onto that grid, as a QDQ file's conv before
    another does, so the value can stay bytes between them
    (graph.passes.int8_values)."""
    readers: dict[int, list[Node]] = {}
    for n in g.nodes:
        for i in set(n.inputs):
            readers.setdefault(i, []).append(n)
    outputs = set(g.outputs)
    grids: dict[int, Range] = {}
    for n in g.nodes:
        rs = readers.get(n.id, [])
        if not quantizable(n) or n.id in outputs or not rs:
            continue
        if all(quantizable(r) and r.name in ranges for r in rs):
            seen = {tuple(ranges[r.name]) for r in rs}
            if len(seen) == 1:
                lo, hi = next(iter(seen))
                grids[n.id] = (lo, hi)
    return grids


def to_int8(g: Graph, ranges: Mapping[str, Range], *, weight_bits: int = 8) -> Graph:
    """``g`` with every quantizable node replaced by its int8 node and
    every embedding bag reading an 8-bit rowwise table (see the module
    docstring), an int8 node's input grid from ``ranges[node name]``.
    ``weight_bits`` 7 keeps |weight| <= 63, for int8 kernels without an
    int8 dot product (VNNI, SDOT), which saturate int16 pair sums.

    Raises
    ------
    ValueError
        A quantizable node without a range, or a range that is not a
        finite interval, naming the node.
    """
    missing = [n.name for n in g.nodes if quantizable(n) and n.name not in ranges]
    if missing:
        raise ValueError(f"no calibrated range for {len(missing)} node(s): "
                         f"{', '.join(missing[:5])}")
    out_grids = _output_grids(g, ranges)
    em = Emitter()
    new: dict[int, int] = {}
    for n in g.nodes:
        ins = tuple(new[i] for i in n.inputs)
        if byte_rowwise_table(n):
            new[n.id] = em.emit(n.op, ins, {**n.attrs, "table_format": "byte_rowwise"},
                                _packed_table(n), n.shape, n.dtype, n.name)
            continue
        if not quantizable(n):
            new[n.id] = em.copy(n, ins)
            continue
        out = out_grids.get(n.id)
        attrs = {**n.attrs, "x_dtype": "uint8", "out_dtype": "float32" if out is None else "uint8"}
        attrs.setdefault("relu", False)
        attrs.pop("im2col", None)
        lo, hi = ranges[n.name]
        if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
            raise ValueError(f"node {n.name!r}: calibrated range ({lo!r}, {hi!r}) is not a "
                             "finite interval")
        params = _lazy_int8_params(n, (lo, hi), weight_bits, out)
        new[n.id] = em.emit(INT8_OPS[n.op], ins, attrs, params, n.shape, n.dtype, n.name)
    return Graph(g.name, em.nodes, [new[o] for o in g.outputs], {**g.meta, "precision": "int8"})


def int8_structure(g: Graph) -> Graph:
    """The int8 graph of ``g`` as far as a cost model reads it: the nodes,
    ops, attributes and shapes the executor runs at int8 (:func:`int8_ready`,
    then :func:`to_int8`), every grid the placeholder [-1, 1] (the real ones
    come from a calibration run, which only the executor makes); no weight
    is made unless read."""
    ready = int8_ready(g)
    if not converts(ready):
        return g
    return to_int8(ready, dict.fromkeys(calibration_inputs(ready), (-1.0, 1.0)))
