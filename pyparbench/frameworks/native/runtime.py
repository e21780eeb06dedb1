"""The native side of a comparison: pyparbench's executor on the same graph.

* latency: the compiled plan run under the settings, timed in its C++ loop;
* per-node times: the executor's trace (median of several traced runs), per
  node of the graph the plan runs (rewritten by the passes that
  ``Settings.graph_opt`` asks for);
* kernel sum: each node of the graph as built as an isolated prepared
  kernel (:mod:`.kernels`). Against a plan with fused nodes it shows what
  the passes gained.

Imported in the native child process (pyparbench's core loaded, no framework).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from pyparbench.executor import compile_graph, resolve
from pyparbench.frameworks._common import Array, Profile
from pyparbench.frameworks.native.cold import (
    Flush,
    all_caches_bytes,
    single_call_times,
    working_set_bytes,
)
from pyparbench.frameworks.native.kernels import node_kernel
from pyparbench.frameworks.native.profile import per_op_type
from pyparbench.graph import Graph
from pyparbench.settings import Settings

__all__ = ["NativeModel", "prepare"]


class NativeModel:
    """A graph compiled by pyparbench's executor, run under one Settings."""

    def __init__(self, graph: Graph, inputs: Mapping[str, Array], settings: Settings) -> None:
        if settings.instances != 1:
            raise ValueError(f"instances={settings.instances}: a comparison runs one copy "
                             "of the model")
        self.graph = graph
        self.settings = settings
        self.inputs = dict(inputs)
        self.cg = compile_graph(graph)
        self.cg.set_inputs(self.inputs)
        # The graph the plan runs: rewritten by the passes settings.graph_opt asks for.
        self.optimized = self.cg.optimized(settings)
        native = resolve(settings, self.optimized)
        self.cpus: list[int] | None = list(native.worker_cpus[0]) if native.worker_cpus else None
        opt = self.cg.optimization(settings)
        self.info: dict[str, Any] = {
            "resolved": {"worker_cpus": [list(c) for c in native.worker_cpus]},
            "graph_opt": {"requested": settings.graph_opt, "applied": list(opt.applied),
                          "nodes": len(graph.nodes), "optimized_nodes": len(opt.graph.nodes)}}

    def time(self, repeats: int, warmup: int) -> list[float]:
        return self.cg.run(self.settings, repeats=repeats, warmup=warmup).ns

    def outputs(self) -> dict[str, Array]:
        self.cg.run(self.settings, repeats=1, warmup=0)
        return self.cg.outputs()

    def audit(self) -> dict[str, Any]:
        """The executor's own audit of one run: threads, CPUs, mismatches."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rec = self.cg.run(self.settings, repeats=1, warmup=0, audit=True)
        assert rec.audit is not None
        return {"threads": len(rec.audit.tids), "cpus_seen": sorted(rec.audit.cpus_seen),
                "mismatches": rec.mismatches}

    def node_times(self, runs: int) -> tuple[list[float], float]:
        """Each node's median time in ``runs`` traced runs of the plan (node
        ids of the optimised graph), and the median traced run (ns)."""
        per: list[list[float]] = [[] for _ in self.optimized.nodes]
        whole = []
        for _ in range(runs):
            # Warm runs first: the trace is of the last repeat, with the
            # team's threads awake as in a timed loop.
            rec = self.cg.run(self.settings, repeats=1, warmup=5, trace=True)
            whole.append(rec.ns[-1])
            for e in rec.trace:
                per[e.node].append(max(e.end_ns - e.start_ns, 0.0))
        return [float(np.median(v)) if v else 0.0 for v in per], float(np.median(whole))

    def profile(self, iterations: int) -> Profile:
        """Per op type: the executor's per-node times over ``iterations``
        traced runs (:func:`.profile.per_op_type`)."""
        times, whole = self.node_times(iterations)
        return per_op_type(self.optimized, times, whole)

    def inline_times(self, repeats: int, inner: int = 1000) -> list[float]:
        """Each node of the optimised graph: its kernel as the plan prepared
        it, alone in a C++ loop (median ns per call; 0 for no kernel)."""
        return self.cg.time_nodes(self.settings, repeats=repeats, inner=inner)

    def kernel_times(self, repeats: int, warmup: int = 10) -> list[float]:
        """Each node of the graph as built (before the passes: the prepared
        kernels have no fused post-ops) as an isolated prepared kernel, fed
        its real inputs: median ns (0 for a node with no kernel)."""
        plain = self.settings.with_(graph_opt="none")
        graph = self.cg.optimized(plain)
        self.cg.run(plain, repeats=1, warmup=0)
        threads = [max(t.threads, 1) for t in self.cg.node_threads(plain)]
        out = []
        for n in graph.nodes:
            ins = [self.inputs[graph.nodes[j].name] if graph.nodes[j].op == "input"
                   else self.cg.output(j) for j in n.inputs]
            made = node_kernel(n, ins, threads[n.id], self.settings.library, self.cpus)
            if made is None:
                out.append(0.0)
                continue
            _, run = made
            out.append(float(np.median(run(repeats, warmup))))
        return out

    def cold_kernel_times(self, repeats: int, cold_repeats: int) -> dict[str, Any]:
        """Each node of the graph as built, as in :meth:`kernel_times` but a
        linear layer's weights packed as the executor packs them, timed
        one call at a time warm, as the chain leaves its cache and with
        every cache flushed (:mod:`.cold`): medians in ns per node (0 for a
        node with no kernel; ``cold`` None per node when ``cold_repeats``
        is 0), and the bytes each flush reads."""
        plain = self.settings.with_(graph_opt="none")
        graph = self.cg.optimized(plain)
        self.cg.run(plain, repeats=1, warmup=0)
        threads = [max(t.threads, 1) for t in self.cg.node_threads(plain)]
        chain = Flush(working_set_bytes(graph))
        cold = Flush(all_caches_bytes(self.cpus)) if cold_repeats else None
        out: dict[str, Any] = {"chain_bytes": chain.nbytes,
                               "cold_bytes": cold.nbytes if cold else None,
                               "warm": [], "chain": [], "cold": []}
        for n in graph.nodes:
            ins = [self.inputs[graph.nodes[j].name] if graph.nodes[j].op == "input"
                   else self.cg.output(j) for j in n.inputs]
            made = node_kernel(n, ins, threads[n.id], self.settings.library, self.cpus,
                               packed=True)
            if made is None:
                for key in ("warm", "chain"):
                    out[key].append(0.0)
                out["cold"].append(0.0 if cold else None)
                continue
            _, run = made
            out["warm"].append(float(np.median(single_call_times(run, repeats, None))))
            out["chain"].append(float(np.median(single_call_times(run, repeats, chain))))
            out["cold"].append(float(np.median(single_call_times(run, cold_repeats, cold)))
                               if cold else None)
        return out


def prepare(graph: Graph, inputs: Mapping[str, Array], settings: Settings) -> NativeModel:
    return NativeModel(graph, inputs, settings)
