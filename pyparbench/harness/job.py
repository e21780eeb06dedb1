"""The main job (``pyparbench run``): measure this machine, run a level's
suite, confirm the regrets, write the report.

:func:`run_main_job` takes a :class:`JobOptions` (the level resolved once,
the results folder, what to leave out, resume and shard) and a
:class:`~pyparbench.harness.ui.ConsoleUI`, and returns the exit status:

1. this machine's ceilings (``pyparbench peak``; once per machine, cached in
   the results folder);
2. the recommender's setting for each model and batch (calibrated on this
   machine and cached; a shard uses the analytic model, so that every shard
   builds the same list); a model the recommender fails on gets an error
   record in place of its recommended configuration, and the rest goes on;
3. the plan (:func:`pyparbench.harness.suite.plan_suite`): the presets, the
   recommended setting, the level's grids, the installed frameworks, and
   operator measurements, fitted to the level's budget less the
   recommender's time and a share kept for confirmation;
4. every configuration and operator task, each in a fresh process, each
   record appended to the results folder as it finishes (a run into the same
   folder resumes where it stopped);
5. confirmation rounds for the regrets (:mod:`pyparbench.harness.confirm`),
   a round's settings of one model measured in turns (:mod:`pyparbench.harness.turns`);
6. ``summary.json`` and ``report.html`` beside ``results.jsonl``, and the
   summary table.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyparbench.harness.confirm import PASSES, confirmations
from pyparbench.harness.folder import (OPERATORS_FILE, RESULTS_FILE, load_or_measure, read_peaks,
                                       write_graphs)
from pyparbench.harness.levels import CONFIRM_SHARE, Level
from pyparbench.harness.operators import run_op_tasks
from pyparbench.harness.runner import Config, record_failures, run_configs
from pyparbench.harness.shards import apply_shard, resolve_shard
from pyparbench.harness.store import ResultStore
from pyparbench.harness.suite import (AssumedCeilings, Ceilings, FRAMEWORK_RUNS, busy_slowdown,
                                      estimate_config_s, installed_frameworks, plan_suite)
from pyparbench.harness.turns import run_configs_in_turns
from pyparbench.harness.ui import ConsoleUI
from pyparbench.machine.cpuload import busy_cpus
from pyparbench.machine.fingerprint import fingerprint_id, machine_fingerprint
from pyparbench.machine.peak import peak_cache_path
from pyparbench.models import build
from pyparbench.recommender import recommend
from pyparbench.report import write_report
from pyparbench.report.summary import busy_note
from pyparbench.resultfiles import DEFAULT_MAX_BYTES, ResultFileError, read_json, read_result
from pyparbench.resultfiles.measurements import read_peak_file
from pyparbench.settings import Settings, allowed_cores, allowed_sockets
from pyparbench.threading.topology import topology as load_topology

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyparbench.harness.shards import Shard
    from pyparbench.harness.suite import SuitePlan
    from pyparbench.threading.topology import Topology
    from pyparbench.machine.peak import Peak
    from pyparbench.resultfiles import OpResult, Result

__all__ = ["DEFAULT_OUTPUT", "OPERATORS_FILE", "PLAN_FILE", "RECOMMENDATIONS_FILE",
           "RESULTS_FILE", "JobOptions", "dry_run", "results_paths", "run_main_job"]

DEFAULT_OUTPUT = "pyparbench-results"
# The recommender's settings of a run, kept so that a resumed run measures
# the same ones (a recalibration could otherwise pick another).
RECOMMENDATIONS_FILE = "recommendations.json"
# The plan with each item's estimated and measured seconds.
PLAN_FILE = "plan.json"

Recommended = dict[tuple[str, int], tuple["Settings", float | None]]


@dataclass(frozen=True)
class JobOptions:
    """What the main job is asked to do.

    ``output``: a results folder, or a path ending in ``.jsonl`` naming the
    results file itself (the rest goes beside it). ``shard``: ``"K/N"``, or
    None (a Slurm array task's variables, when set, still choose a shard).
    """

    level: Level
    output: str = DEFAULT_OUTPUT
    operators: bool = True
    recommend: bool = True
    frameworks: bool = True
    resume: bool = True
    retry_failed: bool = False
    shard: str | None = None


def results_paths(output: str) -> tuple[Path, Path]:
    """(results folder, results.jsonl) for ``output``: a folder, or a path
    ending in ``.jsonl`` that names the results file itself (the rest goes
    beside it). Absolute, from the user's working directory."""
    p = Path(output).expanduser().absolute()
    return (p.parent, p) if p.suffix == ".jsonl" else (p, p / RESULTS_FILE)


def _plan_line(plan: SuitePlan) -> str:
    text = (f"{len(plan.configs)} model configurations and {len(plan.tasks)} operator "
            f"measurements, about {plan.estimate_s / 60:.1f} min estimated")
    if plan.slowdown >= 1.05:  # below that it would print "x1.0"
        text += f" (x{plan.slowdown:.2f}: other processes are using the cores)"
    if plan.dropped:
        grid, frameworks = plan.dropped_counts
        # Framework runs beyond the kept one (the fastest runtime) go with the
        # grid's last settings: say so, or a missing column reads as a failure.
        what = " and ".join(f"{n} {noun}" for n, noun in ((grid, "grid settings"),
                                                          (frameworks, "framework runs")) if n)
        text += (f"; {what} left out to fit the {plan.budget_s:.0f} s budget "
                 "(--full runs them)")
    if plan.level.more_precisions:
        text += (f"; {', '.join(plan.level.more_precisions)} (this CPU's native precisions) "
                 "under the presets too")
    if plan.level.left_out:
        text += f"; {plan.level.left_out}"
    if "int8" in (plan.level.precision, *plan.level.more_precisions):
        text += ("; int8: conv / linear nodes on grids calibrated on generated data (speed "
                 "figures, not accuracy ones)")
    return text


def _read_recommendations(path: Path) -> Recommended:
    """What an earlier run into this folder recommended ({} if none or unreadable)."""
    try:
        items = read_json(path)
        return {(str(i["model"]), int(i["batch"])):
                (Settings.from_dict(i["settings"]), float(i["predicted_ns"]))
                for i in items}
    except (OSError, ValueError, TypeError, KeyError):
        return {}


def _recommend(level: Level, ui: ConsoleUI, *, calibrate: bool, path: Path, resume: bool
               ) -> tuple[Recommended, dict[tuple[str, int], str], float]:
    """The recommender's setting and predicted latency per model and batch,
    why it gave none for the others, and the seconds it took (calibration
    is cached per machine; without ``calibrate``, the analytic model, which
    gives every shard of a sharded suite the same list). A resumed run
    takes what ``path`` holds from the run it resumes. Whatever the
    recommender raises for a model is reported and kept as that model's
    reason: the rest of the main job goes on."""
    known = _read_recommendations(path) if resume else {}
    out: Recommended = {}
    failed: dict[tuple[str, int], str] = {}
    started = time.perf_counter()
    pairs = [(m, b) for m in level.models for b in level.batches]
    with ui.status("") as status:
        for i, (m, b) in enumerate(pairs, 1):
            if (m, b) in known:
                out[(m, b)] = known[(m, b)]
                continue
            status(f"recommender: calibrating and simulating {m} b{b} ({i}/{len(pairs)})")
            try:
                rec = recommend(build(m, b), calibrate=calibrate, precision=level.precision)
            except Exception as e:  # a bug of the recommender's must not end the main job
                failed[(m, b)] = f"the recommender failed: {type(e).__name__}: {e}"
                ui.warn(f"recommender: no setting for {m} b{b}: {failed[(m, b)]}")
                continue
            out[(m, b)] = (rec.settings, rec.predicted.latency_ns)
    keep = {**known, **out}
    path.write_text(json.dumps([{"model": m, "batch": b, "settings": s.as_dict(),
                                 "predicted_ns": p} for (m, b), (s, p) in keep.items()],
                               indent=1))
    return out, failed, time.perf_counter() - started


def _run_plan(plan: SuitePlan, out: Path, results: Path, peak: Peak, options: JobOptions,
              ui: ConsoleUI) -> tuple[list[Result], list[OpResult]]:
    """Run every configuration and operator task of the plan under one
    progress bar; the plan, with the seconds each item took, goes to
    ``plan.json`` (estimates against what they measure)."""
    weights = dict(zip((c.key for c in plan.configs), plan.config_s, strict=True))
    weights.update(zip((t.key for t in plan.tasks), plan.task_s, strict=True))
    measured: dict[str, float] = {}
    last = [time.perf_counter()]
    with ui.progress(plan.estimate_s, len(plan.configs) + len(plan.tasks)) as step:

        def on_result(item: Any, record: Result | OpResult | None) -> None:
            now = time.perf_counter()
            if record is not None:
                measured[item.key] = now - last[0]
            last[0] = now
            what = getattr(item, "what", None) or item.label
            step(weights[item.key], what,
                 "done before" if record is None else record.status)

        try:
            records = list(run_configs(plan.configs, ResultStore(results),
                                       resume=options.resume,
                                       retry_failed=options.retry_failed, on_result=on_result))
            op_records = list(run_op_tasks(plan.tasks, ResultStore(out / OPERATORS_FILE), peak,
                                           resume=options.resume,
                                           retry_failed=options.retry_failed,
                                           on_result=on_result))
        finally:
            (out / PLAN_FILE).write_text(json.dumps(plan.as_dict(measured), indent=1))
    return records, op_records


def _finished_outside(plan: SuitePlan, records: list[Result], results: Path) -> list[Result]:
    """The folder's finished results that this run's plan left out: a
    resumed run fitted to its budget under another load keeps fewer
    configurations than the run it resumes, and its summary still shows
    every result the folder holds (the store checked they are this
    machine's when the plan ran)."""
    have = {r.config.key for r in records} | {c.key for c in plan.configs}
    return [r for key, r in ResultStore(results).resumable(machine_fingerprint(), read_result)
            if key not in have]


def _confirm(records: list[Result], rounds: int, budget_s: float | None, peak: Peak,
             results: Path, options: JobOptions, ui: ConsoleUI) -> list[Result]:
    """Confirmation rounds (:mod:`pyparbench.harness.confirm`): up to PASSES
    passes, each fitted to what is left of ``budget_s`` (None: no limit);
    returns the new records."""
    added: list[Result] = []
    left = budget_s
    for depth in range(1, PASSES + 1):
        todo = confirmations(records + added, rounds, depth=depth)
        est = [estimate_config_s(c, build(c.model, c.batch), peak) for c in todo]
        if left is not None:
            fits, total = [], 0.0
            for c, e in zip(todo, est, strict=True):
                if total + e <= left:
                    fits.append(c)
                    total += e
            todo, est = fits, [e for c, e in zip(todo, est, strict=True) if c in fits]
        if not todo:
            break
        rows = len({(c.model, c.batch) for c in todo})
        ui.say(f"confirming: {len(todo)} more processes of the settings the regret of "
               f"{rows} model configuration(s) rests on")
        started = time.perf_counter()
        weights = {c.key: e for c, e in zip(todo, est, strict=True)}
        with ui.progress(sum(est), len(todo), eta=False) as step:

            def on_config(config: Config, record: Result | None) -> None:
                step(weights[config.key], config.what,
                     "done before" if record is None else record.status)

            # A round's settings of one model, measured in turns: the regret
            # is their ratio, and turns share the machine's slow spells out.
            added += run_configs_in_turns(todo, ResultStore(results), resume=options.resume,
                                          retry_failed=options.retry_failed,
                                          on_result=on_config)
        if left is not None:
            left -= time.perf_counter() - started
    return added


def _frameworks(options: JobOptions) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """The framework runs of the plan (those installed), and the frameworks
    not installed."""
    if not options.frameworks:
        return (), []
    have = installed_frameworks()
    runs = tuple((f, m) for f, m in FRAMEWORK_RUNS if f in have)
    return runs, sorted({f for f, _ in FRAMEWORK_RUNS} - set(have))


def _budget(level: Level, *, sharded: bool, rec_s: float, confirm: bool
            ) -> tuple[float | None, float | None]:
    """(seconds the plan is fitted to, seconds kept for confirmation rounds).

    Every shard must build the same list, so a sharded suite is not fitted
    to a budget (which depends on this job's measured ceilings). The time
    the recommender took comes out of the level's budget, and a share of
    the rest is kept for the confirmation rounds (what they leave is not used).
    """
    if sharded or level.budget_s is None:
        return None, None
    budget = max(0.5 * level.budget_s, level.budget_s - rec_s)
    reserve = CONFIRM_SHARE * budget if confirm else None
    return (budget - reserve if reserve else budget), reserve


def dry_run(options: JobOptions, *, topology: str | None = None) -> dict[str, Any]:
    """The main job's plan without measuring anything: each configuration's
    label and estimated seconds, the operator measurements, the total, what
    the budget drops and why.

    ``topology``: an hwloc synthetic description (``"package:2 core:28
    pu:2"``) or an hwloc XML file (``lstopo --of xml`` there) to plan
    another machine; its estimates rest on the analytic
    cost model's per-core figures, as do this machine's until its ceilings
    are measured (a results folder that holds them is read). The recommended
    setting is the analytic model's (the main job calibrates on the machine
    itself, and its calibration time comes out of the budget).

    Raises
    ------
    ValueError
        A bad topology description or shard.
    """
    level = options.level
    topo = load_topology(topology)
    where = (repr(topology) if topo.kind == "synthetic" else
             topo.source if topo.kind == "file" else "this machine")
    shard = resolve_shard(options.shard)
    cores = allowed_cores(topo)
    assumed = AssumedCeilings.analytic(cores // allowed_sockets(topo))
    ceilings: Ceilings = assumed
    described = assumed.describe()
    notes: list[str] = []
    if topology is None:
        cached = peak_cache_path(results_paths(options.output)[0])
        if cached.is_file():
            try:
                ceilings = read_peak_file(cached, DEFAULT_MAX_BYTES)
                described = f"measured, cached in {cached}"
            except ResultFileError as e:
                notes.append(f"{e}: the assumed ceilings instead")
    recommended: Recommended = {}
    if options.recommend:
        for m in level.models:
            for b in level.batches:
                try:
                    rec = recommend(build(m, b), topo, calibrate=False,
                                    precision=level.precision)
                except Exception as e:  # as the main job: a failing recommender ends nothing
                    notes.append(f"the recommender failed for {m} b{b}: "
                                 f"{type(e).__name__}: {e}")
                    continue
                recommended[(m, b)] = (rec.settings, rec.predicted.latency_ns)
    frameworks, lacking = _frameworks(options)
    if lacking:
        notes.append(f"frameworks not installed, not compared: {', '.join(lacking)}")
    # The precisions are this CPU's, even for another machine's topology.
    if level.more_precisions:
        notes.append(f"{', '.join(level.more_precisions)} (this CPU's native precisions) "
                     "under the presets too")
    if level.left_out:
        notes.append(level.left_out)
    plan, reserve = _plan(options, shard, topo=topo, peak=ceilings, recommended=recommended,
                          frameworks=frameworks, rec_s=0.0)
    if shard is not None:
        plan.keep(shard.select(plan.configs))
    return {**plan.as_dict(), "machine": where, "cores": cores,
            "logical_cpus": len(topo.allowed_cpus), "ceilings": described,
            "shard": str(shard) if shard is not None else None,
            "confirm_reserve_s": reserve, "notes": notes}


def _hosts_peaks(out: Path, peak: Peak, ui: ConsoleUI) -> dict[str, Peak]:
    """The ceilings of every host that measured into the folder (a shard
    resumed on another node holds two), for the report's list of hosts:
    this job's own as it has them, the others' from their files."""
    own = fingerprint_id(peak.fingerprint)
    try:
        others = read_peaks(out, skip={own})
    except ResultFileError as e:
        ui.warn(f"{e}: the report lists its host without ceilings")
        others = {}
    return {**others, own: peak}


def _plan(options: JobOptions, shard: Shard | None, *, peak: Ceilings,
          recommended: Recommended, frameworks: Sequence[tuple[str, str]], rec_s: float,
          topo: Topology | None = None, slowdown: float = 1.0
          ) -> tuple[SuitePlan, float | None]:
    """The main job's plan (the dry run's too) and the seconds kept for
    confirmation: the level fitted to its budget, operator tasks on the
    first shard only; a shard's filter is the caller's."""
    level = options.level
    budget, reserve = _budget(level, sharded=shard is not None, rec_s=rec_s,
                              confirm=bool(level.confirm_rounds and recommended))
    plan = plan_suite(replace(level, budget_s=budget), topo=topo, peak=peak,
                      operators=options.operators and (shard is None or shard.index == 0),
                      slowdown=slowdown, recommended=recommended, frameworks=frameworks)
    return plan, reserve


def run_main_job(options: JobOptions, ui: ConsoleUI | None = None) -> int:
    """Run the main job (see the module docstring); the exit status: 0, or
    1 when a configuration or operator measurement failed.

    Raises
    ------
    ValueError
        A bad shard (``options.shard`` or the Slurm array's variables), or a
        results folder of another machine or schema to resume.
    OSError
        The results folder cannot be made or written.
    """
    ui = ui if ui is not None else ConsoleUI()
    started = time.perf_counter()
    level = options.level
    # Before this job adds its own load: were other processes using the cores?
    # What they use now (a second's sample), not the 1-minute load average,
    # which after a build still counts the build.
    cpus = len(os.sched_getaffinity(0))
    load = busy_cpus(1.0)
    conditions = {"busy_cpus_start": load, "loadavg_start": os.getloadavg()[0], "cpus": cpus,
                  "busy": busy_note(load, cpus)}
    shard = resolve_shard(options.shard)  # a bad one is refused before anything runs
    # Absolute before any child starts: children run in another directory.
    out, results = results_paths(options.output)
    out.mkdir(parents=True, exist_ok=True)
    ui.say(f"pyparbench run ({level.name}) into {out}")
    with ui.status("measuring this machine's ceilings (pyparbench peak)"):
        peak, cached = load_or_measure(out, quick=level.name == "quick")
    top = peak.points[-1]
    ui.say(f"ceilings {'(cached)' if cached else f'({peak.seconds:.1f} s)'}: "
           f"{top.fma_gflops:.0f} GFLOP/s FMA {peak.isa} at {top.threads} threads, "
           f"{top.triad_gbs:.1f} GB/s triad, {top.gather_gbs:.1f} GB/s gather")
    if peak.fma_warning:
        ui.warn(f"ceilings: {peak.fma_warning}")
    recommended: Recommended = {}
    rec_failed: dict[tuple[str, int], str] = {}
    rec_s = 0.0
    if options.recommend:
        recommended, rec_failed, rec_s = _recommend(
            level, ui, calibrate=shard is None, path=out / RECOMMENDATIONS_FILE,
            resume=options.resume)
    if recommended:
        ui.say(f"recommender: a setting for {len(recommended)} model configurations "
               f"({rec_s:.0f} s)")
    frameworks, lacking = _frameworks(options)
    if lacking:
        ui.say(f"frameworks not installed, not compared: {', '.join(lacking)} "
               "(pip install 'pyparbench[frameworks]')")
    plan, reserve = _plan(options, shard, peak=peak, recommended=recommended,
                          frameworks=frameworks, rec_s=rec_s,
                          slowdown=busy_slowdown(load, cpus, peak.points[-1].threads))
    if shard is not None:
        plan.keep(apply_shard(plan.configs, options.shard, results, log=ui.say))
    write_graphs(out, plan.graphs)
    ui.say(_plan_line(plan))
    records: list[Result] = []
    if shard is None or shard.index == 0:
        # Where the recommender failed, its configurations are error records.
        records += record_failures(
            [(Config(m, b, Settings(name="recommended"), repeats=level.repeats), why)
             for (m, b), why in rec_failed.items()],
            ResultStore(results), resume=options.resume)
    done, op_records = _run_plan(plan, out, results, peak, options, ui)
    records += done
    if level.confirm_rounds and shard is None and recommended:
        records += _confirm(records, level.confirm_rounds, reserve, peak, results, options, ui)
    if options.resume and shard is None:
        records += _finished_outside(plan, records, results)
    summary, page = write_report(out, records, op_records, peak, conditions,
                                 peaks=_hosts_peaks(out, peak, ui), graphs=plan.graphs)
    ui.summary(summary)
    done_records: list[Result | OpResult] = [*records, *op_records]
    failed = sum(1 for r in done_records if r.status in ("error", "timeout"))
    ui.say(f"{len(records)} results in {results}, summary in {out / 'summary.json'}; "
           f"{time.perf_counter() - started:.0f} s", wrap=False)
    ui.say(f"report: {page}", style="bold", wrap=False)
    return 1 if failed else 0
