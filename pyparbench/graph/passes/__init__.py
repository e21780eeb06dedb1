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

One module per group, every public name re-exported here:

* :mod:`~pyparbench.graph.passes.rewrite` — the emitter and derived parameters;
* :mod:`~pyparbench.graph.passes.fusion` — ``bn_fold``, ``residual``, ``activation``
  (and a ReLU as a conv2d / linear's flag, for the int8 graph);
* :mod:`~pyparbench.graph.passes.layout` — ``layout``, ``blocked``;
* :mod:`~pyparbench.graph.passes.conv` — ``subsample``, ``im2col``;
* :mod:`~pyparbench.graph.passes.microbatching` — ``microbatch`` and the cache budget;
* :mod:`~pyparbench.graph.passes.precision` — the bf16 plan of a run at
  ``Settings(precision="bf16")`` (not a pass of ``graph_opt``: applied last,
  whatever it asks for);
* :mod:`~pyparbench.graph.passes.quantize` — the int8 graph of a run at
  ``Settings(precision="int8")``: conv2d / linear int8 on grids a
  calibration run recorded (the executor makes that run), embedding bags
  over 8-bit rowwise tables;
* :mod:`~pyparbench.graph.passes.optimizer` — the pipeline: :func:`optimize`,
  :func:`executed_graph`.
"""

from __future__ import annotations

from pyparbench.graph.passes.conv import im2col_marks, subsample
from pyparbench.graph.passes.fusion import activation_fusion, bn_fold, residual_fusion
from pyparbench.graph.passes.layout import (
    BLOCKED_LAYOUTS,
    BLOCKED_MIN_BATCH,
    blocked_choice,
    blocked_misfits,
    layout_blocked,
    layout_nhwc,
    preferred_layout,
)
from pyparbench.graph.passes.microbatching import (
    MAX_MICRO_BATCHES,
    MicroBatchPlan,
    cache_budget_bytes,
    microbatch,
    microbatch_plan,
)
from pyparbench.graph.passes.optimizer import (
    PASSES,
    OptimizeResult,
    PassSettings,
    executed_graph,
    optimize,
    pipeline,
    unsupported,
)
from pyparbench.graph.passes.quantize import int8_structure, to_int8
from pyparbench.graph.passes.rewrite import DerivedParams
from pyparbench.choices import GRAPH_OPTS

__all__ = ["BLOCKED_LAYOUTS", "BLOCKED_MIN_BATCH", "GRAPH_OPTS", "MAX_MICRO_BATCHES", "PASSES",
           "DerivedParams", "MicroBatchPlan", "OptimizeResult", "PassSettings",
           "activation_fusion", "blocked_choice", "blocked_misfits", "bn_fold",
           "cache_budget_bytes", "executed_graph", "im2col_marks", "layout_blocked",
           "layout_nhwc", "microbatch", "microbatch_plan", "optimize", "pipeline",
           "preferred_layout", "residual_fusion", "subsample", "int8_structure", "to_int8",
           "unsupported"]
