"""GraphBuilder: builds a Graph one op at a time, checking shapes as it goes."""

from __future__ import annotations

import contextlib
import math
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pyparbench._checks import int_tuple, padding4
from pyparbench.graph.ir import Graph
from pyparbench.graph.node import ArrayParams, Node, Params, ParamSpec, Shape
from pyparbench.graph.opdefs import DTYPE_BYTES, ELTWISE_FLOPS, FLOAT32_MIN, GLU_KINDS

__all__ = ["GraphBuilder", "pool_output_size", "rebuild"]

# Largest output a node may have (the native core's bounds): its size in
# bytes fits an int64 with room to spare, and no dimension passes what
# oneDNN takes.
MAX_NODE_BYTES = 1 << 48
MAX_DIM = (1 << 31) - 1


def pool_output_size(size: int, k: int, s: int, p0: int, p1: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size, with asymmetric padding (p0 before, p1 after)."""
    span = size + p0 + p1 - k
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p0:
        out -= 1  # the last window would start in the trailing padding
    return out


class GraphBuilder:
    """Builds a :class:`Graph` one op at a time, checking shapes as it goes.

    Every method returns the new node's id. Parameters get seeded random
    initialisers sized so activations stay O(1) through deep networks: He
    normal (std sqrt(2 / fan_in)) for conv and linear weights, small biases,
    batch-norm statistics near 0 and 1, embedding rows scaled by the bag size.

    Parameters
    ----------
    name
        The graph's name.
    seed
        Seed of every parameter's generator (see :class:`Params`).
    params_by_name
        Key each node's generator by its name instead of its position, so
        that graphs of one model that differ elsewhere (its prefill and its
        decode step, or a different output) draw the same weights.

    Raises
    ------
    ValueError
        From any method, for shapes or attributes that do not fit, naming them.
    """

    def __init__(self, name: str, seed: int = 0, *, params_by_name: bool = False) -> None:
        self.name = name
        self.seed = int(seed)
        self.params_by_name = params_by_name
        self._nodes: list[Node] = []
        self._names: set[str] = set()
        self._scope: list[str] = []

    # ------------------------------------------------------------ plumbing

    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Prefix the names of nodes made inside with ``name/``."""
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def shape(self, x: int) -> Shape:
        return self._node(x).shape

    def dtype(self, x: int) -> str:
        return self._node(x).dtype

    def op_and_inputs(self, x: int) -> tuple[str, dict[str, Any], tuple[int, ...]]:
        """Node ``x``'s op, attributes and inputs (a converter reading what
        made its operand)."""
        n = self._node(x)
        return n.op, dict(n.attrs), tuple(n.inputs)

    def _node(self, x: int) -> Node:
        if not isinstance(x, (int, np.integer)) or not 0 <= x < len(self._nodes):
            raise ValueError(f"{x!r} is not a node id of this builder")
        return self._nodes[int(x)]

    def _f32(self, x: int, what: str) -> Shape:
        n = self._node(x)
        if n.dtype != "float32":
            raise ValueError(f"{what} needs a float32 input, got {n.name!r} ({n.dtype})")
        return n.shape

    def _add(self, op: str, inputs: Sequence[int], attrs: dict[str, Any], shape: Shape,
             name: str | None, params: Mapping[str, ParamSpec] | None = None,
             dtype: str = "float32") -> int:
        nid = len(self._nodes)
        base = name if name is not None else f"{op}_{nid}"
        full = "/".join([*self._scope, base])
        if full in self._names:
            raise ValueError(f"duplicate node name {full!r}")
        if any(d < 1 for d in shape):
            ins = ", ".join(f"{self._nodes[i].name} {self._nodes[i].shape}" for i in inputs)
            raise ValueError(f"{op} {full!r} would have output shape {shape} from {ins}")
        if (max(shape, default=1) > MAX_DIM
                or math.prod(shape) * DTYPE_BYTES[dtype] > MAX_NODE_BYTES):
            raise ValueError(f"{op} {full!r} would have output shape {shape}: a dimension "
                             f"over {MAX_DIM} or more than {MAX_NODE_BYTES} bytes")
        self._names.add(full)
        key = zlib.crc32(full.encode()) if self.params_by_name else nid
        self._nodes.append(Node(nid, op, tuple(int(i) for i in inputs), attrs,
                                Params(params or {}, self.seed, key), shape, dtype, full))
        return nid

    def set_weights(self, x: int, arrays: Mapping[str, npt.ArrayLike]) -> None:
        """Give node ``x`` these parameter arrays (a model file's own weights)
        in place of its seeded random ones: the same names and shapes as the
        node's parameters, each converted to float32; a :class:`Params`
        (e.g. a :class:`LazyParams` of derived tables) is used as it is.

        Raises
        ------
        ValueError
            A name the node lacks or misses, or a shape other than the node's.
        """
        node = self._node(x)
        want = node.params.shapes
        # A Params (derived tables made on first read) is taken as it is.
        have = arrays.shapes if isinstance(arrays, Params) else \
            {k: tuple(int(d) for d in np.shape(v)) for k, v in arrays.items()}
        if have != want:
            raise ValueError(f"{node.op} {node.name!r} takes parameters {want}, got {have}")
        params = arrays if isinstance(arrays, Params) else ArrayParams(arrays)
        self._nodes[node.id] = Node(node.id, node.op, node.inputs, node.attrs,
                                    params, node.shape, node.dtype, node.name)

    def build(self, outputs: int | Sequence[int], meta: Mapping[str, Any] | None = None) -> Graph:
        """The graph of every node made so far, with these outputs."""
        outs = [outputs] if isinstance(outputs, (int, np.integer)) else list(outputs)
        return Graph(self.name, self._nodes, outs, meta)

    # ----------------------------------------------------------------- ops

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> int:
        """A graph input; ``dtype`` "float32" or "int64" (embedding indices).

        Its name is the one callers feed, so no scope prefixes it.
        """
        if dtype not in ("float32", "int64"):
            raise ValueError(f"input dtype must be 'float32' or 'int64', got {dtype!r}")
        scope, self._scope = self._scope, []
        try:
            return self._add("input", (), {"dtype": dtype}, tuple(int(d) for d in shape), name,
                             dtype=dtype)
        finally:
            self._scope = scope

    def constant(self, shape: Sequence[int], *, name: str | None = None) -> int:
        """A fixed float32 tensor of ``shape`` (param ``value``; seeded random
        unless :meth:`set_weights` gives a file's own)."""
        shape = tuple(int(d) for d in shape)
        return self._add("constant", (), {}, shape, name,
                         {"value": ParamSpec(shape, "normal", 0.0, 1.0)})

    def conv2d(self, x: int, out_channels: int, kernel: int | Sequence[int], *,
               stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
               dilation: int | Sequence[int] = 1, groups: int = 1, bias: bool = True,
               relu: bool = False, name: str | None = None) -> int:
        """2-D convolution of NCHW ``x``; padding int, (h, w) or (t, b, l, r)."""
        attrs, shape, wshape = self._conv_geometry("conv2d", x, out_channels, kernel, stride,
                                                   padding, dilation, groups)
        fan_in = math.prod(wshape[1:])
        params = {"weight": ParamSpec(wshape, "normal", 0.0, math.sqrt(2.0 / fan_in))}
        if bias:
            params["bias"] = ParamSpec((out_channels,), "normal", 0.0, 0.05)
        return self._add("conv2d", (x,), {**attrs, "relu": relu}, shape, name, params)

    def _conv_geometry(self, op: str, x: int, out_channels: int, kernel: int | Sequence[int],
                       stride: int | Sequence[int], padding: int | Sequence[int],
                       dilation: int | Sequence[int], groups: int
                       ) -> tuple[dict[str, Any], Shape, Shape]:
        """A convolution's geometry attributes, output shape and weight shape,
        checked against its input."""
        xs = self._f32(x, op)
        if len(xs) != 4:
            raise ValueError(f"{op} input must be 4-D (N, C, H, W), got {xs}")
        n, c, h, w = xs
        kh, kw = int_tuple("kernel", kernel, 2)
        sh, sw = int_tuple("stride", stride, 2)
        dh, dw = int_tuple("dilation", dilation, 2)
        pad = padding4(padding)
        if min(kh, kw, sh, sw, dh, dw, groups, out_channels) < 1 or min(pad) < 0:
            raise ValueError(f"{op} needs kernel, stride, dilation, groups, out_channels >= 1 "
                             f"and padding >= 0, got kernel {(kh, kw)}, stride {(sh, sw)}, "
                             f"dilation {(dh, dw)}, groups {groups}, out {out_channels}, "
                             f"padding {pad}")
        if c % groups or out_channels % groups:
            raise ValueError(f"{op} groups={groups} must divide input channels ({xs}) and "
                             f"out_channels ({out_channels})")
        oh = (h + pad[0] + pad[1] - dh * (kh - 1) - 1) // sh + 1
        ow = (w + pad[2] + pad[3] - dw * (kw - 1) - 1) // sw + 1
        attrs = {"stride": (sh, sw), "padding": pad, "dilation": (dh, dw), "groups": groups}
        return attrs, (n, out_channels, oh, ow), (out_channels, c // groups, kh, kw)

    def quantized_conv2d(self, x: int, out_channels: int, kernel: int | Sequence[int], *,
                         stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
                         dilation: int | Sequence[int] = 1, groups: int = 1,
                         bias: bool = True, relu: bool = False, x_dtype: str = "uint8",
                         out_dtype: str = "float32", name: str | None = None) -> int:
        """int8 2-D convolution, float32 in and out: ``x`` quantised onto its
        grid (params x_scale, x_zero_point; ``x_dtype`` "uint8" / "int8"),
        int8 ``weight`` (OIHW, whole numbers in [-128, 127]) with
        ``weight_scale`` per output channel, float32 ``bias``, s32
        accumulation, ReLU; ``out_dtype`` "uint8" / "int8" requantises the
        result with out_scale / out_zero_point before it is dequantised
        (the graph IR's op table has the semantics)."""
        attrs, shape, wshape = self._conv_geometry("quantized_conv2d", x, out_channels, kernel,
                                                   stride, padding, dilation, groups)
        params = _quantized_params("quantized_conv2d", wshape, bias, x_dtype, out_dtype)
        return self._add("quantized_conv2d", (x,),
                         {**attrs, "relu": relu, "x_dtype": x_dtype, "out_dtype": out_dtype},
                         shape, name, params)

    def quantized_linear(self, x: int, out_features: int, *, bias: bool = True,
                         relu: bool = False, x_dtype: str = "uint8", out_dtype: str = "float32",
                         name: str | None = None) -> int:
        """int8 x · weightᵀ + bias over the last axis of an input of any rank
        (>= 2), float32 in and out; the quantisation as
        :meth:`quantized_conv2d`'s, weight (out, in)."""
        xs = self._f32(x, "quantized_linear")
        if len(xs) < 2:
            raise ValueError(f"quantized_linear input must be at least 2-D, got {xs}")
        if out_features < 1:
            raise ValueError(f"quantized_linear out_features must be >= 1, got {out_features}")
        params = _quantized_params("quantized_linear", (out_features, xs[-1]), bias, x_dtype,
                                   out_dtype)
        return self._add("quantized_linear", (x,),
                         {"relu": relu, "x_dtype": x_dtype, "out_dtype": out_dtype},
                         (*xs[:-1], out_features), name, params)

    def fake_quantize(self, x: int, *, x_dtype: str = "uint8", name: str | None = None) -> int:
        """``x`` rounded onto its int8 / uint8 grid (params x_scale,
        x_zero_point): a QuantizeLinear and the DequantizeLinear after it."""
        xs = self._f32(x, "fake_quantize")
        params = _quantized_params("fake_quantize", None, False, x_dtype, "float32")
        return self._add("fake_quantize", (x,), {"x_dtype": x_dtype}, xs, name, params)

    def dynamic_quantized_conv2d(self, x: int, out_channels: int, kernel: int | Sequence[int],
                                 *, stride: int | Sequence[int] = 1,
                                 padding: int | Sequence[int] = 0,
                                 dilation: int | Sequence[int] = 1, groups: int = 1,
                                 bias: bool = True, name: str | None = None) -> int:
        """2-D convolution of ``x`` quantised to uint8 on each run's own
        grid (ONNX's DynamicQuantizeLinear, then ConvInteger): ``weight``
        (OIHW whole numbers of int8 or uint8) less ``weight_zero_point``
        per output channel, exact integer sums, times the run's scale ·
        ``weight_scale``, plus ``bias`` (the graph IR's op table has the
        semantics)."""
        attrs, shape, wshape = self._conv_geometry("dynamic_quantized_conv2d", x,
                                                   out_channels, kernel, stride, padding,
                                                   dilation, groups)
        return self._add("dynamic_quantized_conv2d", (x,), attrs, shape, name,
                         _dynamic_params(wshape, bias))

    def dynamic_quantized_linear(self, x: int, out_features: int, *, bias: bool = True,
                                 name: str | None = None) -> int:
        """x · weightᵀ + bias over the last axis of an input of any rank
        (>= 2), ``x`` quantised on each run's grid as
        :meth:`dynamic_quantized_conv2d`'s (MatMulInteger); weight (out, in)."""
        xs = self._f32(x, "dynamic_quantized_linear")
        if len(xs) < 2:
            raise ValueError(f"dynamic_quantized_linear input must be at least 2-D, got {xs}")
        if out_features < 1:
            raise ValueError(f"dynamic_quantized_linear out_features must be >= 1, got "
                             f"{out_features}")
        return self._add("dynamic_quantized_linear", (x,), {}, (*xs[:-1], out_features), name,
                         _dynamic_params((out_features, xs[-1]), bias))

    def linear(self, x: int, out_features: int, *, bias: bool = True, relu: bool = False,
               weight_scale: float = 1.0, name: str | None = None) -> int:
        """x · weightᵀ + bias over the last axis of a 2-D or 3-D input.

        ``weight_scale`` multiplies the initial weights and bias, e.g. to fold
        a constant factor of the model into the layer.
        """
        xs = self._f32(x, "linear")
        if len(xs) not in (2, 3):
            raise ValueError(f"linear input must be 2-D or 3-D, got {xs}")
        if out_features < 1:
            raise ValueError(f"linear out_features must be >= 1, got {out_features}")
        params = {"weight": ParamSpec((out_features, xs[-1]), "normal", 0.0,
                                      weight_scale * math.sqrt(2.0 / xs[-1]))}
        if bias:
            params["bias"] = ParamSpec((out_features,), "normal", 0.0, weight_scale * 0.05)
        return self._add("linear", (x,), {"relu": relu}, (*xs[:-1], out_features), name, params)

    def matmul(self, a: int, b: int, *, trans_b: bool = False, name: str | None = None) -> int:
        """a · b, or a · bᵀ with ``trans_b``; both 2-D, or 3-D with the same batch."""
        sa, sb = self._f32(a, "matmul"), self._f32(b, "matmul")
        if len(sa) != len(sb) or len(sa) not in (2, 3) or sa[:-2] != sb[:-2]:
            raise ValueError(f"matmul needs two 2-D or two 3-D inputs with one batch size, "
                             f"got {sa} and {sb}")
        kb, nb = (sb[-1], sb[-2]) if trans_b else (sb[-2], sb[-1])
        if sa[-1] != kb:
            raise ValueError(f"matmul inner dimensions differ: {sa} and {sb} "
                             f"(trans_b={trans_b})")
        return self._add("matmul", (a, b), {"trans_b": trans_b}, (*sa[:-1], nb), name)

    def embedding_bag(self, indices: int, rows: int, dim: int, *, mode: str = "sum",
                      table_format: str = "float32", name: str | None = None) -> int:
        """Sum or mean of ``table`` rows per bag; ``indices`` an int64 (batch, bag)
        input, a reshape of one, or of position ids. ``table_format``
        "byte_rowwise": an 8-bit rowwise table
        (:func:`pyparbench.quantization.byte_rowwise_prepack`: per row dim
        uint8 values, then its float32 scale and bias), its bytes held in a
        float32 parameter of shape (rows, (dim + 8) / 4), as the plan holds
        every parameter (dim a multiple of 4); give it with
        :meth:`set_weights` (a float array viewed as float32)."""
        n = self._node(indices)
        if n.op not in ("input", "reshape", "position_ids") or n.dtype != "int64" \
                or len(n.shape) != 2:
            raise ValueError(f"embedding_bag indices must be a 2-D int64 input node (or a "
                             f"reshape of one, or position ids), got "
                             f"{n.name!r} ({n.op}, {n.dtype}, {n.shape})")
        if mode not in ("sum", "mean"):
            raise ValueError(f"embedding_bag mode must be 'sum' or 'mean', got {mode!r}")
        if rows < 1 or dim < 1:
            raise ValueError(f"embedding_bag needs rows, dim >= 1, got {rows}, {dim}")
        if table_format not in ("float32", "byte_rowwise"):
            raise ValueError(f"embedding_bag table_format must be 'float32' or 'byte_rowwise', "
                             f"got {table_format!r}")
        if table_format == "byte_rowwise":
            if dim % 4:
                raise ValueError(f"an 8-bit rowwise table's dim must be a multiple of 4 (its "
                                 f"rows held as float32 words), got {dim}")
            params = {"table": ParamSpec((rows, (dim + 8) // 4), "normal", 0.0, 0.0)}
            return self._add("embedding_bag", (indices,),
                             {"mode": mode, "table_format": table_format},
                             (n.shape[0], dim), name, params)
        # Rows of std 1/sqrt(dim * bag) make each pooled vector about unit length.
        per_bag = n.shape[1] if mode == "sum" else 1
        std = 1.0 / math.sqrt(dim * per_bag)
        params = {"table": ParamSpec((rows, dim), "normal", 0.0, std)}
        return self._add("embedding_bag", (indices,), {"mode": mode}, (n.shape[0], dim), name,
                         params)

    def eltwise(self, x: int, kind: str, *, name: str | None = None) -> int:
        """Element-wise activation: relu, relu6, sigmoid, tanh, gelu (erf form), gelu_tanh
        (its tanh approximation), swish
        (x sigmoid x, SiLU) or hardswish (x relu6(x + 3) / 6)."""
        xs = self._f32(x, "eltwise")
        if kind not in ELTWISE_FLOPS:
            raise ValueError(f"eltwise kind must be one of {sorted(ELTWISE_FLOPS)}, "
                             f"got {kind!r}")
        return self._add("eltwise", (x,), {"kind": kind}, xs, name)

    def add(self, a: int, b: int, *, relu: bool = False, name: str | None = None) -> int:
        """a + b (+ ReLU); b has a's rank and each of its dims is a's or 1."""
        sa, sb = self._f32(a, "add"), self._f32(b, "add")
        if len(sa) != len(sb) or any(q not in (p, 1) for p, q in zip(sa, sb, strict=True)):
            raise ValueError(f"add: second input {sb} does not broadcast to the first {sa}")
        return self._add("add", (a, b), {"relu": relu}, sa, name)

    def mul(self, a: int, b: int, *, name: str | None = None) -> int:
        """a * b element-wise; b has a's rank and each of its dims is a's or 1
        (a squeeze-excite gate, (N, C, 1, 1), scaling (N, C, H, W))."""
        sa, sb = self._f32(a, "mul"), self._f32(b, "mul")
        if len(sa) != len(sb) or any(q not in (p, 1) for p, q in zip(sa, sb, strict=True)):
            raise ValueError(f"mul: second input {sb} does not broadcast to the first {sa}")
        return self._add("mul", (a, b), {}, sa, name)

    def concat(self, xs: Sequence[int], *, axis: int = 1, name: str | None = None) -> int:
        """Concatenate along ``axis``; other dims must agree."""
        if not xs:
            raise ValueError("concat needs at least one input")
        shapes = [self._f32(x, "concat") for x in xs]
        rank = len(shapes[0])
        if not -rank <= axis < rank:
            raise ValueError(f"concat axis {axis} is out of range for rank {rank}")
        ax = axis % rank
        if any(len(s) != rank or s[:ax] + s[ax + 1:] != shapes[0][:ax] + shapes[0][ax + 1:]
               for s in shapes):
            raise ValueError(f"concat along axis {ax} needs equal other dims, got {shapes}")
        out = list(shapes[0])
        out[ax] = sum(s[ax] for s in shapes)
        return self._add("concat", xs, {"axis": ax}, tuple(out), name)

    def pool2d(self, x: int, kind: str, kernel: int | Sequence[int], *,
               stride: int | Sequence[int] | None = None, padding: int | Sequence[int] = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               name: str | None = None) -> int:
        """Max or average pooling of NCHW ``x`` with PyTorch's rules (stride = kernel
        by default; padding at most half the kernel)."""
        xs = self._f32(x, "pool2d")
        if len(xs) != 4:
            raise ValueError(f"pool2d input must be 4-D (N, C, H, W), got {xs}")
        if kind not in ("max", "avg"):
            raise ValueError(f"pool2d kind must be 'max' or 'avg', got {kind!r}")
        k = int_tuple("kernel", kernel, 2)
        s = k if stride is None else int_tuple("stride", stride, 2)
        p = padding4(padding)
        if min(*k, *s) < 1 or min(p) < 0 or max(p[:2]) > k[0] // 2 or max(p[2:]) > k[1] // 2:
            raise ValueError(f"pool2d needs kernel, stride >= 1 and 0 <= padding <= kernel/2, "
                             f"got kernel {k}, stride {s}, padding {p}")
        oh = pool_output_size(xs[2], k[0], s[0], p[0], p[1], ceil_mode)
        ow = pool_output_size(xs[3], k[1], s[1], p[2], p[3], ceil_mode)
        attrs = {"kind": kind, "kernel": k, "stride": s, "padding": p, "ceil_mode": ceil_mode,
                 "count_include_pad": count_include_pad}
        return self._add("pool2d", (x,), attrs, (xs[0], xs[1], oh, ow), name)

    def global_avg_pool(self, x: int, *, name: str | None = None) -> int:
        """Mean over H and W: (N, C, H, W) -> (N, C)."""
        xs = self._f32(x, "global_avg_pool")
        if len(xs) != 4:
            raise ValueError(f"global_avg_pool input must be 4-D (N, C, H, W), got {xs}")
        return self._add("global_avg_pool", (x,), {}, xs[:2], name)

    def batch_norm(self, x: int, *, eps: float = 1e-5, scale: bool = True,
                   scale_range: tuple[float, float] = (0.75, 1.25),
                   name: str | None = None) -> int:
        """Inference batch norm over axis 1; ``scale=False`` leaves the scale out (= 1).

        The scale starts uniform in ``scale_range``; a residual branch's last
        batch norm takes a small one (the idea of zero_init_residual) so that
        activations stay O(1) over many blocks.
        """
        xs = self._f32(x, "batch_norm")
        if len(xs) < 2:
            raise ValueError(f"batch_norm input needs a channel axis 1, got {xs}")
        if not 0 < scale_range[0] <= scale_range[1]:
            raise ValueError(f"batch_norm scale_range must be 0 < low <= high, "
                             f"got {scale_range}")
        c = (xs[1],)
        params = {"mean": ParamSpec(c, "normal", 0.0, 0.1),
                  "var": ParamSpec(c, "uniform", 0.75, 1.25)}
        if scale:
            params["scale"] = ParamSpec(c, "uniform", *scale_range)
        params["shift"] = ParamSpec(c, "normal", 0.0, 0.1)
        return self._add("batch_norm", (x,), {"eps": float(eps)}, xs, name, params)

    def layer_norm(self, x: int, *, eps: float = 1e-5, name: str | None = None) -> int:
        """Normalise over the last axis, then scale and shift."""
        xs = self._f32(x, "layer_norm")
        d = (xs[-1],)
        params = {"scale": ParamSpec(d, "uniform", 0.5, 1.5),
                  "shift": ParamSpec(d, "normal", 0.0, 0.1)}
        return self._add("layer_norm", (x,), {"eps": float(eps)}, xs, name, params)

    def softmax(self, x: int, *, axis: int = -1, name: str | None = None) -> int:
        xs = self._f32(x, "softmax")
        if not -len(xs) <= axis < len(xs):
            raise ValueError(f"softmax axis {axis} is out of range for shape {xs}")
        return self._add("softmax", (x,), {"axis": axis % len(xs)}, xs, name)

    def reshape(self, x: int, shape: Sequence[int], *, name: str | None = None) -> int:
        """The same elements in a new full shape (one dim may be -1); of an
        int64 node (indices viewed as an embedding lookup reads them), int64."""
        dtype = self._node(x).dtype
        xs = self._node(x).shape
        want = [int(d) for d in shape]
        total = math.prod(xs)
        if want.count(-1) > 1 or any(d < 1 and d != -1 for d in want):
            raise ValueError(f"reshape to {tuple(want)}: at most one -1, others >= 1")
        if -1 in want:
            rest = -math.prod(want)
            if rest == 0 or total % rest:
                raise ValueError(f"cannot reshape {xs} to {tuple(want)}")
            want[want.index(-1)] = total // rest
        if math.prod(want) != total:
            raise ValueError(f"cannot reshape {xs} ({total} elements) to {tuple(want)}")
        return self._add("reshape", (x,), {"shape": tuple(want)}, tuple(want), name,
                         dtype=dtype)

    def slice(self, x: int, start: int, rows: int, *, after: Sequence[int] = (),
              name: str | None = None) -> int:
        """Rows ``start .. start + rows - 1`` of ``x`` along its first axis (a
        view: the native plan points into ``x``'s buffer); ``after``: nodes it
        only runs after."""
        xs = self._f32(x, "slice")
        if rows < 1 or start < 0 or start + rows > xs[0]:
            raise ValueError(f"slice rows [{start}, {start + rows}) are not within the "
                             f"{xs[0]} rows of {xs}")
        return self._add("slice", (x, *after), {"start": int(start)}, (int(rows), *xs[1:]),
                         name)

    def transpose(self, x: int, perm: Sequence[int], *, name: str | None = None) -> int:
        xs = self._f32(x, "transpose")
        p = tuple(int(i) for i in perm)
        if sorted(p) != list(range(len(xs))):
            raise ValueError(f"transpose perm {p} is not a permutation of the axes of {xs}")
        return self._add("transpose", (x,), {"perm": p}, tuple(xs[i] for i in p), name)

    def position_ids(self, ids: int, *, pad_id: int, offset: int,
                     name: str | None = None) -> int:
        """Padding-aware positions (int64, the ids' shape) of int64 (batch, seq)
        ids: ``offset`` + the running count of ids other than ``pad_id`` where
        the id is not ``pad_id``, else ``offset``."""
        n = self._node(ids)
        if n.dtype != "int64" or len(n.shape) != 2:
            raise ValueError(f"position_ids needs (batch, seq) int64 ids, got {n.name!r} "
                             f"({n.dtype}, {n.shape})")
        return self._add("position_ids", (ids,), {"pad_id": int(pad_id), "offset": int(offset)},
                         n.shape, name, dtype="int64")

    def rms_norm(self, x: int, *, eps: float = 1e-6, name: str | None = None) -> int:
        """RMS normalisation over the last axis; param scale (last axis,)."""
        xs = self._f32(x, "rms_norm")
        if not (eps >= 0 and math.isfinite(eps)):
            raise ValueError(f"rms_norm eps must be finite and >= 0, got {eps}")
        params = {"scale": ParamSpec((xs[-1],), "uniform", 0.5, 1.5)}
        return self._add("rms_norm", (x,), {"eps": float(eps)}, xs, name, params)

    def rotary(self, x: int, length: int | None = None, *, context: int | None = None,
               positions: int | None = None, name: str | None = None) -> int:
        """Rotate-half rotary positions of x (..., S, D), D even; params cos,
        sin (S, D), the tables of the rows' positions. With ``length`` (an
        int64 (1,) node: a cache's current length, read when the node runs)
        the tables are those of a ``context`` of C >= S positions, (C, D),
        and the rows take positions length .. length + S - 1.

        With ``positions`` (an int64 (B, S) node, x (B, ..., S, D)) the
        tables are computed as the node runs, as exporters write them:
        row (b, s) takes the float32 angles float32(positions[b, s]) *
        inv_freq (param (D / 2,)), each in both halves, and cos / sin of
        them times ``scaling`` (param (1,): Llama 3's attention scaling).
        With ``positions`` and a ``context`` C, the tables are params cos,
        sin (C, D) and row (b, s) takes their row positions[b, s] (ONNX's
        RotaryEmbedding with position_ids), each position in 0 .. C - 1."""
        xs = self._f32(x, "rotary")
        if len(xs) < 2 or xs[-1] % 2:
            raise ValueError(f"rotary needs (..., S, D) with D even, got {xs}")
        if positions is not None:
            if length is not None:
                raise ValueError("rotary takes positions or a cache's length, not both")
            p = self._node(positions)
            if len(xs) < 3 or p.dtype != "int64" or p.shape != (xs[0], xs[-2]):
                raise ValueError(f"rotary positions must be an int64 (batch, seq) node "
                                 f"{(xs[0], xs[-2]) if len(xs) > 2 else '(B, S)'} for an "
                                 f"input (B, ..., S, D) {xs}, got {p.name!r} "
                                 f"({p.dtype}, {p.shape})")
            if context is None:
                params = {"inv_freq": ParamSpec((xs[-1] // 2,), "uniform", 0.0, 1.0),
                          "scaling": ParamSpec((1,), "uniform", 1.0, 1.0)}
            elif isinstance(context, bool) or not isinstance(context, int) or context < 1:
                raise ValueError(f"rotary context (its tables' rows) must be an int >= 1, "
                                 f"got {context!r}")
            else:
                params = {w: ParamSpec((context, xs[-1]), "uniform", -1.0, 1.0)
                          for w in ("cos", "sin")}
            return self._add("rotary", (x, positions), {}, xs, name, params)
        table = (xs[-2], xs[-1])
        ins = [x]
        if length is not None:
            self._length(length, "rotary")
            if isinstance(context, bool) or not isinstance(context, int) or context < xs[-2]:
                raise ValueError(f"rotary with a length needs a context of at least its "
                                 f"{xs[-2]} rows, got {context!r}")
            table = (context, xs[-1])
            ins.append(length)
        elif context is not None:
            raise ValueError("rotary context is the tables' length under a cache's length: "
                             "give length too")
        params = {"cos": ParamSpec(table, "uniform", -1.0, 1.0),
                  "sin": ParamSpec(table, "uniform", -1.0, 1.0)}
        return self._add("rotary", ins, {}, xs, name, params)

    def _length(self, x: int, what: str) -> None:
        """Refuses anything but an int64 (1,) node as a cache's length."""
        n = self._node(x)
        if n.dtype != "int64" or n.shape != (1,):
            raise ValueError(f"{what} length must be an int64 (1,) node (a cache's current "
                             f"length), got {n.name!r} ({n.dtype} {n.shape})")

    def attention(self, q: int, k: int, v: int, mask: int | None = None, *,
                  causal: bool = False, scale: float | None = None,
                  causal_fill: float = FLOAT32_MIN, name: str | None = None) -> int:
        """Scaled dot-product attention of q (B, H, Sq, D), k (B, Hkv, Sk, D),
        v (B, Hkv, Sk, Dv), H a multiple of Hkv, an optional additive mask that
        broadcasts into (B, H, Sq, Sk); ``scale`` defaults to 1 / sqrt(D);
        a key causal masking hides scores ``causal_fill`` (finite)."""
        qs, ks, vs = (self._f32(t, "attention") for t in (q, k, v))
        if len(qs) != 4 or len(ks) != 4 or len(vs) != 4 or ks[0] != qs[0] \
                or vs[:3] != ks[:3] or ks[3] != qs[3] or qs[1] % ks[1]:
            raise ValueError(f"attention needs q (B, H, Sq, D), k (B, Hkv, Sk, D), v (B, "
                             f"Hkv, Sk, Dv) with H a multiple of Hkv, got {qs}, {ks}, {vs}")
        full = (qs[0], qs[1], qs[2], ks[2])
        ins = [q, k, v]
        if mask is not None:
            ms = self._f32(mask, "attention")
            if len(ms) != 4 or any(m not in (1, f) for m, f in zip(ms, full, strict=True)):
                raise ValueError(f"attention mask {ms} does not broadcast into {full}")
            ins.append(mask)
        s = 1.0 / math.sqrt(qs[3]) if scale is None else float(scale)
        if not math.isfinite(s) or not math.isfinite(causal_fill):
            raise ValueError(f"attention scale and causal_fill must be finite, got {scale}, "
                             f"{causal_fill}")
        return self._add("attention", ins, {"causal": bool(causal), "scale": s,
                                            "causal_fill": float(causal_fill)},
                         (*qs[:3], vs[3]), name)

    def decode_attention(self, q: int, k_new: int, v_new: int, past_k: int, past_v: int,
                         mask: int | None = None, *, scale: float | None = None,
                         causal_fill: float = FLOAT32_MIN, name: str | None = None) -> int:
        """A decode step's attention: q (B, H, S, D) against the past keys
        (B, Hkv, P, D) / values (B, Hkv, P, Dv) followed by the new ones
        (B, Hkv, S, D) / (B, Hkv, S, Dv), H a multiple of Hkv; query i sees keys
        j <= P + i (a hidden key scores ``causal_fill``); an optional additive
        mask broadcasts into (B, H, S, P + S); ``scale`` defaults to
        1 / sqrt(D). The present keys / values are not its output: concat the
        past and the new rows on axis 2 for them."""
        return self._decode_attention(q, k_new, v_new, past_k, past_v, mask, None, scale,
                                      causal_fill, name)

    def decode_attention_in_place(self, q: int, k_new: int, v_new: int, cache_k: int,
                                  cache_v: int, length: int, *, scale: float | None = None,
                                  causal_fill: float = FLOAT32_MIN,
                                  name: str | None = None) -> int:
        """:meth:`decode_attention` on a cache kept across runs: cache_k /
        cache_v (B, Hkv, C, D / Dv) for a context of C >= S positions, whose
        first L rows are filled, L the int64 (1,) node ``length`` read when
        the node runs. The node writes the new rows at L in place and
        attends over L + S keys (query i sees keys j <= L + i); no mask."""
        return self._decode_attention(q, k_new, v_new, cache_k, cache_v, None, length, scale,
                                      causal_fill, name)

    def _decode_attention(self, q: int, k_new: int, v_new: int, past_k: int, past_v: int,
                          mask: int | None, length: int | None, scale: float | None,
                          causal_fill: float, name: str | None) -> int:
        qs, ks, vs, pks, pvs = (self._f32(t, "decode_attention")
                                for t in (q, k_new, v_new, past_k, past_v))
        if length is not None:
            self._length(length, "decode_attention")
            if len(pks) == 4 and len(ks) == 4 and pks[2] < ks[2]:
                raise ValueError(f"decode_attention cache of {pks[2]} rows is shorter than the "
                                 f"{ks[2]} new rows")
        if any(len(s) != 4 for s in (qs, ks, vs, pks, pvs)) or ks[0] != qs[0] \
                or ks[2] != qs[2] or ks[3] != qs[3] or vs[:3] != ks[:3] or qs[1] % ks[1] \
                or pks[:2] != ks[:2] or pks[3] != ks[3] or pvs[:3] != pks[:3] \
                or pvs[3] != vs[3]:
            raise ValueError(f"decode_attention needs q (B, H, S, D), new k (B, Hkv, S, D), "
                             f"new v (B, Hkv, S, Dv), past k (B, Hkv, P, D) and past v (B, Hkv, "
                             f"P, Dv) with H a multiple of Hkv, got {qs}, {ks}, {vs}, {pks}, "
                             f"{pvs}")
        full = (qs[0], qs[1], qs[2], pks[2] + ks[2])
        ins = [q, k_new, v_new, past_k, past_v] + ([] if length is None else [length])
        if mask is not None:
            ms = self._f32(mask, "decode_attention")
            if len(ms) != 4 or any(m not in (1, f) for m, f in zip(ms, full, strict=True)):
                raise ValueError(f"decode_attention mask {ms} does not broadcast into {full}")
            ins.append(mask)
        s = 1.0 / math.sqrt(qs[3]) if scale is None else float(scale)
        if not math.isfinite(s) or not math.isfinite(causal_fill):
            raise ValueError(f"decode_attention scale and causal_fill must be finite, got "
                             f"{scale}, {causal_fill}")
        return self._add("decode_attention", ins,
                         {"scale": s, "causal_fill": float(causal_fill)}, (*qs[:3], vs[3]),
                         name)

    def glu(self, gate: int, up: int, kind: str = "swish", *, name: str | None = None) -> int:
        """act(gate) * up, act one of :data:`GLU_KINDS` (SwiGLU, GeGLU)."""
        gs, us = self._f32(gate, "glu"), self._f32(up, "glu")
        if gs != us:
            raise ValueError(f"glu needs gate and up of one shape, got {gs} and {us}")
        if kind not in GLU_KINDS:
            raise ValueError(f"glu kind must be one of {GLU_KINDS}, got {kind!r}")
        return self._add("glu", (gate, up), {"kind": kind}, gs, name)

    def tril_flatten(self, x: int, *, name: str | None = None) -> int:
        """(B, n, n) -> (B, n(n-1)/2): entries (i, j), j < i, row by row."""
        xs = self._f32(x, "tril_flatten")
        if len(xs) != 3 or xs[1] != xs[2] or xs[1] < 2:
            raise ValueError(f"tril_flatten needs (B, n, n) with n >= 2, got {xs}")
        n = xs[1]
        return self._add("tril_flatten", (x,), {}, (xs[0], n * (n - 1) // 2), name)


# The integer types of a quantised activation, and their ranges.
QUANT_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


def _quantized_params(op: str, weight: Shape | None, bias: bool, x_dtype: str, out_dtype: str
                      ) -> dict[str, ParamSpec]:
    """An int8 node's parameters: the grids of its input (and of its
    requantised output), and its int8 weights with their scales."""
    if x_dtype not in QUANT_RANGES:
        raise ValueError(f"{op} x_dtype must be 'uint8' or 'int8', got {x_dtype!r}")
    if out_dtype not in ("float32", *QUANT_RANGES):
        raise ValueError(f"{op} out_dtype must be 'float32', 'uint8' or 'int8', "
                         f"got {out_dtype!r}")
    params: dict[str, ParamSpec] = {}

    def grid(prefix: str, dtype: str) -> None:
        mid = float(sum(QUANT_RANGES[dtype]) + 1) // 2  # 128 for uint8, 0 for int8
        params[f"{prefix}_scale"] = ParamSpec((1,), "uniform", 0.05, 0.05)
        params[f"{prefix}_zero_point"] = ParamSpec((1,), "uniform", mid, mid)

    grid("x", x_dtype)
    if weight is not None:
        fan_in = math.prod(weight[1:])
        params["weight"] = ParamSpec(weight, "integers", -127, 127)
        # Weights of about N(0, 2 / fan_in): U(-127, 127) has std 127 / sqrt 3.
        ws = math.sqrt(2.0 / fan_in) * math.sqrt(3.0) / 127.0
        params["weight_scale"] = ParamSpec((weight[0],), "uniform", ws, ws)
        if bias:
            params["bias"] = ParamSpec((weight[0],), "normal", 0.0, 0.05)
    if out_dtype != "float32":
        grid("out", out_dtype)
    return params


def _dynamic_params(weight: Shape, bias: bool) -> dict[str, ParamSpec]:
    """A dynamically quantized node's int8 weights (zero points 0), their
    scales and its bias."""
    fan_in = math.prod(weight[1:])
    ws = math.sqrt(2.0 / fan_in) * math.sqrt(3.0) / 127.0  # as _quantized_params's
    params = {"weight": ParamSpec(weight, "integers", -127, 127),
              "weight_zero_point": ParamSpec((weight[0],), "uniform", 0.0, 0.0),
              "weight_scale": ParamSpec((weight[0],), "uniform", ws, ws)}
    if bias:
        params["bias"] = ParamSpec((weight[0],), "normal", 0.0, 0.05)
    return params


def _replay(b: GraphBuilder, node: Node) -> int:
    """Make ``node`` again with ``b`` from its op, attributes and parameter shapes."""
    a, ins, name = node.attrs, node.inputs, node.name
    shapes = node.params.shapes
    if node.op == "input":
        return b.input(name, node.shape, a["dtype"])
    if node.op == "constant":
        return b.constant(node.shape, name=name)
    if node.op == "conv2d":
        w = shapes.get("weight", ())
        if len(w) != 4:
            raise ValueError(f"conv2d weight must be 4-D (O, I, kh, kw), got {w}")
        return b.conv2d(ins[0], w[0], (w[2], w[3]), stride=a["stride"], padding=a["padding"],
                        dilation=a["dilation"], groups=a["groups"], bias="bias" in shapes,
                        relu=a["relu"], name=name)
    if node.op == "quantized_conv2d":
        w = shapes.get("weight", ())
        if len(w) != 4:
            raise ValueError(f"quantized_conv2d weight must be 4-D (O, I, kh, kw), got {w}")
        return b.quantized_conv2d(ins[0], w[0], (w[2], w[3]), stride=a["stride"],
                                  padding=a["padding"], dilation=a["dilation"],
                                  groups=a["groups"], bias="bias" in shapes, relu=a["relu"],
                                  x_dtype=a["x_dtype"], out_dtype=a["out_dtype"], name=name)
    if node.op == "quantized_linear":
        w = shapes.get("weight", ())
        if len(w) != 2:
            raise ValueError(f"quantized_linear weight must be 2-D (out, in), got {w}")
        return b.quantized_linear(ins[0], w[0], bias="bias" in shapes, relu=a["relu"],
                                  x_dtype=a["x_dtype"], out_dtype=a["out_dtype"], name=name)
    if node.op == "fake_quantize":
        return b.fake_quantize(ins[0], x_dtype=a["x_dtype"], name=name)
    if node.op == "dynamic_quantized_conv2d":
        w = shapes.get("weight", ())
        if len(w) != 4:
            raise ValueError(f"dynamic_quantized_conv2d weight must be 4-D (O, I, kh, kw), "
                             f"got {w}")
        return b.dynamic_quantized_conv2d(ins[0], w[0], (w[2], w[3]), stride=a["stride"],
                                          padding=a["padding"], dilation=a["dilation"],
                                          groups=a["groups"], bias="bias" in shapes, name=name)
    if node.op == "dynamic_quantized_linear":
        w = shapes.get("weight", ())
        if len(w) != 2:
            raise ValueError(f"dynamic_quantized_linear weight must be 2-D (out, in), got {w}")
        return b.dynamic_quantized_linear(ins[0], w[0], bias="bias" in shapes, name=name)
    if node.op == "linear":
        w = shapes.get("weight", ())
        if len(w) != 2:
            raise ValueError(f"linear weight must be 2-D (out, in), got {w}")
        return b.linear(ins[0], w[0], bias="bias" in shapes, relu=a["relu"], name=name)
    if node.op == "matmul":
        return b.matmul(ins[0], ins[1], trans_b=a["trans_b"], name=name)
    if node.op == "embedding_bag":
        t = shapes.get("table", ())
        if len(t) != 2:
            raise ValueError(f"embedding_bag table must be 2-D (rows, dim), got {t}")
        if a.get("table_format") == "byte_rowwise":
            return b.embedding_bag(ins[0], t[0], 4 * t[1] - 8, mode=a["mode"],
                                   table_format="byte_rowwise", name=name)
        return b.embedding_bag(ins[0], t[0], t[1], mode=a["mode"], name=name)
    if node.op == "eltwise":
        return b.eltwise(ins[0], a["kind"], name=name)
    if node.op == "add":
        return b.add(ins[0], ins[1], relu=a["relu"], name=name)
    if node.op == "mul":
        return b.mul(ins[0], ins[1], name=name)
    if node.op == "concat":
        return b.concat(ins, axis=a["axis"], name=name)
    if node.op == "pool2d":
        return b.pool2d(ins[0], a["kind"], a["kernel"], stride=a["stride"],
                        padding=a["padding"], ceil_mode=a["ceil_mode"],
                        count_include_pad=a["count_include_pad"], name=name)
    if node.op == "global_avg_pool":
        return b.global_avg_pool(ins[0], name=name)
    if node.op == "batch_norm":
        return b.batch_norm(ins[0], eps=a["eps"], scale="scale" in shapes, name=name)
    if node.op == "layer_norm":
        return b.layer_norm(ins[0], eps=a["eps"], name=name)
    if node.op == "softmax":
        return b.softmax(ins[0], axis=a["axis"], name=name)
    if node.op == "reshape":
        return b.reshape(ins[0], a["shape"], name=name)
    if node.op == "transpose":
        return b.transpose(ins[0], a["perm"], name=name)
    if node.op == "tril_flatten":
        return b.tril_flatten(ins[0], name=name)
    if node.op == "rms_norm":
        return b.rms_norm(ins[0], eps=a["eps"], name=name)
    if node.op == "rotary":
        if "inv_freq" in shapes:
            return b.rotary(ins[0], positions=ins[1], name=name)
        if len(ins) > 1 and len(b._nodes[ins[1]].shape) == 2:  # tables read at positions
            return b.rotary(ins[0], positions=ins[1], context=shapes["cos"][0], name=name)
        if len(ins) > 1:
            return b.rotary(ins[0], ins[1], context=shapes["cos"][0], name=name)
        return b.rotary(ins[0], name=name)
    if node.op == "attention":
        return b.attention(ins[0], ins[1], ins[2], ins[3] if len(ins) > 3 else None,
                           causal=a["causal"], scale=a["scale"],
                           causal_fill=a["causal_fill"], name=name)
    if node.op == "decode_attention":
        # A sixth input is a mask, or an int64 cache length.
        if len(ins) > 5 and b._nodes[ins[5]].dtype == "int64":
            return b.decode_attention_in_place(ins[0], ins[1], ins[2], ins[3], ins[4], ins[5],
                                               scale=a["scale"], causal_fill=a["causal_fill"],
                                               name=name)
        return b.decode_attention(ins[0], ins[1], ins[2], ins[3], ins[4],
                                  ins[5] if len(ins) > 5 else None,
                                  scale=a["scale"], causal_fill=a["causal_fill"], name=name)
    if node.op == "glu":
        return b.glu(ins[0], ins[1], a["kind"], name=name)
    if node.op == "position_ids":
        return b.position_ids(ins[0], pad_id=a["pad_id"], offset=a["offset"], name=name)
    if node.op == "slice":
        return b.slice(ins[0], a["start"], node.shape[0], after=ins[1:], name=name)
    raise ValueError(f"unknown op {node.op!r}")


def _canonical(v: Any) -> Any:
    """An attribute value compared by content: lists as tuples, numpy
    scalars as Python ones, and a bool never equal to an int (an axis of
    True is not the axis 1 the builder would record)."""
    if isinstance(v, (list, tuple)):
        return tuple(_canonical(x) for x in v)
    if isinstance(v, dict):
        return {k: _canonical(x) for k, x in v.items()}
    if isinstance(v, np.generic):
        v = v.item()
    return ("bool", v) if isinstance(v, bool) else (type(v).__name__, v)


def _arity(op: str, n: int) -> None:
    if op == "attention":  # q, k, v and an optional mask
        if n not in (3, 4):
            raise ValueError(f"attention takes 3 or 4 inputs, got {n}")
        return
    if op == "decode_attention":  # q, new k, new v, past k, past v, a mask or a length
        if n not in (5, 6):
            raise ValueError(f"decode_attention takes 5 or 6 inputs, got {n}")
        return
    if op == "fake_quantize":  # x, or two values it sums (a residual add fused into it)
        if n not in (1, 2):
            raise ValueError(f"fake_quantize takes 1 or 2 inputs, got {n}")
        return
    if op == "rotary":  # x and an optional cache length or positions
        if n not in (1, 2):
            raise ValueError(f"rotary takes 1 or 2 inputs, got {n}")
        return
    want = {"input": 0, "constant": 0, "matmul": 2, "add": 2, "mul": 2, "glu": 2}.get(op, 1)
    if op == "concat" and n < 1 or op != "concat" and n != want:
        raise ValueError(f"{op} takes {'one or more' if op == 'concat' else want} "
                         f"input(s), got {n}")


def rebuild(graph: Graph) -> Graph:
    """``graph`` made again, node by node, by a :class:`GraphBuilder` from each
    node's op, attributes and parameter shapes, with the graph's own
    parameter arrays.

    A graph from the builder comes back the same. A hand-made one (nodes
    put together directly) is checked as the builder checks: a node whose
    attributes, declared shape, dtype or parameters do not fit its inputs
    is refused here, before anything runs it.

    Raises
    ------
    ValueError, TypeError
        The first node the builder would not have made, named, and why.
    """
    b = GraphBuilder(graph.name)
    nodes: list[Node] = []
    for node in graph.nodes:
        if not isinstance(node, Node):
            raise TypeError(f"graph {graph.name!r} holds {node!r}, not a Node")
        where = f"node {node.name!r} ({node.op})"
        if not isinstance(node.params, Params):  # the analysis reads their specs
            raise TypeError(f"{where}: params must be a Params, got "
                            f"{type(node.params).__name__}")
        try:
            _arity(node.op, len(node.inputs))
            made = b._nodes[_replay(b, node)]
        except KeyError as e:
            raise ValueError(f"{where} lacks the attribute or parameter {e}") from None
        except (ValueError, TypeError, IndexError) as e:
            raise type(e)(f"{where}: {e}") from None
        if _canonical(made.attrs) != _canonical(node.attrs):
            # What reads the graph (the reference, the analysis, the
            # framework runners) takes the node's attributes as they are.
            raise ValueError(f"{where} has attributes {node.attrs}; the builder records "
                             f"{made.attrs} for them")
        if made.shape != tuple(node.shape) or made.dtype != node.dtype:
            raise ValueError(f"{where} declares output {tuple(node.shape)} {node.dtype}; its "
                             f"inputs and attributes give {made.shape} {made.dtype}")
        want, have = made.params.shapes, node.params.shapes
        if have != want:
            raise ValueError(f"{where} has parameters {have}; it needs {want}")
        # The builder's normalised attributes, the graph's own parameter arrays.
        nodes.append(Node(made.id, made.op, made.inputs, made.attrs, node.params,
                              made.shape, made.dtype, made.name))
    return Graph(graph.name, nodes, graph.outputs, graph.meta)
