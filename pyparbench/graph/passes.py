"""Optimisation passes run when a graph is compiled: small named rewrites of
the IR, each switchable, that leave every output unchanged (up to rounding).

=============  ===============================================================
``bn_fold``    inference batch-norm folded into the weights and bias of the
               conv2d / linear before it (when nothing else reads that output)
``residual``   a same-shape ``add`` (and its ReLU) fused into the conv2d that
               produces one of its inputs: oneDNN's sum post-op, computed in
               place into the other input's buffer when that input is dead
               once the add has run
``activation`` an eltwise activation fused into the conv2d / linear / matmul
               that produces it (an oneDNN eltwise post-op)
``layout``     channels-last (NHWC) activations through conv / pool / batch
               norm / eltwise / add / concat chains, ``reorder`` nodes where
               data must be plain NCHW; graph inputs and outputs keep NCHW
``blocked``    the layout pass's nodes stored in oneDNN's blocked layout
               (nChw8c / nChw16c: channels in blocks of 8 or 16, innermost)
               instead of channels-last, where oneDNN's convolutions prefer
               it on this machine (its 2.x direct kernels), the batch is at
               least ``BLOCKED_MIN_BATCH`` (weights reused from cache) and
               every such node fills the blocks; the first conv reads the
               image plain (batch 8, 2-core AVX2 Zen 3, oneDNN 2.6: ResNet-50
               1.05x, GoogLeNet 1.06x, Inception-v3 1.03x). Elsewhere
               channels-last stays, and the result says why
``subsample``  a channels-last 1x1 conv2d of stride s > 1 reads every s-th
               pixel: a window-1 max pool of stride s copies those pixels
               once (shared by the convs reading the same value at the same
               stride) and the conv runs at stride 1, where oneDNN's
               pointwise kernels are faster (1.3-1.7x on ResNet-50's
               512 -> 1024 shortcut; ``bench/pass_ablation.py`` gives
               each pass's worth per model)
``im2col``     a channels-last conv2d on a small feature map may run as its
               patches gathered into rows and one oneDNN matmul, where
               oneDNN's direct kernel is its older AVX2 one (oneDNN 2.x
               without AVX-512): 1.2x on ResNet-50's 7x7 3x3 layers,
               1.3-1.5x on Inception-v3's 8x8 1x3 / 3x1. The pass marks
               the candidates; the plan decides per conv when it compiles
               (``pyparbench.ops.GemmConv2d``; ``implementation`` says
               which kernel a conv got)
``microbatch`` the leading part of a batched graph whose activations
               overflow the cache while its weights are small (a CNN's
               high-resolution layers) runs as several micro-batches one
               after the other, each a ``slice`` of the input rows (a view)
               through a copy of those nodes, joined by a ``concat`` of the
               batch where the rest of the graph reads them: each
               micro-batch's tensors stay in cache from one node to the
               next (MobileNet-v2 batch 8: 1.2x). The rest runs on the
               whole batch, where batching pays
``memory``     node outputs whose lifetimes never overlap share one buffer
               in the native plan (the IR is unchanged): each node then
               writes memory a finished node just used, mostly still in
               cache, instead of a buffer of its own untouched since the
               last run. Only graph inputs and outputs can then be read back
=============  ===============================================================

Rewritten nodes carry only attributes the reference understands
(``activation``; a conv2d's second input is its residual) or that describe
memory and not values (``layout``, ``inplace``, the ``reorder`` op, an
identity, and the ``slice`` op, a view of rows of the batch):
:func:`pyparbench.reference.reference_forward` of the optimised graph is
the original's. :func:`optimize` applies a pipeline and says which
passes ran and which were skipped for the settings' library or operator mode.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pyparbench.graph.ir import F32Array, Graph, Node, Params, ParamSpec, Shape
from pyparbench.graph.opdefs import DTYPE_BYTES, FUSABLE_ACTIVATIONS
from pyparbench.memory import aligned_copy
from pyparbench.names import GRAPH_OPTS, GRAPH_PASSES, graph_opt_passes

if TYPE_CHECKING:
    from pyparbench.settings import Settings

__all__ = ["BLOCKED_LAYOUTS", "GRAPH_OPTS", "PASSES", "DerivedParams", "MicroBatchPlan",
           "OptimizeResult", "BLOCKED_MIN_BATCH", "activation_fusion", "blocked_choice",
           "blocked_misfits", "bn_fold", "cache_budget_bytes", "executed_graph", "im2col_marks",
           "layout_blocked", "layout_nhwc", "microbatch", "microbatch_plan", "optimize",
           "pipeline", "preferred_layout", "residual_fusion", "subsample"]

PASSES = GRAPH_PASSES
"""Every pass, in the order the full pipeline applies them (BN first, so a
folded conv can take its residual and activation; layout last, on the fused
nodes). Settings.graph_opt takes GRAPH_OPTS (none, full or one pass alone) or
passes joined by '+'."""


class DerivedParams(Params):
    """Parameters computed from other nodes' parameters (a folded conv's
    weights), made together on first access, read-only like any Params."""

    def __init__(self, shapes: Mapping[str, Shape],
                 make: Callable[[], Mapping[str, np.ndarray]]) -> None:
        # The init fields are unused: the arrays come from `make`.
        super().__init__({k: ParamSpec(tuple(s), "normal", 0.0, 0.0) for k, s in shapes.items()},
                         0, 0)
        self._make = make

    def __getitem__(self, key: str) -> F32Array:
        if key not in self._specs:
            raise KeyError(key)
        if key not in self._made:
            for k, arr in self._make().items():
                a = aligned_copy(np.asarray(arr, dtype=np.float32))
                a.flags.writeable = False
                self._made[k] = a
        return self._made[key]


# ------------------------------------------------------------------ rewriting


@dataclass
class _New:
    op: str
    inputs: tuple[int, ...]
    attrs: dict[str, Any]
    params: Params
    shape: Shape
    dtype: str
    name: str


class _Emitter:
    """Builds the rewritten graph: nodes in a valid order, ids renumbered."""

    def __init__(self) -> None:
        self.nodes: list[_New] = []

    def emit(self, n: _New) -> int:
        self.nodes.append(n)
        return len(self.nodes) - 1

    def copy(self, node: Node, inputs: Iterable[int], **attrs: Any) -> int:
        return self.emit(_New(node.op, tuple(inputs), {**node.attrs, **attrs}, node.params,
                              node.shape, node.dtype, node.name))

    def graph(self, like: Graph, outputs: Sequence[int]) -> Graph:
        nodes = [Node(i, n.op, n.inputs, n.attrs, n.params, n.shape, n.dtype, n.name)
                 for i, n in enumerate(self.nodes)]
        return Graph(like.name, nodes, outputs, like.meta)


def _fusable(g: Graph, producer: Node, consumer: Node) -> bool:
    """The consumer is the producer's only reader and the producer's value is
    no graph output: the producer's value can disappear into a fused node."""
    return g.consumers[producer.id] == (consumer.id,) and producer.id not in g.outputs


def _has_activation(n: Node) -> bool:
    return bool(n.attrs.get("relu")) or bool(n.attrs.get("activation"))


# ----------------------------------------------------------------- the passes


def bn_fold(g: Graph) -> Graph:
    """Fold each inference batch-norm into the conv2d or 2-D linear before it:
    w' = w * s, b' = (b - mean) * s + shift with s = scale / sqrt(var + eps),
    per output channel, computed in float64. Only when the conv / linear
    output has no other reader and no fused activation or residual."""
    folds: dict[int, int] = {}  # producer id -> batch-norm id
    for n in g.nodes:
        if n.op != "batch_norm":
            continue
        p = g[n.inputs[0]]
        ok = (p.op == "conv2d" and len(p.inputs) == 1) or (p.op == "linear" and len(p.shape) == 2)
        if ok and not _has_activation(p) and _fusable(g, p, n):
            folds[p.id] = n.id
    if not folds:
        return g
    em = _Emitter()
    remap: dict[int, int] = {}
    for n in g.nodes:
        if n.id in remap:  # a folded batch norm, emitted with its producer
            continue
        ins = tuple(remap[i] for i in n.inputs)
        bn_id = folds.get(n.id)
        if bn_id is None:
            remap[n.id] = em.copy(n, ins)
            continue
        bn = g[bn_id]
        out_channels = n.params.shapes["weight"][0]
        shapes = {"weight": n.params.shapes["weight"], "bias": (out_channels,)}
        params = DerivedParams(shapes, _folded(n, bn))
        new = em.emit(_New(n.op, ins, dict(n.attrs), params, bn.shape, bn.dtype, bn.name))
        remap[n.id] = remap[bn_id] = new
    return em.graph(g, [remap[o] for o in g.outputs])


def _folded(conv: Node, bn: Node) -> Callable[[], dict[str, np.ndarray]]:
    def make() -> dict[str, np.ndarray]:
        w = np.asarray(conv.params["weight"], np.float64)
        b = (np.asarray(conv.params["bias"], np.float64) if "bias" in conv.params
             else np.zeros(w.shape[0]))
        mean = np.asarray(bn.params["mean"], np.float64)
        var = np.asarray(bn.params["var"], np.float64)
        scale = (np.asarray(bn.params["scale"], np.float64) if "scale" in bn.params
                 else np.ones_like(mean))
        shift = np.asarray(bn.params["shift"], np.float64)
        s = scale / np.sqrt(var + float(bn.attrs["eps"]))
        return {"weight": w * s.reshape((-1,) + (1,) * (w.ndim - 1)), "bias": (b - mean) * s + shift}
    return make


def _ancestors(g: Graph, node: int) -> set[int]:
    seen: set[int] = set()
    stack = list(g[node].inputs)
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack.extend(g[i].inputs)
    return seen


def _may_overwrite(g: Graph, residual: Node, conv: Node, add: Node) -> bool:
    """The fused node may write into the residual's buffer: that buffer is
    the residual's own (not a graph input's, not shared by a reshape), it is
    no graph output nor the conv's source, and every other reader of it has finished before the
    conv starts (is the conv's ancestor), so nothing reads it afterwards."""
    if residual.op in ("input", "reshape") or residual.id in g.outputs:
        return False
    if residual.id in conv.inputs:  # a convolution cannot write over its own source
        return False
    before = _ancestors(g, conv.id)
    for c in g.consumers[residual.id]:
        if c == add.id:
            continue
        if g[c].op == "reshape" or c not in before:
            return False
    return True


def residual_fusion(g: Graph) -> Graph:
    """Fuse ``add(conv(x), r)`` (and the add's ReLU) into the conv: its second
    input is the residual, added by oneDNN's sum post-op before the
    activation. Where the residual is dead after the add the conv writes in
    place into its buffer (attribute ``inplace``), else into its own after a
    copy. Of two conv inputs the later one is fused (the other, computed
    first, is the residual)."""
    fuse: dict[int, tuple[int, int, bool]] = {}  # add id -> (conv id, residual id, in place)
    for n in g.nodes:
        if n.op != "add" or g[n.inputs[0]].shape != g[n.inputs[1]].shape:
            continue
        cands = [g[i] for i in n.inputs
                 if g[i].op == "conv2d" and len(g[i].inputs) == 1 and not _has_activation(g[i])
                 and _fusable(g, g[i], n) and g[i].attrs.get("layout") is None]
        if not cands or n.inputs[0] == n.inputs[1]:
            continue
        conv = max(cands, key=lambda c: c.id)
        r = g[n.inputs[1] if n.inputs[0] == conv.id else n.inputs[0]]
        fuse[n.id] = (conv.id, r.id, _may_overwrite(g, r, conv, n))
    if not fuse:
        return g
    by_conv = {c: (a, r, inplace) for a, (c, r, inplace) in fuse.items()}
    em = _Emitter()
    remap: dict[int, int] = {}
    for n in g.nodes:
        if n.id in by_conv:  # emitted at its add, where the residual exists
            continue
        if n.id in fuse:
            conv_id, r_id, inplace = fuse[n.id]
            conv = g[conv_id]
            attrs = dict(conv.attrs)
            if n.attrs.get("relu"):
                attrs["activation"] = "relu"
            if inplace:
                attrs["inplace"] = 1
            ins = (remap[conv.inputs[0]], remap[r_id])
            remap[n.id] = remap[conv_id] = em.emit(
                _New("conv2d", ins, attrs, conv.params, n.shape, n.dtype, n.name))
            continue
        remap[n.id] = em.copy(n, (remap[i] for i in n.inputs))
    return em.graph(g, [remap[o] for o in g.outputs])


def activation_fusion(g: Graph, kinds: Iterable[str] = FUSABLE_ACTIVATIONS) -> Graph:
    """Fuse each eltwise of ``kinds`` into the conv2d / linear / matmul before
    it (attribute ``activation``), when nothing else reads the producer's
    value and it has no activation yet. A conv with a residual applies the
    activation after the sum, as the eltwise did after the add."""
    allowed = set(kinds)
    fuse: dict[int, int] = {}  # producer id -> eltwise id
    for n in g.nodes:
        if n.op != "eltwise" or n.attrs["kind"] not in allowed:
            continue
        p = g[n.inputs[0]]
        if p.op in ("conv2d", "linear", "matmul") and not _has_activation(p) \
                and _fusable(g, p, n):
            fuse[p.id] = n.id
    if not fuse:
        return g
    em = _Emitter()
    remap: dict[int, int] = {}
    for n in g.nodes:
        if n.id in remap:
            continue
        ins = tuple(remap[i] for i in n.inputs)
        e = fuse.get(n.id)
        if e is None:
            remap[n.id] = em.copy(n, ins)
            continue
        act = g[e]
        remap[n.id] = remap[e] = em.emit(_New(n.op, ins, {**n.attrs, "activation": act.attrs["kind"]},
                                              n.params, act.shape, act.dtype, act.name))
    return em.graph(g, [remap[o] for o in g.outputs])


# Ops that run on channels-last or blocked data; the others need NCHW.
_NHWC_ANCHORS = ("conv2d", "pool2d", "batch_norm")
_NHWC_FOLLOWERS = ("eltwise", "add", "mul", "concat")
# Channels per block of oneDNN's blocked layouts.
BLOCKED_LAYOUTS = {"nchw8c": 8, "nchw16c": 16}


def _layout_nodes(g: Graph) -> set[int]:
    """The 4-D conv2d / pool2d / batch_norm nodes and the eltwise / same-shape
    add and mul / concat nodes that read them: those that take a layout."""
    cl: set[int] = set()
    for n in g.nodes:
        if len(n.shape) != 4 or n.dtype != "float32":
            continue
        if n.op in _NHWC_ANCHORS:
            cl.add(n.id)
        elif n.op in _NHWC_FOLLOWERS and any(i in cl for i in n.inputs):
            if n.op in ("add", "mul") and g[n.inputs[0]].shape != g[n.inputs[1]].shape:
                continue
            cl.add(n.id)
    return cl


def _plain_src(g: Graph, n: Node, block: int) -> bool:
    """A conv2d whose few input channels do not fill a block (an image's
    three): oneDNN's direct kernel reads them plain and writes blocked."""
    return (n.op == "conv2d" and n.attrs["groups"] == 1
            and g[n.inputs[0]].shape[1] < block)


def _with_layout(g: Graph, cl: set[int], layout: str, block: int) -> Graph:
    """Store the nodes ``cl`` as ``layout``, with one ``reorder`` node per value
    that crosses between it and NCHW (its ``input_layout`` names the source
    layout). A global_avg_pool reads the layout directly; outputs keep NCHW."""
    em = _Emitter()
    plain: dict[int, int] = {}  # old id -> new id of its NCHW value
    last: dict[int, int] = {}   # old id -> new id of its value stored as `layout`
    outputs = set(g.outputs)

    def nchw(i: int) -> int:
        if i not in plain:
            n = g[i]
            attrs = {"layout": "nchw", "input_layout": layout}
            plain[i] = em.emit(_New("reorder", (last[i],), attrs, Params({}, 0, 0), n.shape,
                                    n.dtype, n.name if i in outputs else f"{n.name}/nchw"))
        return plain[i]

    def laid(i: int) -> int:
        if i not in last:
            n = g[i]
            attrs = {"layout": layout, "input_layout": "nchw"}
            last[i] = em.emit(_New("reorder", (plain[i],), attrs, Params({}, 0, 0), n.shape,
                                   n.dtype, f"{n.name}/{layout}"))
        return last[i]

    for n in g.nodes:
        if n.id in cl:
            attrs = {**n.attrs, "layout": layout}
            if n.op == "conv2d" and len(n.inputs) == 2 and n.inputs[1] not in cl:
                # The residual's copy in the layout may have other readers.
                attrs.pop("inplace", None)
            if n.inputs[0] not in cl and block > 1 and _plain_src(g, n, block):
                attrs["input_layout"] = "nchw"
                ins = (plain[n.inputs[0]], *(laid(i) for i in n.inputs[1:]))
            else:
                ins = tuple(laid(i) for i in n.inputs)
            name = f"{n.name}/{layout}" if n.id in outputs else n.name
            last[n.id] = em.emit(_New(n.op, ins, attrs, n.params, n.shape, n.dtype, name))
            if n.id in outputs:
                nchw(n.id)
        elif n.op == "global_avg_pool" and n.inputs[0] in cl:
            plain[n.id] = em.copy(n, (last[n.inputs[0]],), layout=layout)
        else:
            plain[n.id] = em.copy(n, (nchw(i) if i in cl else plain[i] for i in n.inputs))
    return em.graph(g, [plain[o] for o in g.outputs])


def layout_nhwc(g: Graph) -> Graph:
    """Run 4-D conv2d / pool2d / batch_norm on channels-last data, and the
    eltwise / same-shape add and mul / concat nodes that read them, with one
    ``reorder`` node per value that crosses between layouts. A
    global_avg_pool reads channels-last data directly. Graph outputs keep
    NCHW: a channels-last output is reordered back under its own name."""
    cl = _layout_nodes(g)
    if not any(g[i].op == "conv2d" for i in cl):
        return g
    return _with_layout(g, cl, "nhwc", 1)


def blocked_misfits(g: Graph, layout: str) -> list[str]:
    """Names of the nodes that would take ``layout`` (a blocked layout) but
    whose channels, or their inputs', do not fill its blocks; a first
    conv2d reading a few channels plain is no misfit."""
    block = BLOCKED_LAYOUTS[layout]
    cl = _layout_nodes(g)
    bad = []
    for i in sorted(cl):
        n = g[i]
        ins = [g[j] for k, j in enumerate(n.inputs)
               if not (k == 0 and j not in cl and _plain_src(g, n, block))]
        if any(x.shape[1] % block for x in (n, *ins)):
            bad.append(n.name)
    return bad


def preferred_layout() -> str:
    """The activation layout oneDNN's convolution picks when left free on
    this machine and build (the C++ core asks it once): "nchw8c" / "nchw16c"
    where its direct kernels are the blocked ones (oneDNN 2.x), "nhwc" where
    they read channels-last (oneDNN 3.x's brgconv)."""
    from pyparbench._core import graph as _g

    return _g.preferred_layout()


# The least batch the blocked layout pays at. Its direct kernels win where a
# conv's weights stay in cache from one image to the next, and lose where
# every call streams them from memory (oneDNN 2.6, AVX2, 2 threads, whole
# ResNet-50 against channels-last: batch 1 0.85x, 2 0.98x, 4 1.02x, 8 1.07x).
BLOCKED_MIN_BATCH = 4


def blocked_choice(g: Graph) -> tuple[str | None, str]:
    """The blocked layout the ``blocked`` pass gives ``g`` on this machine, or
    None and why not."""
    layout = preferred_layout()
    if layout not in BLOCKED_LAYOUTS:
        return None, (f"oneDNN's convolutions here prefer {layout} to a blocked layout: "
                      "the layout pass's channels-last stays")
    batch = min((n.shape[0] for n in g.nodes if n.op == "conv2d"), default=0)
    if batch < BLOCKED_MIN_BATCH:
        return None, (f"batch {batch} is below {BLOCKED_MIN_BATCH}: each conv's weights "
                      "come from memory once per image, where channels-last is faster")
    bad = blocked_misfits(g, layout)
    if bad:
        return None, (f"{len(bad)} nodes do not fill {layout}'s blocks of "
                      f"{BLOCKED_LAYOUTS[layout]} channels ({', '.join(bad[:3])}): "
                      "channels-last stays")
    return layout, ""


def layout_blocked(g: Graph, layout: str) -> Graph:
    """The same nodes as :func:`layout_nhwc` stored in oneDNN's blocked
    ``layout`` ("nchw8c" / "nchw16c": channels in blocks of 8 / 16 stored
    innermost), where every one of them fills its blocks (ValueError naming
    the misfits otherwise: a graph is blocked whole or not at all). A first
    conv2d with fewer input channels than a block reads its input plain."""
    if layout not in BLOCKED_LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(BLOCKED_LAYOUTS)}, got {layout!r}")
    bad = blocked_misfits(g, layout)
    if bad:
        raise ValueError(f"{len(bad)} nodes do not fill {layout}'s blocks of "
                         f"{BLOCKED_LAYOUTS[layout]} channels: {', '.join(bad[:5])}")
    return _blocked(g, layout)


def _blocked(g: Graph, layout: str) -> Graph:
    """:func:`layout_blocked` on a graph already found to fit (blocked_choice)."""
    cl = _layout_nodes(g)
    if not any(g[i].op == "conv2d" for i in cl):
        return g
    return _with_layout(g, cl, layout, BLOCKED_LAYOUTS[layout])


def _strided_pointwise(g: Graph, n: Node) -> bool:
    """A channels-last 1x1 conv2d of stride > 1 with no padding or dilation."""
    return (n.op == "conv2d" and n.attrs.get("layout") == "nhwc"
            and tuple(n.params.shapes["weight"][2:]) == (1, 1)
            and tuple(n.attrs["stride"]) != (1, 1) and not any(n.attrs["padding"])
            and tuple(n.attrs["dilation"]) == (1, 1))


def subsample(g: Graph) -> Graph:
    """Split each channels-last strided 1x1 conv2d into a window-1 max pool of
    its stride (the pixels it reads, copied once per input and stride) and a
    stride-1 conv2d. Values are unchanged: the max over one pixel is it."""
    if not any(_strided_pointwise(g, n) for n in g.nodes):
        return g
    em = _Emitter()
    remap: dict[int, int] = {}
    picked: dict[tuple[int, tuple[int, ...]], int] = {}  # (input, stride) -> pool
    for n in g.nodes:
        ins = tuple(remap[i] for i in n.inputs)
        if not _strided_pointwise(g, n):
            remap[n.id] = em.copy(n, ins)
            continue
        stride = tuple(n.attrs["stride"])
        key = (n.inputs[0], stride)
        if key not in picked:
            x = g[n.inputs[0]]
            shape = (x.shape[0], x.shape[1], n.shape[2], n.shape[3])
            attrs = {"kind": "max", "kernel": (1, 1), "stride": stride, "padding": (0, 0, 0, 0),
                     "ceil_mode": False, "count_include_pad": True, "layout": "nhwc"}
            picked[key] = em.emit(_New("pool2d", (ins[0],), attrs, Params({}, 0, 0), shape,
                                       x.dtype, f"{x.name}/stride{stride[0]}x{stride[1]}"))
        remap[n.id] = em.copy(n, (picked[key], *ins[1:]), stride=(1, 1))
    return em.graph(g, [remap[o] for o in g.outputs])


def im2col_marks(g: Graph) -> Graph:
    """Mark every channels-last, ungrouped, non-pointwise conv2d ``im2col``:
    the native plan runs it as gathered patches and one matmul where that is
    faster than oneDNN's convolution for its shape and this machine
    (``gemm_conv2d_pays`` in the C++ core); values are unchanged."""
    marked = [n.id for n in g.nodes
              if n.op == "conv2d" and n.attrs.get("layout") == "nhwc" and n.attrs["groups"] == 1
              and tuple(n.params.shapes["weight"][2:]) != (1, 1)]
    if not marked:
        return g
    em = _Emitter()
    for n in g.nodes:
        em.copy(n, n.inputs, **({"im2col": True} if n.id in marked else {}))
    return em.graph(g, g.outputs)


# ----------------------------------------------------------------- microbatch

# Ops that compute each row of the batch from the same row of their inputs
# alone (under the attribute conditions of _batch_separable).
_ROW_WISE = frozenset({"conv2d", "pool2d", "eltwise", "add", "mul", "batch_norm", "reorder",
                       "global_avg_pool", "linear", "layer_norm", "concat", "softmax",
                       "transpose", "reshape"})
# A node joins the micro-batched part only if reading its weights once per
# micro-batch costs at most this share of the activation bytes it moves.
_WEIGHT_SHARE = 1 / 8
# Most micro-batches: each copies the micro-batched nodes once more.
MAX_MICRO_BATCHES = 16


def _nbytes(n: Node) -> int:
    return math.prod(n.shape) * DTYPE_BYTES[n.dtype]


def _batch_separable(g: Graph, n: Node, batch: int) -> bool:
    """Each of the node's ``batch`` output rows depends on the same row of
    each input alone: computing it on rows [a, b) of its inputs gives rows
    [a, b) of its output."""
    if n.op not in _ROW_WISE or n.dtype != "float32" or not n.shape or n.shape[0] != batch:
        return False
    if any(not g[i].shape or g[i].shape[0] != batch for i in n.inputs):
        return False
    if n.op in ("concat", "softmax"):
        return int(n.attrs["axis"]) != 0
    if n.op == "transpose":
        return int(tuple(n.attrs["perm"])[0]) == 0
    return True


@dataclass(frozen=True)
class MicroBatchPlan:
    """What :func:`microbatch` does to a graph: nodes ``0 .. last`` (those
    that are not graph inputs) run as ``count`` micro-batches of ``rows``
    rows each."""

    last: int
    count: int
    rows: int
    nodes: int           # nodes copied per micro-batch
    largest_bytes: int   # the largest node's activation bytes at the full batch
    budget_bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {"micro_batches": self.count, "rows": self.rows, "nodes": self.nodes,
                "largest_bytes": self.largest_bytes, "budget_bytes": self.budget_bytes}


def _micro_rows(batch: int, largest: int, budget: int) -> int:
    """The most rows per micro-batch (a divisor of ``batch``) that keep a
    node of ``largest`` bytes at the full batch within ``budget``, at most
    MAX_MICRO_BATCHES micro-batches."""
    fits = [d for d in range(1, batch + 1)
            if batch % d == 0 and batch // d <= MAX_MICRO_BATCHES]
    within = [d for d in fits if largest * d <= budget * batch]
    return max(within) if within else min(fits)


def microbatch_plan(g: Graph, budget_bytes: int) -> MicroBatchPlan | None:
    """Which leading nodes of ``g`` to micro-batch, or None.

    A node's activation bytes are its inputs' and output's. The candidates
    are the graph's leading run of batch-separable nodes whose weights are
    small next to their activations (re-reading them per micro-batch costs
    at most ``_WEIGHT_SHARE`` of those); the part micro-batched ends at the
    last candidate whose activations exceed ``budget_bytes``, and is cut
    into the fewest micro-batches that bring each node's activations
    within the budget."""
    inputs = [g[i] for i in g.inputs]
    batch = inputs[0].shape[0] if inputs and inputs[0].shape else 1
    if batch < 2:
        return None
    moved = {n.id: sum(_nbytes(g[i]) for i in n.inputs) + _nbytes(n) for n in g.nodes}
    weights = {n.id: 4 * n.num_params for n in g.nodes}
    run: list[Node] = []
    for n in g.nodes:
        if n.op == "input":
            continue
        if not _batch_separable(g, n, batch):
            break
        run.append(n)
    heavy = [n for n in run if moved[n.id] > budget_bytes]
    if not heavy:
        return None
    count = batch // _micro_rows(batch, max(moved[n.id] for n in heavy), budget_bytes)
    # Stop before the first node whose weights, read once per micro-batch,
    # would cost more than the activation traffic the micro-batches save.
    light = next((k for k, n in enumerate(run)
                  if weights[n.id] * count > _WEIGHT_SHARE * moved[n.id]), len(run))
    heavy = [n for n in run[:light] if moved[n.id] > budget_bytes]
    if not heavy:
        return None
    last = heavy[-1].id
    largest = max(moved[n.id] for n in heavy)
    rows = _micro_rows(batch, largest, budget_bytes)
    if rows == batch:
        return None
    nodes = sum(1 for n in g.nodes if n.id <= last and n.op != "input")
    return MicroBatchPlan(last, batch // rows, rows, nodes, largest, budget_bytes)


def microbatch(g: Graph, budget_bytes: int) -> Graph:
    """Run the leading, activation-bound part of ``g`` as micro-batches (see
    :func:`microbatch_plan`): per micro-batch a ``slice`` of each graph input
    it reads and a copy of its nodes on that many rows, emitted one
    micro-batch after the other; a ``concat`` along the batch joins the
    copies of each value read past that part (or a graph output), under
    its name. Values are unchanged."""
    plan = microbatch_plan(g, budget_bytes)
    return g if plan is None else _split_batch(g, plan)


def _split_batch(g: Graph, plan: MicroBatchPlan) -> Graph:
    em = _Emitter()
    remap: dict[int, int] = {}
    for i in g.inputs:
        remap[i] = em.copy(g[i], ())
    part = [n for n in g.nodes if n.id <= plan.last and n.op != "input"]
    copies: dict[int, list[int]] = {n.id: [] for n in part}
    read_later = {i for n in g.nodes if n.id > plan.last for i in n.inputs} | set(g.outputs)
    # A micro-batch's slices also take the previous micro-batch's values read
    # later as inputs (they read only the first): they order the
    # micro-batches, so that under any schedule each one finds the buffers
    # the one before it used free, and warm.
    before: tuple[int, ...] = ()
    for j in range(plan.count):
        start = j * plan.rows
        local: dict[int, int] = {}
        for n in part:
            ins = []
            for i in n.inputs:
                if i not in local:  # a graph input: this micro-batch's rows of it
                    x = g[i]
                    local[i] = em.emit(_New("slice", (remap[i], *before), {"start": start},
                                            Params({}, 0, 0), (plan.rows, *x.shape[1:]),
                                            x.dtype, f"{x.name}/mb{j}"))
                ins.append(local[i])
            attrs = dict(n.attrs)
            inplace = attrs.get("inplace")
            if inplace is not None and g[n.inputs[int(inplace)]].op == "input":
                attrs.pop("inplace")  # never into the caller's input
            local[n.id] = em.emit(_New(n.op, tuple(ins), attrs, n.params,
                                       (plan.rows, *n.shape[1:]), n.dtype, f"{n.name}/mb{j}"))
            copies[n.id].append(local[n.id])
        before = tuple(local[n.id] for n in part if n.id in read_later)
    for n in part:
        if n.id in read_later:
            attrs = {"axis": 0, **({"layout": n.attrs["layout"]} if "layout" in n.attrs else {})}
            remap[n.id] = em.emit(_New("concat", tuple(copies[n.id]), attrs, Params({}, 0, 0),
                                       n.shape, n.dtype, n.name))
    for n in g.nodes:
        if n.id > plan.last and n.op != "input":
            remap[n.id] = em.copy(n, (remap[i] for i in n.inputs))
    return em.graph(g, [remap[o] for o in g.outputs])


@functools.cache
def cache_budget_bytes() -> int:
    """The activation bytes a node may move and still find them in cache:
    an eighth of this machine's last-level cache (hwloc), the rest left to
    weights, the next node's data and other processes. Measured on a
    32 MiB-L3 Zen 4: MobileNet-v2's pointwise convs run at 180-210 GFLOP/s
    moving 4.4 MB and at 85-100 moving 9-17 MB."""
    from pyparbench.threading.topology import last_level_cache_bytes

    return last_level_cache_bytes() // 8


# ------------------------------------------------------------------- pipeline


@dataclass(frozen=True)
class OptimizeResult:
    """An optimised graph, the passes applied in order, and the passes asked
    for but skipped, each with the reason."""

    graph: Graph
    applied: tuple[str, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    # What a pass chose, where it chooses (microbatch: MicroBatchPlan.as_dict()).
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"passes": list(self.applied), "skipped": dict(self.skipped),
                "nodes": len(self.graph), "flops": self.graph.flops,
                "details": dict(self.details)}


def pipeline(graph_opt: str) -> tuple[str, ...]:
    """The passes a Settings.graph_opt value asks for (see
    :func:`~pyparbench.names.graph_opt_passes`)."""
    return graph_opt_passes(graph_opt)


def unsupported(name: str, library: str, operator: str) -> str | None:
    """Why pass ``name`` cannot run under this library and operator mode, or
    None. Eigen and BLAS convolve NCHW only and fuse nothing but ReLU (the
    activation pass then fuses ReLU alone); framework mode cuts batch-1 ops
    along channels, which channels-last data and a residual buffer forbid.
    Micro-batches pay only where the kernels wait on memory (oneDNN's, one
    call per op)."""
    if name in ("layout", "blocked", "residual", "subsample", "im2col"):
        if library != "onednn":
            return f"the {library} library has no channels-last conv and no fused sum"
        if operator != "library":
            return "framework mode cuts ops along channels"
    if name == "microbatch":
        # Measured on MobileNet-v2 batch 8: 6-9% slower under either.
        if library != "onednn":
            return (f"the {library} library's convolutions are bound by compute, not "
                    "memory: smaller calls only cost more")
        if operator != "library":
            return "framework mode cuts each op along the batch, which micro-batches shorten"
    return None


def optimize(graph: Graph, passes: Sequence[str], *, library: str = "onednn",
             operator: str = "library", budget_bytes: int | None = None) -> OptimizeResult:
    """Apply ``passes`` (names of PASSES, in the pipeline's order) to ``graph``
    for a run under ``library`` and ``operator`` mode. ``budget_bytes`` is
    the micro-batch pass's cache budget (default :func:`cache_budget_bytes`)."""
    unknown = [p for p in passes if p not in PASSES]
    if unknown:
        raise ValueError(f"unknown passes {unknown}; passes are {', '.join(PASSES)}")
    applied: list[str] = []
    skipped: dict[str, str] = {}
    details: dict[str, Any] = {}
    g = graph
    for name in (p for p in PASSES if p in passes):
        why = unsupported(name, library, operator)
        if why is not None:
            skipped[name] = why
            continue
        if name == "bn_fold":
            g = bn_fold(g)
        elif name == "residual":
            g = residual_fusion(g)
        elif name == "activation":
            if library != "onednn":
                g = activation_fusion(g, ("relu",))
                skipped["activation"] = (f"only relu fused: the {library} library has no "
                                         "other fused activation")
            else:
                g = activation_fusion(g)
        elif name == "layout":
            if "blocked" in passes and unsupported("blocked", library, operator) is None:
                layout, why = blocked_choice(g)
                if layout is None:
                    skipped["blocked"] = why
                    g = layout_nhwc(g)
                else:
                    g = _blocked(g, layout)  # blocked_choice found no misfit
                    details["blocked"] = {"layout": layout}
            else:
                g = layout_nhwc(g)
        elif name == "blocked":
            if "layout" not in applied:
                skipped["blocked"] = "it changes what the layout pass stores, and that did not run"
            if "blocked" in skipped:
                continue
        elif name == "subsample":
            g = subsample(g)
        elif name == "im2col":
            g = im2col_marks(g)
        elif name == "microbatch":
            budget = cache_budget_bytes() if budget_bytes is None else budget_bytes
            plan = microbatch_plan(g, budget)
            if plan is not None:
                details["microbatch"] = plan.as_dict()
                g = _split_batch(g, plan)
        # "memory" rewrites nothing: the plan reads it from `applied`.
        applied.append(name)
    return OptimizeResult(g, tuple(applied), skipped, details)


def executed_graph(graph: Graph, settings: Settings) -> Graph:
    """The graph the executor runs for ``graph`` under ``settings``: rewritten
    by the passes ``settings.graph_opt`` asks for that its library and
    operator mode can take (what a trace's node ids refer to)."""
    passes = pipeline(settings.graph_opt)
    if not passes:
        return graph
    return optimize(graph, passes, library=settings.library, operator=settings.operator).graph
