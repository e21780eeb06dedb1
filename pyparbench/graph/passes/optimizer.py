"""The pipeline: which passes a ``graph_opt`` value asks for, which of them
a library and operator mode can take, and :func:`optimize`, which applies
them in order and says which ran, which were skipped and why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pyparbench.graph.ir import Graph
from pyparbench.graph.passes.conv import im2col_marks, subsample
from pyparbench.graph.passes.fusion import activation_fusion, bn_fold, residual_fusion
from pyparbench.graph.passes.int8_gates import int8_gates
from pyparbench.graph.passes.int8_identities import int8_identities
from pyparbench.graph.passes.int8_values import int8_values
from pyparbench.graph.passes.layout import blocked_choice, layout_blocked_unchecked, layout_nhwc
from pyparbench.graph.passes import microbatching
from pyparbench.graph.passes.microbatching import microbatch_plan, split_batch
from pyparbench.graph.passes.precision import to_bf16
from pyparbench.graph.passes.quantize import int8_structure
from pyparbench.choices import GRAPH_PASSES, check_precision, graph_opt_passes

__all__ = ["PASSES", "ExecutedGraphs", "OptimizeResult", "PassSettings", "executed_graph",
           "optimize", "pipeline", "unsupported"]

PASSES = GRAPH_PASSES
"""Every pass, in the order the full pipeline applies them (BN first, so a
folded conv can take its residual and activation; layout last, on the fused
nodes). Settings.graph_opt takes GRAPH_OPTS (none, full or one pass alone) or
passes joined by '+'."""


@dataclass(frozen=True)
class OptimizeResult:
    """An optimised graph, the passes applied in order, and the passes asked
    for but skipped, each with the reason."""

    graph: Graph
    applied: tuple[str, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    # What a pass chose, where it chooses (microbatch: MicroBatchPlan.as_dict()).
    details: dict[str, Any] = field(default_factory=dict)
    # The run's precision: at bf16 the matrix nodes multiply in bf16 behind
    # one conversion per value (graph.passes.precision); at int8 the graph
    # given is already the int8 one (graph.passes.quantize: its grids come
    # from a calibration run, which the executor makes).
    precision: str = "fp32"

    def as_dict(self) -> dict[str, Any]:
        return {"passes": list(self.applied), "skipped": dict(self.skipped),
                "nodes": len(self.graph), "flops": self.graph.flops,
                "details": dict(self.details), "precision": self.precision}


def pipeline(graph_opt: str) -> tuple[str, ...]:
    """The passes a Settings.graph_opt value asks for (see
    :func:`~pyparbench.choices.graph_opt_passes`)."""
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
             operator: str = "library", budget_bytes: int | None = None,
             precision: str = "fp32") -> OptimizeResult:
    """Apply ``passes`` (names of PASSES, in the pipeline's order) to ``graph``
    for a run under ``library`` and ``operator`` mode. ``budget_bytes`` is
    the micro-batch pass's cache budget: that of the team that will run the
    graph (:func:`~pyparbench.graph.passes.microbatching.cache_budget_bytes`
    of its CPUs); default, every CPU this process may use. ``precision``
    ``"bf16"``: after the passes, the matrix nodes are marked bf16 with one
    conversion per value they read (:func:`~pyparbench.graph.passes.precision.to_bf16`,
    whatever ``passes``: it is the run's number format, not an optimisation);
    ``"int8"``: the graph is taken as the int8 graph it is (the executor
    quantises a float graph first, :func:`pyparbench.executor.int8_graph`:
    its grids need a calibration run)."""
    check_precision(precision)
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
                    g = layout_blocked_unchecked(g, layout)  # blocked_choice found no misfit
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
            budget = (microbatching.cache_budget_bytes() if budget_bytes is None
                      else budget_bytes)
            plan = microbatch_plan(g, budget)
            if plan is not None:
                details["microbatch"] = plan.as_dict()
                g = split_batch(g, plan)
        # "memory" rewrites nothing: the plan reads it from `applied`.
        applied.append(name)
    if "layout" in applied:  # int8 values, channels-last, kept as bytes between int8 nodes
        g = int8_values(int8_gates(int8_identities(g)))
    if precision == "bf16":
        g = to_bf16(g)
    return OptimizeResult(g, tuple(applied), skipped, details, precision)


class PassSettings(Protocol):
    """What :func:`executed_graph` reads of a run's settings: the four fields
    of :class:`pyparbench.settings.Settings` that decide the passes (named
    here, as settings sit above the graph and import it)."""

    @property
    def graph_opt(self) -> str: ...

    @property
    def library(self) -> str: ...

    @property
    def operator(self) -> str: ...

    @property
    def precision(self) -> str: ...


def executed_graph(graph: Graph, settings: PassSettings, *,
                   budget_bytes: int | None = None) -> Graph:
    """The graph the executor runs for ``graph`` under ``settings``: rewritten
    by the passes ``settings.graph_opt`` asks for that its library and
    operator mode can take (what a trace's node ids refer to); at int8,
    those of the int8 graph's structure
    (:func:`~pyparbench.graph.passes.quantize.int8_structure`: the nodes the
    executor runs, with placeholder grids). ``budget_bytes``: the micro-batch budget of the team that runs it (see
    :func:`optimize`)."""
    passes = pipeline(settings.graph_opt)
    if not passes and settings.precision == "fp32":
        return graph
    if settings.precision == "int8":  # the int8 graph's structure (its grids need a run)
        graph = int8_structure(graph)
    return optimize(graph, passes, library=settings.library, operator=settings.operator,
                    budget_bytes=budget_bytes, precision=settings.precision).graph


class ExecutedGraphs:
    """:func:`executed_graph` for many settings and teams of the same graphs
    (a search over candidates): the passes before the micro-batch pass run
    once per graph, ``graph_opt``, library and operator mode, and the
    micro-batch split once per plan it makes, however many team budgets
    lead to that plan (each pass after it rewrites nothing)."""

    def __init__(self) -> None:
        self._memo: dict[tuple[Any, ...], tuple[Graph, Graph]] = {}

    def _cached(self, graph: Graph, key: tuple[Any, ...], make: Any) -> Graph:
        hit = self._memo.get((id(graph), *key))
        if hit is None or hit[0] is not graph:
            hit = (graph, make())
            self._memo[(id(graph), *key)] = hit
        return hit[1]

    def __call__(self, graph: Graph, settings: PassSettings, *,
                 budget_bytes: int | None = None) -> Graph:
        if settings.precision == "int8":  # as executed_graph: the int8 graph's structure
            graph = self._cached(graph, ("int8",), lambda: int8_structure(graph))
        run = self._fp32(graph, settings, budget_bytes)
        if settings.precision != "bf16":
            return run
        return self._cached(run, (settings.precision,), lambda: to_bf16(run))

    def _fp32(self, graph: Graph, settings: PassSettings, budget_bytes: int | None) -> Graph:
        passes = pipeline(settings.graph_opt)
        lib, op = settings.library, settings.operator
        if "microbatch" not in passes or unsupported("microbatch", lib, op) is not None:
            return self._cached(graph, (passes, lib, op), lambda: optimize(
                graph, passes, library=lib, operator=op).graph)
        before_passes = tuple(p for p in passes if p != "microbatch")
        before = self._cached(graph, (before_passes, lib, op), lambda: optimize(
            graph, before_passes, library=lib, operator=op).graph)
        budget = microbatching.cache_budget_bytes() if budget_bytes is None else budget_bytes
        plan = microbatch_plan(before, budget)
        if plan is None:
            return before
        # The plan's budget aside, equal plans split alike.
        same = (plan.last, plan.count, plan.rows)
        return self._cached(before, ("split", *same), lambda: split_batch(before, plan))
