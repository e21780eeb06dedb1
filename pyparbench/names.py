"""The names of the parallelism knobs' values and of the presets, listed once.

Settings validate against these, the CLI offers them as choices, the suite's
grid crosses them, and the native core's own lists (``_core.ops.LIBRARIES``,
``_core.threading`` pool kinds) are checked against them by the tests.
"""

from __future__ import annotations

__all__ = ["AFFINITIES", "GRAPH_OPTS", "GRAPH_PASSES", "LIBRARIES", "OPERATORS", "PLACEMENTS",
           "POOLS", "PRESETS", "SCHEDULERS"]

SCHEDULERS = ("sync", "async")
OPERATORS = ("library", "framework")
LIBRARIES = ("onednn", "eigen", "blas")
POOLS = ("openmp", "std", "eigen")
AFFINITIES = ("none", "compact", "scatter")
PLACEMENTS = ("shared", "per-socket")
PRESETS = ("tensorflow", "intel", "tftuner")
# The graph optimisation passes (pyparbench/graph/passes.py), in pipeline order.
GRAPH_PASSES = ("bn_fold", "residual", "activation", "layout")
# Settings.graph_opt: no pass, the whole pipeline, or one pass alone.
GRAPH_OPTS = ("none", "full", *GRAPH_PASSES)
