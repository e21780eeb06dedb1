"""The recommendation's reasons: one line each on the cost model, the graph,
its parallel branches, where its ops stop scaling, the choice, what the
runners-up and the presets lose, and the OpenMP wait policy."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from pyparbench.graph import Graph
from pyparbench.recommender.costmodel import ALIAS_OPS, CostModel, wait_key
from pyparbench.recommender.search import Executed
from pyparbench.recommender.selection import TIE, WAIT_MARGIN, best_of
from pyparbench.recommender.simulate import Resources, Simulation, omp_team
from pyparbench.recommender.types import Prediction, format_ns, format_value
from pyparbench.recommender.waitpolicy import spin_only
from pyparbench.settings import Settings
from pyparbench.cpulist import cpu_str
from pyparbench.threading.topology import Topology, fastest_kind, kind_name, kind_speed

__all__ = ["explain", "topology_reasons"]


def _op_times(graph: Graph, model: CostModel, threads: int, s: Settings) -> list[float]:
    return [0.0 if n.op in ALIAS_OPS else
            model.op_ns(graph, n, threads, s.operator, s.library, s.pool) for n in graph]


def _branch_reason(graph: Graph, times: list[float], threads: int) -> list[str]:
    """Where the graph forks into branches that can run at once, and what
    running them at once can save (op times at ``threads`` threads)."""
    n = len(graph)
    desc = [0] * n
    for node in reversed(graph.nodes):
        bits = 1 << node.id
        for c in graph.consumers[node.id]:
            bits |= desc[c]
        desc[node.id] = bits

    def cost(bits: int) -> float:
        total = 0.0
        while bits:
            low = bits & -bits
            total += times[low.bit_length() - 1]
            bits ^= low
        return total

    forks: list[tuple[float, str, list[float]]] = []
    sources = [i for i in graph.inputs]
    points: list[tuple[str, list[int]]] = [("the graph's inputs", sources)] if len(
        sources) > 1 else []
    points += [(node.name, sorted(set(graph.consumers[node.id]))) for node in graph
               if len(set(graph.consumers[node.id])) > 1]
    for name, cons in points:
        seen = 0
        shared = 0
        for c in cons:
            shared |= seen & desc[c]
            seen |= desc[c]
        costs = sorted((cost(desc[c] & ~shared) for c in cons), reverse=True)
        costs = [c for c in costs if c > 0]
        if len(costs) > 1:
            forks.append((sum(costs) - costs[0], name, costs))
    # Span: the longest path by op time; work: all op time.
    upto = [0.0] * n
    for node in graph.nodes:
        upto[node.id] = times[node.id] + max((upto[j] for j in node.inputs), default=0.0)
    span, work = max(upto, default=0.0), sum(times)
    out = []
    if not forks:
        out.append(f"no parallel branches: every op depends on the one before it (a chain "
                   f"of {format_ns(work)} at {threads} thread{'s' * (threads > 1)} per op), so one "
                   f"worker suffices")
        return out
    forks.sort(reverse=True)
    best = forks[0]
    shown = ", ".join(format_ns(c) for c in best[2][:6]) + (", ..." if len(best[2]) > 6 else "")
    out.append(f"parallel branches: {len(forks)} fork{'s' * (len(forks) > 1)}, up to "
               f"{max(len(f[2]) for f in forks)} branches wide; the largest at {best[1]} "
               f"({len(best[2])} branches of {shown} at {threads} thread"
               f"{'s' * (threads > 1)}): running them at once saves at most "
               f"{format_ns(best[0])}")
    out.append(f"with unlimited workers the critical path is {format_ns(span)} of "
               f"{format_ns(work)} of op time (at most {work / span if span else 1:.2f}x from "
               f"inter-op parallelism, before dispatch costs and ops slowing each other)")
    return out


def _scaling_reason(graph: Graph, model: CostModel, counts: Sequence[int],
                    s: Settings) -> list[str]:
    """Where ops stop scaling: per op, the last thread count reached with a
    gain of at least 15 % per step; grouped by that count, weighted by time."""
    if len(counts) < 2:
        return ["one core: no intra-op parallelism to choose"]
    ops = [n for n in graph if n.op not in ALIAS_OPS]
    times = {n.id: [model.op_ns(graph, n, t, "library", s.library, s.pool) for t in counts]
             for n in ops}
    total1 = sum(v[0] for v in times.values()) or 1.0
    stop: dict[int, list[int]] = {}
    for i, v in times.items():
        last = 0
        for j in range(1, len(counts)):
            if v[j] <= v[last] / 1.15:
                last = j
            else:
                break
        stop.setdefault(counts[last], []).append(i)
    parts = []
    for t in sorted(stop):
        ids = stop[t]
        share = sum(times[i][0] for i in ids) / total1
        parts.append(f"{t} thread{'s' * (t > 1)}: {len(ids)} ops ({share:.0%} of the "
                     f"1-thread time)")
    heavy = sorted(ops, key=lambda n: -times[n.id][0])[:3]
    eg = "; ".join(f"{n.name} {times[n.id][0] / max(min(times[n.id]), 1e-9):.2f}x at best "
                   f"({counts[times[n.id].index(min(times[n.id]))]} threads)" for n in heavy)
    whole = total1 / sum(min(v) for v in times.values())
    return ["where ops stop scaling (library mode; the last thread count reached with a "
            "gain of 15% or more per step): " + "; ".join(parts),
            f"heaviest ops: {eg}; all ops at their best count: {whole:.2f}x over 1 thread"]


def _choice_reasons(best: Prediction, preds: Sequence[Prediction], objective: str) -> list[str]:
    s = best.settings
    out = []
    most = max(p.settings.threads for p in preds)
    rivals: list[tuple[str, Callable[[Settings], bool]]] = [
        ("one worker (sync)", lambda x: x.inter_op == 1),
        ("more workers (async)", lambda x: x.inter_op > 1),
        ("library operator mode", lambda x: x.operator == "library"),
        ("framework operator mode", lambda x: x.operator == "framework"),
        ("one instance", lambda x: x.instances == 1),
        ("several instances", lambda x: x.instances > 1),
        ("all cores", lambda x: x.threads == most),
    ]
    for what, keep in rivals:
        if keep(s):
            continue
        rival = best_of(preds, objective, keep)
        if rival is None:
            continue
        out.append(f"best with {what}: {rival.settings.label()} predicted "
                   f"{format_value(rival, objective)}, {best.better(rival, objective):.2f}x "
                   f"worse")
    return out


def explain(graph: Graph, per_instance: dict[int, Graph], best: Prediction,
            preds: Sequence[Prediction], presets: dict[str, Prediction], *, model: CostModel,
            why_model: str, resources: Resources, objective: str, executed: Executed,
            verified: str = "") -> list[str]:
    """The reason lines of a recommendation of ``best`` among ``preds``
    (``verified``: the line of the verification step, if it ran)."""
    chosen = best.settings
    reasons = [f"cost model: {why_model}"]
    tuner = presets["tftuner"].settings.inter_op
    reasons.append(f"graph: {len(graph)} nodes, {graph.heavy_ops} heavy ops, heavy depth "
                   f"{graph.depth}, average width {graph.avg_width:.2f} (the study's tuner "
                   f"uses {tuner} worker{'s' * (tuner > 1)}), widest set of independent "
                   f"heavy ops {graph.max_width}")
    mine = per_instance[chosen.instances]
    g1 = executed(mine, chosen)
    if len(g1) != len(mine):
        reasons.append(f"as run: the graph passes ({chosen.graph_opt}) leave {len(g1)} of "
                       f"{len(mine)} nodes, and op times are those of the optimised nodes")
    reasons += _branch_reason(g1, _op_times(g1, model, chosen.intra_op, chosen),
                              chosen.intra_op)
    reasons += _scaling_reason(g1, model,
                               model.thread_counts(resources.cores // chosen.instances), chosen)
    sim = best.simulation
    busy = (f"; {sim.concurrency():.2f} of its {chosen.inter_op} workers busy on average"
            if chosen.inter_op > 1 else "")
    reasons.append(f"chosen: {chosen.label()}: predicted {format_value(best, objective)}{busy}")
    if verified:
        reasons.append(verified)
    for k in sorted(per_instance):
        factor = model.instance_factor(executed(per_instance[k], chosen.with_(instances=k)), k)
        if k > 1 and factor is not None:
            reasons.append(f"{k} instances side by side: each measured {factor:.2f}x slower "
                           f"than one alone (shared caches and memory bandwidth)")
    reasons += _choice_reasons(best, preds, objective)
    over = [f"{name} ({p.settings.threads} threads on {resources.cores} cores)"
            for name, p in presets.items() if p.settings.threads > resources.cores]
    if over:
        reasons.append("oversubscribed presets: " + ", ".join(over) + ": teams whose threads "
                       "outnumber the cores wait at every barrier for a descheduled thread")
    for name, p in presets.items():
        ratio = best.better(p, objective)
        if ratio > 1 + TIE:
            reasons.append(f"vs {name} ({p.settings.label()}): {ratio:.2f}x better predicted")
    reasons += _wait_reasons(best, preds, presets, model, objective)
    return reasons


def _gaps_before_regions(sim: Simulation) -> list[float]:
    """The serial stretch before each computing node: since its worker's
    previous node ended."""
    last: dict[int, float] = {}
    out = []
    for i in sorted(range(len(sim.start_ns)), key=lambda i: sim.start_ns[i]):
        w = sim.worker[i]
        if sim.op_ns[i] > 0:
            out.append(max(0.0, sim.start_ns[i] - last.get(w, 0.0)))
        last[w] = sim.end_ns[i]
    return out


def _wait_reasons(best: Prediction, preds: Sequence[Prediction],
                  presets: dict[str, Prediction], model: CostModel,
                  objective: str) -> list[str]:
    """What the OpenMP wait policy costs here, and why the chosen one."""
    wait = model.wait
    if wait is None:
        if any(p.settings.omp_wait is not None for p in presets.values()):
            return ["the OpenMP wait policy (omp_wait, the intel preset's spin count) is not "
                    "modelled without a calibration on this machine: the presets' "
                    "predictions are those of libgomp's default policy"]
        return []
    out = []
    teams = [t for t in wait.teams if t > 1]
    if teams:
        t = max(teams)
        order = [None, *wait.policies]

        def row(team: int, gap: float) -> str:
            return ", ".join(f"{wait_key(p)} {format_ns(wait.region_ns(p, team, gap))}"
                             for p in order)

        busy = (f"; other processes used {wait.load:.0%} of the CPUs meanwhile"
                if wait.load > 0.10 else "")
        out.append(f"OpenMP wait policy, measured each in its own process{busy}: a parallel "
                   f"region of a {t}-thread team costs, back to back: {row(t, 0.0)}; after "
                   f"{format_ns(wait.gaps[-1])} alone (its threads asleep unless they still "
                   f"spin): {row(t, wait.gaps[-1])}; a team of one (no thread waits: the "
                   f"noise): {row(1, 0.0)}")
    chosen = best.settings
    if not omp_team(chosen):
        out.append("the wait policy changes nothing for the chosen setting: each of its ops "
                   "runs on one thread, and no thread of a team waits")
        return out
    gaps = _gaps_before_regions(best.simulation)
    mine = [p for p in preds if spin_only(p.settings, chosen.with_(name=""))]
    if mine:
        shown = ", ".join(f"{wait_key(p.settings.omp_wait)} {format_value(p, objective)}"
                          for p in mine)
        gap = statistics.median(gaps) if gaps else 0.0
        out.append(f"wait policy of the chosen setting: {wait_key(chosen.omp_wait)} "
                   f"(predicted {format_value(best, objective)}; other policies: {shown}; "
                   f"{len(gaps)} regions a run, a median {format_ns(gap)} apart; another "
                   f"policy is chosen only when predicted {WAIT_MARGIN:.0%} better, or "
                   f"measured faster)")
    return out


def topology_reasons(topo: Topology, resources: Resources, intel: Settings,
                     slower: Sequence[Resources] = (), preds: Sequence[Prediction] = (),
                     chosen: Prediction | None = None, objective: str = "latency"
                     ) -> list[str]:
    """Lines on what the machine's shape means for the setting: CPU kinds
    (and the best candidate on each slower kind of known speed, ``slower``,
    among ``preds``), NUMA domains per socket (and what Intel's preset
    means under them), memory-only NUMA nodes, disallowed CPUs."""
    lines: list[str] = []
    if fastest_kind(topo) is not None:
        lines.append(_kinds_line(topo, slower, preds, chosen, objective))
    per = resources.numa_per_socket
    if per > 1:
        lines.append(
            f"{per} NUMA domains per socket (sub-NUMA clustering / NPS{per}): instances are "
            f"placed inside one domain where they fit, and memory bandwidth is counted per "
            f"domain; Intel's preset ({intel.inter_op} worker(s) x {intel.intra_op} threads, "
            f"one per socket's cores) gives each team its whole socket, spanning {per} "
            f"domains, so part of every team reads another domain's memory")
    memory_only = [n for n in topo.numa_nodes if n.memory_only]
    if memory_only:
        lines.append("memory-only NUMA node(s) "
                     + ", ".join(f"{n.os_index}{f' ({n.subtype})' if n.subtype else ''}"
                                 for n in memory_only)
                     + ": no threads are placed there")
    if topo.disallowed_cpus:
        lines.append(f"CPUs {cpu_str(topo.disallowed_cpus)} are not allowed "
                     f"({'in the file' if topo.kind == 'file' else 'to this process'}): "
                     f"never used")
    return lines


def _kinds_line(topo: Topology, slower: Sequence[Resources], preds: Sequence[Prediction],
                chosen: Prediction | None, objective: str) -> str:
    fast = fastest_kind(topo)
    assert fast is not None

    def cores(kind: int) -> str:
        k = topo.cpu_kinds[kind]
        freq = k.infos.get("FrequencyMaxMHz")
        return (f"the {kind_name(topo, kind)} cores (CPUs {cpu_str(k.pus)}"
                f"{f', up to {freq} MHz' if freq else ''})")

    parts = [f"hybrid CPU: one CPU kind per team (a team spanning kinds runs at its slowest "
             f"core's pace), {cores(fast)} first"]
    for r in slower:
        assert r.kind is not None
        pus = set(topo.cpu_kinds[r.kind].pus)

        def on_these(s: Settings, pus: set[int] = pus) -> bool:
            return not isinstance(s.affinity, str) and {
                c for cpus in s.affinity for c in cpus} <= pus
        speed = kind_speed(topo, r.kind)
        assert speed is not None
        line = (f"{cores(r.kind)} are candidates of their own, predicted at {speed[0]:.2f} of a "
                f"{kind_name(topo, fast)} core's speed ({speed[1]})")
        top = best_of(preds, objective, on_these)
        if chosen is not None and on_these(chosen.settings):
            line += ": the chosen setting runs on them"
        elif top is not None and chosen is not None:
            line += (f": their best, {top.settings.label()}, is predicted at "
                     f"{format_value(top, objective)} against "
                     f"{format_value(chosen, objective)} for the chosen")
        parts.append(line)
    known = {r.kind for r in slower}
    for k in topo.cpu_kinds:
        if k.index != fast and k.index not in known:
            parts.append(f"{cores(k.index)} are left to other work: the topology gives no "
                         f"speed for them (no LinuxCapacity or FrequencyMaxMHz), so they are "
                         f"not predicted as candidates")
    return "; ".join(parts)
