"""The bf16 plan of a run at ``Settings(precision="bf16")``: which nodes
multiply in bf16, and where values are converted.

The matrix nodes (conv2d, linear, matmul) multiply bf16 activations by bf16
weights and accumulate in fp32 (oneDNN's bf16 primitives); they write fp32,
so every other node (the glue ops: element-wise, pooling, normalisation,
softmax, add, concat, attention) and every graph output stays fp32. A value
a matrix node reads is converted to bf16 by one ``reorder`` node of dtype
``bfloat16`` placed right after the value's producer, shared by every matrix
node that reads it (a ResNet fork's two convolutions, a Transformer's q, k
and v projections): one conversion per fp32 -> bf16 boundary, never one per
op. The conversion keeps the value's stored layout (channels-last, blocked
or plain); a layout reorder read only by matrix nodes (a graph input's
channels-last copy) converts as it reorders, in one pass. A convolution
(after its fused bias and activation, without a fused residual) read only
by matrix nodes' bf16 inputs, and no graph output, writes bf16 itself
(dtype ``bfloat16``: oneDNN applies the post-ops in fp32 and rounds to
nearest even as it stores, the numbers the reorder would give): a MobileNet's
1x1 -> depthwise -> 1x1 chain converts nothing between its convolutions.
Weights stay fp32 in the IR: the plan converts them to bf16 once, when it
prepares the node's kernel.
"""

from __future__ import annotations

from pyparbench.graph.ir import Graph
from pyparbench.graph.node import Node, Params
from pyparbench.graph.passes.rewrite import Emitter

__all__ = ["BF16_OPS", "bf16_activation_inputs", "to_bf16"]

# The nodes that multiply in bf16 at precision bf16.
BF16_OPS = frozenset({"conv2d", "linear", "matmul"})


def bf16_activation_inputs(n: Node) -> tuple[int, ...]:
    """Positions of ``n``'s inputs it reads in bf16 at precision bf16: a
    matmul's two operands, a conv2d's or linear's input (a conv2d's fused
    residual, its second input, is added in fp32)."""
    if n.op not in BF16_OPS or n.dtype != "float32":
        return ()
    return (0, 1) if n.op == "matmul" else (0,)


def _stored_layout(n: Node) -> str:
    """How ``n``'s value is stored: its layout attribute for 4-D data
    (a global average pool writes plain (N, C) data whatever it reads)."""
    if len(n.shape) != 4 or n.op == "global_avg_pool":
        return "nchw"
    return str(n.attrs.get("layout", "nchw"))


def to_bf16(g: Graph, *, bf16_conv_outputs: bool = True) -> Graph:
    """``g`` with its matrix nodes marked ``precision="bf16"`` and one bf16
    ``reorder`` node per value they read, but for the convolutions that
    write bf16 themselves (see the module docstring; none when
    ``bf16_conv_outputs`` is False, which gives the same values through
    reorders). A conv2d marked for im2col loses the mark: the
    gathered-patches kernel is fp32 only. Values are those of ``g`` up to
    bf16 rounding."""
    readers: dict[int, list[bool]] = {}  # value -> per read, whether in bf16
    for n in g.nodes:
        positions = bf16_activation_inputs(n)
        for k, i in enumerate(n.inputs):
            readers.setdefault(i, []).append(k in positions)
    wanted = {i for i, reads in readers.items() if any(reads)}
    if not wanted:
        return g
    # A layout reorder read only in bf16 (a graph input's channels-last
    # copy) converts as it reorders: one pass over the data, not two.
    outputs = set(g.outputs)
    converting = {i for i in wanted if g[i].op == "reorder" and g[i].dtype == "float32"
                  and all(readers[i]) and i not in outputs}
    # A convolution read only in bf16 writes bf16 (a fused residual, added
    # in fp32 into what dst holds, keeps it fp32).
    direct = {i for i in wanted if bf16_conv_outputs and g[i].op == "conv2d"
              and len(g[i].inputs) == 1 and bf16_activation_inputs(g[i])
              and all(readers[i]) and i not in outputs}
    em = Emitter()
    new: dict[int, int] = {}   # old id -> new id of its (fp32) value
    bf16: dict[int, int] = {}  # old id -> new id of its bf16 copy
    for n in g.nodes:
        positions = bf16_activation_inputs(n)
        if n.id in converting:
            bf16[n.id] = em.emit(n.op, tuple(new[i] for i in n.inputs), n.attrs, n.params,
                                 n.shape, "bfloat16", f"{n.name}/bf16")
            continue
        if positions:
            ins = tuple(bf16[i] if k in positions else new[i] for k, i in enumerate(n.inputs))
            attrs = {k: v for k, v in n.attrs.items() if k != "im2col"}
            attrs["precision"] = "bf16"
            if n.id in direct:
                bf16[n.id] = em.emit(n.op, ins, attrs, n.params, n.shape, "bfloat16", n.name)
                continue
            new[n.id] = em.emit(n.op, ins, attrs, n.params, n.shape, n.dtype, n.name)
        else:
            new[n.id] = em.copy(n, (new[i] for i in n.inputs))
        if n.id in wanted:
            layout = _stored_layout(n)
            bf16[n.id] = em.emit("reorder", (new[n.id],),
                                 {"layout": layout, "input_layout": layout},
                                 Params({}, 0, 0), n.shape, "bfloat16", f"{n.name}/bf16")
    return em.graph(g, [new[o] for o in g.outputs])
