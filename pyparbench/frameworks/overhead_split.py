"""The native time outside kernels, split: executor cost, memory / cache effects, the rest.

``pyparbench overhead`` reads the native latency against the executed
plan's kernels timed alone in a loop, warm: their weights and activations
in cache. In the model's chain a node meets its data after every other
node's have passed through the caches, so part of "outside kernels" is the
kernels' own cache misses, not the executor. Split (all ns per run):

``executor_ns``
    the executor's cost per node (the dispatch chains: (t(401) - t(1)) /
    400 less the tiny kernel's time alone, bench/figures_dispatch.py's
    method) times the executed graph's nodes with a kernel;
``memory_cache_ns``
    each isolated kernel timed with a buffer as large as the model's
    working set read between calls, less the same kernel warm
    (:mod:`pyparbench.frameworks.native.cold`), summed over the graph as
    built: what the chain's reuse distance costs the kernels;
``rest_ns``
    outside kernels less both (timer, synchronisation, what neither
    method sees; negative when the two estimates overshoot);
``cold_bound_ns``
    the same with every cache flushed: the most memory could cost.

``kernels_in_chain_ns`` (the warm kernels plus ``memory_cache_ns``) is the
kernel baseline every runner is read against: a framework's
``beyond_kernels_ns`` is its latency less it, as is the native one, so no
runner is credited or blamed for the kernels' cache misses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["LABELS", "beyond_kernels", "split_native"]

LABELS = {
    "kernels_warm_ns": "kernels alone, warm (executed plan, C++ loop)",
    "memory_cache_ns": "memory / cache effects (kernels with the chain's data between calls, "
                       "less warm)",
    "executor_ns": "executor cost (dispatch chains: us per node x nodes)",
    "rest_ns": "rest (outside kernels less both)",
    "cold_bound_ns": "bound: kernels with every cache flushed, less warm",
}


def _delta(after: Sequence[float | None], warm: Sequence[float]) -> float | None:
    if any(a is None for a in after):
        return None
    return float(sum(float(a) - w for a, w in zip(after, warm, strict=True)
                     if a is not None))


def split_native(native: Mapping[str, Any], cache: Mapping[str, Any] | None,
                 executor_us_per_node: float | None) -> dict[str, Any] | None:
    """The split of ``native`` (an ``overhead`` native section with
    ``latency``, ``executed_kernel_sum_ns`` and ``executed_nodes``), from the
    child's ``cache_ns`` timings and the executor's cost per node (None:
    not measured); None when there is no executed kernel sum. Each part is
    None where its measurement is missing, with ``missing`` saying why."""
    warm = native.get("executed_kernel_sum_ns")
    if native["status"] != "ok" or not warm:
        return None
    latency = float(native["latency"]["median"])
    outside = latency - float(warm)
    missing = []
    memory = cold = None
    if cache is None:
        missing.append("memory / cache: the kernels were not timed with their data out of cache")
    else:
        memory = _delta(cache["chain"], cache["warm"])
        cold = _delta(cache["cold"], cache["warm"])
    executor = None
    if executor_us_per_node is None:
        missing.append("executor: the dispatch chains did not run at this thread count")
    else:
        executor = executor_us_per_node * 1e3 * int(native["executed_nodes"])
    rest = None if memory is None or executor is None else outside - memory - executor
    out: dict[str, Any] = {
        "latency_ns": latency, "kernels_warm_ns": float(warm), "outside_kernels_ns": outside,
        "executor_ns": executor, "executor_us_per_node": executor_us_per_node,
        "executed_nodes": int(native["executed_nodes"]), "memory_cache_ns": memory,
        "rest_ns": rest, "cold_bound_ns": cold,
        "kernels_in_chain_ns": None if memory is None else float(warm) + memory,
        "chain_flush_bytes": None if cache is None else cache["chain_bytes"],
        "cold_flush_bytes": None if cache is None else cache["cold_bytes"],
        "labels": LABELS, "missing": missing}
    return out


def beyond_kernels(latency_ns: float, split: Mapping[str, Any] | None) -> float | None:
    """A runner's latency less the kernel baseline (the kernels as the chain
    meets them), or None without one."""
    if split is None or split.get("kernels_in_chain_ns") is None:
        return None
    return latency_ns - float(split["kernels_in_chain_ns"])
