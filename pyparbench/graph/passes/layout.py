"""Layout passes: channels-last (NHWC) or oneDNN's blocked layouts
(nChw8c / nChw16c) through conv / pool / batch-norm chains, with ``reorder``
nodes where data must be plain NCHW, and which layout this machine's oneDNN
prefers."""

from __future__ import annotations

from pyparbench.graph.ir import Graph
from pyparbench.graph.node import Node, Params
from pyparbench.graph.passes.rewrite import Emitter

__all__ = ["BLOCKED_LAYOUTS", "BLOCKED_MIN_BATCH", "blocked_choice", "blocked_misfits",
           "layout_blocked", "layout_blocked_unchecked", "layout_nhwc", "preferred_layout"]


# Ops that run on channels-last or blocked data; the others need NCHW. An
# int8 convolution runs channels-last only (its NCHW input is converted as
# it is quantised), and rounding onto a grid is elementwise.
_NHWC_ANCHORS = ("conv2d", "pool2d", "batch_norm")
_NHWC_ONLY_ANCHORS = ("quantized_conv2d",)
_NHWC_FOLLOWERS = ("eltwise", "add", "mul", "concat", "fake_quantize")
# Channels per block of oneDNN's blocked layouts.
BLOCKED_LAYOUTS = {"nchw8c": 8, "nchw16c": 16}


def _channel_broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """b broadcasts onto a with every channel its own (a squeeze-excite gate
    (N, C, 1, 1), or the same shape): stored in a's layout, it broadcasts
    over the stored axes alike."""
    return len(a) == len(b) == 4 and b[1] == a[1] and all(
        y in (1, x) for x, y in zip(a, b, strict=True))


def _layout_nodes(g: Graph, channels_last: bool) -> set[int]:
    """The 4-D conv2d / pool2d / batch_norm nodes (and quantized_conv2d where
    the layout is ``channels_last``) and the eltwise / add and mul whose
    second input keeps every channel (same shape or a gate) / concat /
    fake_quantize nodes that read them: those that take a layout."""
    anchors = _NHWC_ANCHORS + (_NHWC_ONLY_ANCHORS if channels_last else ())
    cl: set[int] = set()
    for n in g.nodes:
        if len(n.shape) != 4 or n.dtype != "float32":
            continue
        if n.op in anchors:
            cl.add(n.id)
        elif n.op in _NHWC_FOLLOWERS and any(i in cl for i in n.inputs):
            if n.op in ("add", "mul") and not (
                    g[n.inputs[0]].shape == n.shape
                    and _channel_broadcast(n.shape, g[n.inputs[1]].shape)):
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
    em = Emitter()
    plain: dict[int, int] = {}  # old id -> new id of its NCHW value
    last: dict[int, int] = {}   # old id -> new id of its value stored as `layout`
    outputs = set(g.outputs)

    def nchw(i: int) -> int:
        if i not in plain:
            n = g[i]
            attrs = {"layout": "nchw", "input_layout": layout}
            plain[i] = em.emit("reorder", (last[i],), attrs, Params({}, 0, 0), n.shape,
                               n.dtype, n.name if i in outputs else f"{n.name}/nchw")
        return plain[i]

    def laid(i: int) -> int:
        if i not in last:
            n = g[i]
            attrs = {"layout": layout, "input_layout": "nchw"}
            last[i] = em.emit("reorder", (plain[i],), attrs, Params({}, 0, 0), n.shape,
                              n.dtype, f"{n.name}/{layout}")
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
            last[n.id] = em.emit(n.op, ins, attrs, n.params, n.shape, n.dtype, name)
            if n.id in outputs:
                nchw(n.id)
        elif n.op == "global_avg_pool" and n.inputs[0] in cl:
            plain[n.id] = em.copy(n, (last[n.inputs[0]],), layout=layout)
        else:
            plain[n.id] = em.copy(n, (nchw(i) if i in cl else plain[i] for i in n.inputs))
    return em.graph(g, [plain[o] for o in g.outputs])


def layout_nhwc(g: Graph) -> Graph:
    """Run 4-D conv2d / quantized_conv2d / pool2d / batch_norm on
    channels-last data, and the eltwise / add and mul (same shape or a
    per-channel gate) / concat / fake_quantize nodes that read them, with one
    ``reorder`` node per value that crosses between layouts. A
    global_avg_pool reads channels-last data directly. Graph outputs keep
    NCHW: a channels-last output is reordered back under its own name."""
    cl = _layout_nodes(g, channels_last=True)
    if not any(g[i].op in ("conv2d", "quantized_conv2d") for i in cl):
        return g
    return _with_layout(g, cl, "nhwc", 1)


def blocked_misfits(g: Graph, layout: str) -> list[str]:
    """Names of the nodes that would take ``layout`` (a blocked layout) but
    whose channels, or their inputs', do not fill its blocks; a first
    conv2d reading a few channels plain is no misfit."""
    block = BLOCKED_LAYOUTS[layout]
    cl = _layout_nodes(g, channels_last=False)
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
    from pyparbench._core import graph as _g  # noqa: PLC0415 (framework child: no native core)

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
    return layout_blocked_unchecked(g, layout)


def layout_blocked_unchecked(g: Graph, layout: str) -> Graph:
    """:func:`layout_blocked` on a graph already found to fit (blocked_choice)."""
    cl = _layout_nodes(g, channels_last=False)
    if not any(g[i].op == "conv2d" for i in cl):
        return g
    return _with_layout(g, cl, layout, BLOCKED_LAYOUTS[layout])
