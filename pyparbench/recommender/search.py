"""The search space: the graph each instance count runs, the candidate
settings, and each candidate's prediction by the schedule simulation.

Candidates: sync with one worker and async with 2 .. (graph width) workers;
intra-op threads cores // workers, and every measured count below it (fewer
threads than cores can win when ops stop scaling); library and framework
operator modes, each framework pool; each calibrated math library; for the
latency objective, instances that split the batch, for the throughput
objective, instances that each serve a whole batch. No candidate
oversubscribes the cores or uses SMT siblings (unless ``allow_smt``);
threads are pinned compactly. When the cost model has measured the OpenMP
wait policies, each candidate whose ops run on OpenMP teams of more than
one thread is also tried under each of them
(:func:`~pyparbench.recommender.waitpolicy.wait_variants`). On a hybrid
machine whose slower CPU kinds have a known speed, the candidates are also
made on each such kind alone (:func:`on_kind`: pinned to its CPUs, predicted
at its speed).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyparbench.graph import Graph
from pyparbench.executor import team_budget_bytes
from pyparbench.graph.passes import executed_graph, pipeline
from pyparbench.graph.passes.optimizer import ExecutedGraphs
from pyparbench.models import MODELS, build, files
from pyparbench.recommender.costmodel import CostModel
from pyparbench.recommender.simulate import Resources, simulate
from pyparbench.recommender.types import Prediction
from pyparbench.recommender.waitpolicy import wait_variants
from pyparbench.settings import Settings
from pyparbench.threading.topology import Topology

__all__ = ["Executed", "batch_of", "candidates", "graph_at", "instance_graphs",
           "instance_operators", "kind_cpus", "on_kind", "predict", "predict_run"]


def batch_of(graph: Graph) -> int:
    """The graph's batch: what its builder recorded, else its first input's
    leading dimension."""
    b = graph.meta.get("batch")
    if isinstance(b, int) and b >= 1:
        return b
    return int(graph[graph.inputs[0]].shape[0]) if graph.inputs else 1


def graph_at(graph: Graph, batch: int) -> Graph | None:
    """The same model at another batch, when the graph says which model it is
    (and rebuilding it gives the same nodes)."""
    name = graph.meta.get("model")
    if not isinstance(name, str):
        return None

    if name not in MODELS and not files.is_file_key(name):
        return None
    try:
        other = build(name, batch)
    except ValueError:  # an ONNX file whose batch dimension is fixed
        return None
    if [n.name for n in other] != [n.name for n in graph]:
        return None
    return other


def instance_graphs(graph: Graph, resources: Resources, objective: str,
                    instances: bool) -> dict[int, Graph]:
    """Instance count -> the graph one instance runs: 1 -> ``graph``; with
    ``instances``, every k dividing the cores: for throughput the whole
    graph (each instance serves a batch), for latency the model at batch / k
    when k divides the batch and the model can be rebuilt at it."""
    out: dict[int, Graph] = {1: graph}
    if not instances or resources.cores < 2:
        return out
    batch = batch_of(graph)
    for k in range(2, resources.cores + 1):
        if resources.cores % k:
            continue
        if objective == "throughput":
            out[k] = graph
        elif batch % k == 0:
            g = graph_at(graph, batch // k)
            if g is not None:
                out[k] = g
    return out


def _workers_cap(graph: Graph) -> int:
    """More async workers than independent nodes can never all be busy:
    bound by the widest set of independent heavy ops (and 2, for the glue
    beside a lone heavy op)."""
    return max(2, graph.max_width)


def instance_operators(instances: int) -> tuple[str, ...]:
    """The operator modes tried with ``instances`` data-parallel instances,
    and so the modes each instance count's graph is calibrated in: framework
    mode with one instance only. Instances already split the work between
    core groups, and framework mode's blocks would double the calibration of
    every instance graph for settings that have not won where measured."""
    return ("library", "framework") if instances == 1 else ("library",)


def candidates(graph: Graph, model: CostModel, resources: Resources, *,
               instances: Sequence[int] = (1,), allow_smt: bool = False) -> list[Settings]:
    """Every candidate setting (see the module docstring); none oversubscribes."""
    out: list[Settings] = []
    cpus = resources.logical if allow_smt else resources.cores
    for k in instances:
        per = cpus // k
        if per < 1:
            continue
        for w in range(1, min(per, _workers_cap(graph)) + 1):
            counts = {per // w} | {t for t in model.thread_counts(per) if t <= per // w}
            for t in sorted(counts):
                smt = allow_smt and k * w * t > resources.cores
                for op in model.operators:
                    if op not in instance_operators(k) or (op == "framework" and t == 1):
                        continue  # one block: the library kernel itself
                    for lib in model.libraries:
                        for pool in (model.pools if op == "framework" else ("openmp",)):
                            out.append(Settings(
                                scheduler="sync" if w == 1 else "async", inter_op=w,
                                intra_op=t, operator=op, library=lib, pool=pool,
                                affinity="compact" if resources.cores > 1 else "none",
                                smt=smt, instances=k))
    if model.wait is not None:
        out += [v for s in list(out) for v in wait_variants(s, model.wait.policies)]
    return out


def kind_cpus(topo: Topology, kind: int, smt: bool) -> list[int]:
    """The allowed CPUs of CPU kind ``kind`` in compact order: one per core
    first, core by core, then (with ``smt``) the cores' SMT siblings."""
    mine = set(topo.allowed_cpus) & set(topo.cpu_kinds[kind].pus)
    per_core = [[p for p in c.pus if p in mine] for c in topo.cores]
    rounds = max((len(c) for c in per_core), default=0) if smt else 1
    return [c[r] for r in range(rounds) for c in per_core if r < len(c)]


def on_kind(settings: Settings, topo: Topology, kind: int) -> Settings:
    """``settings`` pinned to the CPUs of CPU kind ``kind`` alone, compactly:
    one CPU list per pool (instances x inter_op pools of intra_op threads)."""
    cpus = kind_cpus(topo, kind, settings.smt)
    pools, t = settings.instances * settings.inter_op, settings.intra_op
    if pools * t > len(cpus):
        raise ValueError(f"{settings.label()} needs {pools * t} CPUs; CPU kind {kind} has "
                         f"{len(cpus)} allowed")
    return settings.with_(affinity=[cpus[p * t:(p + 1) * t] for p in range(pools)])


class Executed:
    """:func:`executed_graph`, once per graph and the settings that decide it."""

    def __init__(self, resources: Resources | None = None) -> None:
        self._graphs = ExecutedGraphs()
        self._resources = resources

    def __call__(self, graph: Graph, settings: Settings) -> Graph:
        return self._graphs(graph, settings,
                            budget_bytes=planned_budget(settings, self._resources))


def planned_budget(settings: Settings, resources: Resources | None) -> int | None:
    """The micro-batch budget of ``settings``'s team on the planned machine
    (None: this machine's default, where the topology is not known)."""
    if resources is None or resources.topology is None or "microbatch" not in pipeline(
            settings.graph_opt):
        return None
    return team_budget_bytes(settings, resources.topology)


def predict(graph: Graph, settings: Settings, model: CostModel, resources: Resources, *,
            batch: int | None = None) -> Prediction:
    """Predict ``settings`` for ``graph`` (one instance's graph when
    ``settings.instances`` > 1; the graph as built: the prediction is of the
    graph the executor runs, :func:`~pyparbench.graph.passes.executed_graph`); ``batch`` is the
    graph's batch."""
    run = executed_graph(graph, settings, budget_bytes=planned_budget(settings, resources))
    return predict_run(run, settings, model, resources,
                       batch=batch if batch is not None else batch_of(graph))


def predict_run(run: Graph, settings: Settings, model: CostModel, resources: Resources, *,
                batch: int) -> Prediction:
    """:func:`predict` on the graph the executor runs."""
    sim = simulate(run, settings, model, resources)
    return Prediction(settings, sim.latency_ns, batch, batch * settings.instances, sim)
