"""A user's ONNX file as a :class:`~pyparbench.graph.ir.Graph`, with the file's own weights.

:func:`from_onnx` reads the file, fixes every input shape (a symbolic batch
dimension takes ``batch``), folds the shape arithmetic, and maps each
remaining ONNX node onto the IR's ops (:mod:`pyparbench.graph.opdefs`), so
that the native executor, the numpy reference and every graph pass run the
file's network as they run a built one.

Shape arithmetic is folded with onnx's own reference evaluator, one node
at a time (:mod:`~pyparbench.graph.onnx.importer` says why).

Patterns that exporters write as several nodes (the erf form of GELU, a
value gated by its own sigmoid, RMSNorm, a zero Pad before a Conv) are
first rewritten as one (:mod:`~pyparbench.graph.onnx.rewrites`), each
rotary embedding as one RotaryEmbedding node (:mod:`~pyparbench.graph.onnx.rotary`)
and each attention as one Attention node (:mod:`~pyparbench.graph.onnx.attention`).

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
graph input (``embedding_bag`` of bags of one over an int64 reshape of the
input to ``(numel, 1)``: the graph's input keeps the file's shape), values
computed from an int64 attention mask alone (one two-row lookup of the
mask, :mod:`~pyparbench.graph.onnx.mask_values`), integers computed from
int64 ids alone (folded where constant; padding-aware position ids as a
``position_ids`` node, :mod:`~pyparbench.graph.onnx.id_values`; the ids
in another shape a view) and rows of a constant table by them, a decoder's
causal mask computed from an int64 mask, RMSNormalization (and the
exporters' RMSNorm pattern), Attention (4-D, grouped-query heads, and the
exporters' scaled-dot-product pattern,
:mod:`~pyparbench.graph.onnx.attention`: one native ``attention`` node),
RotaryEmbedding (rotate-half of the whole head by constant caches, or
their rows at an int64 position_ids input of the file; the exporters'
pattern, :mod:`~pyparbench.graph.onnx.rotary`: one ``rotary`` node, its
tables computed as it runs where the exporters compute them from an int64
position_ids input), SiLU or GELU times another value of its shape (SwiGLU, GeGLU: one
``glu`` node), Neg, Identity,
Dropout and Cast to float32 (removed). A float constant that an op reads
as data rather than as its weight (a vision transformer's class token
concatenated to the patches) becomes a ``constant`` node.

A file that does not map fully is refused with ONE ValueError before
anything is built for it to run, listing every unsupported op type with its
count and first node. A file that is not ONNX, truncated, larger than
``max_bytes``, missing its external data, computing in a dtype other
than float32, declaring an opset newer than the installed onnx knows, or
with a Conv whose kernel_shape contradicts its weights is refused with one
line naming the file.

The modules: ``load`` (reading the file, its checks, its inputs),
``importer`` (the values of the file's names, folding, node names, the
problems), ``mask_values`` and ``id_values`` (what is computed from an
int64 input alone), ``rotary`` and ``attention`` (the exporters' rotary
embeddings and attention found), ``rewrites`` (multi-node patterns as one node), one
``convert_*`` module per op family, ``registry`` (op type -> converter),
``api`` (:func:`from_onnx`).
"""

from pyparbench.graph.onnx.api import from_onnx
from pyparbench.graph.onnx.load import DEFAULT_MAX_BYTES

__all__ = ["DEFAULT_MAX_BYTES", "from_onnx"]
