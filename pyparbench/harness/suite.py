"""The plan of ``pyparbench run``: the configurations and operator tasks a
level (:mod:`pyparbench.harness.levels`) measures, and how long that is
expected to take.

Beside the presets, each model gets the recommender's setting (named
``recommended``, with its prediction; :mod:`pyparbench.recommender`) and,
when TensorFlow, PyTorch or ONNX Runtime are installed, the same graph at
the level's first batch in each of them (:data:`FRAMEWORK_RUNS`) under the
one setting every framework maps fully: one worker of all the cores,
pinned compactly (:func:`framework_settings`).

A level with a time budget is planned to fit it: :func:`plan_suite`
estimates each measurement (:func:`estimate_config_s`,
:func:`estimate_task_s`: process start, weights, warm-up and repeats at the
latency the machine's ceilings predict, times :func:`busy_slowdown` when
other processes are using the cores) and, if the total is over, drops the
least important first: the last grid settings of every model, never a
preset, nor the fastest framework's run of each model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any, Union

from pyparbench.frameworks.mapping import precision_mode
from pyparbench.frameworks.precision import unsupported
from pyparbench.harness.levels import Level
from pyparbench.frameworks.generation import bytes_per_token
from pyparbench.harness.operators import (OpTask, generation_frameworks, generation_models,
                                          generation_task, shape_graph, standard_shapes)
from pyparbench.harness.runner import MIN_MEASURE_S, Config
from pyparbench.machine.peak import thread_counts
from pyparbench.models import build
from pyparbench.models.llama import LLAMA_SIZES
from pyparbench.choices import PRESETS
from pyparbench.recommender.costmodel import MachineSpec
from pyparbench.settings import Settings, allowed_cores, preset
from pyparbench.threading.topology import topology

if TYPE_CHECKING:
    from pyparbench.graph import Graph
    from pyparbench.machine.peak import Peak
    from pyparbench.threading.topology import Topology

__all__ = ["FRAMEWORK_PRESETS", "FRAMEWORK_RUNS", "KEPT", "KEPT_FRAMEWORK_RUNS", "AssumedCeilings", "Ceilings",
           "SuitePlan", "busy_slowdown",
           "default_suite", "estimate_config_s", "estimate_task_s", "framework_settings",
           "installed_frameworks", "plan_suite"]

# Settings names a budget never drops: the presets and the recommender's.
KEPT = (*PRESETS, "recommended")
# The framework runs of each model (framework, mode), when installed: what
# each framework's users run (TensorFlow's tf.function, PyTorch eager and
# frozen TorchScript, ONNX Runtime with every graph optimisation, OpenVINO at
# float32).
FRAMEWORK_RUNS = (("tensorflow", "function"), ("torch", "eager"), ("torch", "script"),
                  ("onnxruntime", "all"), ("openvino", "f32"))
# A framework's own presets, run beside it where it runs (its tuner left to
# pick the setting, on every CPU): OpenVINO's LATENCY and THROUGHPUT hints.
FRAMEWORK_PRESETS = {"openvino": ("openvino-latency", "openvino-throughput")}
# The framework run a budget keeps for each model (the first of these the
# plan has): the fastest runtime, so that the report always compares the
# native executor with its strongest rival; the other runs rank with the
# fourth grid setting.
KEPT_FRAMEWORK_RUNS = (("onnxruntime", "all"), ("torch", "script"), ("torch", "eager"),
                       ("tensorflow", "function"), ("openvino", "f32"))
# The Python packages each framework run needs.
_FRAMEWORK_PACKAGES = {"tensorflow": ("tensorflow",), "torch": ("torch",),
                       "onnxruntime": ("onnxruntime", "onnx"), "openvino": ("openvino", "onnx")}

def installed_frameworks() -> tuple[str, ...]:
    """The frameworks whose packages are installed (found, not imported:
    each framework is only ever imported in its own child process)."""
    return tuple(f for f, pkgs in _FRAMEWORK_PACKAGES.items()
                 if all(find_spec(p) is not None for p in pkgs))


def framework_settings(cores: int) -> Settings:
    """The setting framework runs share with a native run: one worker of
    ``cores`` threads pinned compactly, which every framework maps without
    a knob left over (see ``pyparbench overhead --help``)."""
    return Settings(intra_op=cores, affinity="compact")


# ---------------------------------------------------------------- estimates

# Fixed cost of a fresh process (interpreter, imports, fingerprint, plan).
_START_S = 0.35
# Random weights are drawn at about this rate (bytes per second).
_WEIGHTS_BPS = 0.4e9
# A framework child's start (interpreter, the framework's import, the model
# built from the graph) and its latency over the native executor's.
_FRAMEWORK_START_S = {"tensorflow": 6.0, "torch": 3.0, "onnxruntime": 2.5, "openvino": 2.5}
_FRAMEWORK_SLOWDOWN = 1.5
# Executor cost per node and run, and the share of the ceilings a model reaches.
_NODE_S = 15e-6
_EFFICIENCY = {"onednn": 0.5, "eigen": 0.25, "blas": 0.35}
# Without measured ceilings: per core.
_FALLBACK_GFLOPS, _FALLBACK_GBS = 40.0, 10.0


@dataclass(frozen=True)
class AssumedCeilings:
    """Ceilings of a machine that was not measured (a synthetic topology, or
    a dry run before this machine's are): the analytic cost model's
    per-core figures (:class:`pyparbench.recommender.MachineSpec`), memory
    bandwidth shared within a socket."""

    gflops_per_core: float
    gbs_per_core: float
    gbs_per_socket: float
    cores_per_socket: int

    @classmethod
    def analytic(cls, cores_per_socket: int) -> AssumedCeilings:
        spec = MachineSpec()
        return cls(spec.peak_gflops, spec.core_gbps, spec.socket_gbps, max(1, cores_per_socket))

    def at(self, threads: int) -> tuple[float, float]:
        """(FMA GFLOP/s, triad GB/s) at ``threads`` threads, one per core."""
        sockets = -(-threads // self.cores_per_socket)
        return (self.gflops_per_core * threads,
                min(self.gbs_per_core * threads, self.gbs_per_socket * sockets))

    def describe(self) -> str:
        return (f"assumed, not measured: {self.gflops_per_core:g} GFLOP/s FMA and "
                f"{self.gbs_per_core:g} GB/s per core, {self.gbs_per_socket:g} GB/s per socket "
                f"of {self.cores_per_socket} cores (the analytic cost model's figures)")


Ceilings = Union["Peak", AssumedCeilings, None]


def _ceilings(peak: Ceilings, threads: int) -> tuple[float, float]:
    if peak is None:
        return _FALLBACK_GFLOPS * threads, _FALLBACK_GBS * max(1, min(threads, 4))
    if isinstance(peak, AssumedCeilings):
        return peak.at(threads)
    p = peak.point(threads)
    return p.fma_gflops, p.triad_gbs


def _latency_s(graph: Graph, settings: Settings, peak: Ceilings) -> float:
    """A rough latency of one pass: compute at a share of the FMA ceiling,
    traffic at the triad bandwidth, plus the executor's per-node cost."""
    gflops, gbs = _ceilings(peak, max(1, settings.threads))
    eff = _EFFICIENCY[settings.library] * (0.7 if settings.operator == "framework" else 1.0)
    return (graph.flops / (gflops * 1e9 * eff) + graph.bytes_moved / (gbs * 1e9)
            + len(graph.nodes) * _NODE_S)


def estimate_config_s(config: Config, graph: Graph, peak: Ceilings = None) -> float:
    """Seconds one model configuration is expected to take, process start included."""
    weights = 4.0 * graph.num_params / _WEIGHTS_BPS
    runs = config.warmup + config.repeats
    latency = _latency_s(graph, config.settings, peak)
    if config.framework is not None:
        # Weights are handed over and converted once more in the child.
        return (_FRAMEWORK_START_S.get(config.framework, 3.0) + 2 * weights
                + runs * _FRAMEWORK_SLOWDOWN * latency)
    # An int8 run's child calibrates first: the float plan's weights made
    # and run once, then the weights quantised (measured: 0.1 s for
    # mlp-512, 1.6 s for ResNet-50, 2.4 s for DLRM-Kaggle's tables).
    calibration = 2 * weights + latency if config.settings.precision == "int8" else 0.0
    # The child times runs for at least MIN_MEASURE_S.
    return (_START_S + weights + calibration + config.warmup * latency
            + max(config.repeats * latency, MIN_MEASURE_S))


# A generation's child per runtime: interpreter, imports, the decoder built
# (native: compiled; llama.cpp: its GGUF file written first; PyTorch: torch's
# and transformers' imports, about 4 s of it). Measured on llama-tiny, 2 cores:
# 0.35, 0.4 and 4.4 to 6 s.
_GENERATION_START_S = {"native": 0.45, "llamacpp": 0.45, "torch": 5.5}
# A runtime's token step against the native one's (PyTorch's: its Python
# forward, 0.5 against 0.12 ms on llama-tiny).
_GENERATION_SLOWDOWN = {"native": 1.0, "llamacpp": 1.5, "torch": 4.0}
# The quick level measures llama-tiny's generation when expected under this.
_QUICK_GENERATION_S = 5.0


def _generation_s(task: OpTask, graph: Graph, peak: Ceilings) -> float:
    """A generation task: per runtime, thread count and repeat, a child's
    start and two generations (one untimed), each the prompt's pass (the
    prefill graph's latency) and ``new`` token steps, each reading
    bytes_per_token at the triad bandwidth plus the executor's per-node cost
    (a framework's: times its slowdown)."""
    cfg = LLAMA_SIZES[task.model].config
    step_bytes = bytes_per_token(cfg, task.batch, task.prompt, task.new)
    native = 0.0
    for t in task.threads:
        _, gbs = _ceilings(peak, t)
        prefill = _latency_s(graph, Settings(intra_op=t), peak)
        step = step_bytes / (gbs * 1e9) + len(graph.nodes) * _NODE_S
        native += 2 * (prefill + task.new * step)
    return task.repeats * sum(len(task.threads) * _GENERATION_START_S.get(f, 3.0)
                              + _GENERATION_SLOWDOWN.get(f, 2.0) * native
                              for f in task.frameworks or generation_frameworks(task.batch))


def estimate_task_s(task: OpTask, graph: Graph, peak: Ceilings = None) -> float:
    """Seconds one operator task is expected to take (``graph``: the model's
    for a nodes task, its prefill for a generation task, the shape's
    one-node graph for a scaling task)."""
    if task.kind == "generation":
        return _generation_s(task, graph, peak)
    if task.kind == "nodes":
        s = Settings(intra_op=task.threads[0])
        weights = 4.0 * graph.num_params / _WEIGHTS_BPS
        return _START_S + weights + (2 + task.repeats) * _latency_s(graph, s, peak)
    # Each thread count: about 0.15 s of timed runs plus set-up (tables filled).
    setup = graph.bytes_moved / 2e9 if task.shape and task.shape.kind == "embedding" else 0.05
    table = 4.0 * graph.num_params / 2e9
    return _START_S + table + len(task.threads) * (0.2 + setup)


# ---------------------------------------------------------------- plans


@dataclass
class SuitePlan:
    """What a run of a level will measure, in order, with its estimates."""

    level: Level
    configs: list[Config]
    tasks: list[OpTask]
    config_s: list[float]
    task_s: list[float]
    budget_s: float | None
    dropped: list[Config] = field(default_factory=list)
    dropped_s: list[float] = field(default_factory=list)
    slowdown: float = 1.0
    # Each (model, batch)'s graph figures (Graph.report_stats), for the report.
    graphs: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)

    @property
    def dropped_counts(self) -> tuple[int, int]:
        """How many grid settings and how many framework runs the budget left out."""
        frameworks = sum(1 for c in self.dropped if c.framework)
        return len(self.dropped) - frameworks, frameworks

    def keep(self, chosen: Sequence[Config]) -> None:
        """Keep only the configurations ``chosen`` (a shard's), in their order."""
        keys = {c.key for c in chosen}
        self.config_s = [e for c, e in zip(self.configs, self.config_s, strict=True)
                         if c.key in keys]
        self.configs = [c for c in self.configs if c.key in keys]

    @property
    def estimate_s(self) -> float:
        """Expected seconds for everything planned."""
        return sum(self.config_s) + sum(self.task_s)

    def as_dict(self, measured_s: dict[str, float] | None = None) -> dict[str, Any]:
        """The plan as JSON: each configuration and operator task with its
        label and estimated seconds (and the seconds it took, from
        ``measured_s`` by key), what the budget dropped and why, the total."""

        def item(key: str, label: str, est: float) -> dict[str, Any]:
            d: dict[str, Any] = {"label": label, "estimated_s": round(est, 3)}
            if measured_s is not None and key in measured_s:
                d["measured_s"] = round(measured_s[key], 3)
            return d

        def why(c: Config) -> str:
            if self.budget_s is None:
                return ""
            what = "a framework run" if c.framework else "a grid setting"
            return f"{what} left out to fit the {self.budget_s:.0f} s budget (--full runs it)"
        return {
            "level": self.level.name, "budget_s": self.budget_s, "slowdown": self.slowdown,
            "estimated_s": round(self.estimate_s, 3),
            "configurations": [item(c.key, c.what, e)
                               for c, e in zip(self.configs, self.config_s, strict=True)],
            "operators": [item(t.key, t.label, e)
                          for t, e in zip(self.tasks, self.task_s, strict=True)],
            "dropped": [{"label": c.what, "estimated_s": round(e, 3), "why": why(c)}
                        for c, e in zip(self.dropped, self.dropped_s, strict=True)],
            "graphs": graphs_list(self.graphs),
        }


def graphs_list(graphs: Mapping[tuple[str, int], Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A plan's graph figures as JSON: one object per model and batch."""
    return [{"model": m, "batch": b, **stats} for (m, b), stats in graphs.items()]


def busy_slowdown(loadavg: float, cpus: int, threads: int) -> float:
    """How much slower than on an idle machine a run of ``threads`` threads
    is expected to go while other processes keep ``loadavg`` CPUs busy out
    of ``cpus``: the CPUs wanted over the CPUs there are, at least 1."""
    return max(1.0, (loadavg + threads) / max(1, cpus))


Recommended = Mapping[tuple[str, int], tuple[Settings, float | None]]


def default_suite(level: Level, *, cores: int | None = None, topo: Topology | None = None,
                  recommended: Recommended | None = None,
                  frameworks: Sequence[tuple[str, str]] = ()) -> list[Config]:
    """Every (model, batch) of ``level`` under the presets, the recommender's
    setting (from ``recommended``: (model, batch) -> (settings, predicted
    ns)), the level's grids, then, at the level's first batch, each of
    ``frameworks`` ((framework, mode) pairs) under
    :func:`framework_settings`, and under each of the framework's own
    presets (:data:`FRAMEWORK_PRESETS`): presets first; then the presets at
    each of the level's other precisions (:attr:`Level.more_precisions`),
    and the frameworks that run that precision under
    :func:`framework_settings` (not the framework's own presets)."""
    topo = topo if topo is not None else topology()
    n = cores or allowed_cores(topo)
    grid = level.sweep(n)
    repeats = level.repeats
    configs = []
    for model in level.models:
        for batch in level.batches:
            chosen = [preset(p, topo, build(model, batch)).with_(precision=level.precision)
                      for p in PRESETS]
            rec = (recommended or {}).get((model, batch))
            # A grid setting a preset already measures (names aside) is not
            # run twice. The recommended one is, under its own name: its
            # regret is read from its own measurement.
            same = {c.with_(name="") for c in chosen}
            chosen += [s for s in grid if s not in same]
            configs += [Config(model, batch, s, repeats=repeats) for s in chosen[:len(PRESETS)]]
            if rec is not None:
                configs.append(Config(model, batch, rec[0].with_(name="recommended"),
                                      repeats=repeats, predicted_ns=rec[1]))
            configs += [Config(model, batch, s, repeats=repeats) for s in chosen[len(PRESETS):]]
            # The frameworks run at the level's precision (ONNX Runtime's bf16 row
            # says it has none), beside the native run of the same settings;
            # none has a translation of the int8 graphs.
            if frameworks and batch == level.batches[0] and level.precision != "int8":
                # The native run they are compared with: the same settings, by label.
                fs = framework_settings(n).with_(precision=level.precision)
                native = next((s for s in chosen if s.with_(name="") == fs), fs)
                if native is fs:
                    configs.append(Config(model, batch, fs, repeats=repeats))
                configs += [Config(model, batch, native, repeats=repeats, framework=f,
                                   mode=precision_mode(f, m, level.precision))
                            for f, m in frameworks]
                # A framework's own presets set no precision: fp32 levels only.
                configs += [Config(model, batch, Settings(name=p), repeats=repeats, framework=f,
                                   mode=m)
                            for f, m in frameworks for p in FRAMEWORK_PRESETS.get(f, ())
                            if level.precision == "fp32"]
        # The other precisions this CPU runs natively: the presets at the
        # first batch, each model's rows of that precision.
        first = level.batches[0]
        for more in level.more_precisions:
            at = [preset(p, topo, build(model, first)).with_(precision=more) for p in PRESETS]
            at = [s for s in at if s.library == "onednn"]
            configs += [Config(model, first, s, repeats=repeats) for s in at]
            # The frameworks that run this precision, beside the native run
            # of their settings (ONNX Runtime's x86 provider has no bf16).
            runs = [(f, m) for f, m in frameworks if unsupported(f, more, m) is None]
            if runs:
                fs = framework_settings(n).with_(precision=more)
                native = next((s for s in at if s.with_(name="") == fs), fs)
                if native is fs:
                    configs.append(Config(model, first, fs, repeats=repeats))
                configs += [Config(model, first, native, repeats=repeats, framework=f,
                                   mode=precision_mode(f, m, more)) for f, m in runs]
    return configs


def plan_suite(level: Level, *, cores: int | None = None, peak: Ceilings = None,
               topo: Topology | None = None, operators: bool = True, slowdown: float = 1.0,
               recommended: Recommended | None = None,
               frameworks: Sequence[tuple[str, str]] = ()) -> SuitePlan:
    """The configurations and operator tasks of ``level``, fitted to its
    budget (``level.budget_s``; None: no limit).

    ``slowdown`` multiplies every estimate: how much slower than an idle
    machine this one is now (see :func:`busy_slowdown`). ``peak``: the
    measured ceilings, or :class:`AssumedCeilings`. ``topo``: the machine
    (default this one). ``recommended`` and ``frameworks``: see
    :func:`default_suite`. Fitting drops grid
    settings by rank, the last of every model first, until the estimate
    fits; presets, the recommended setting, the native run the frameworks
    are compared with, one framework run per model (the first of
    :data:`KEPT_FRAMEWORK_RUNS`) and operator tasks are always kept; the other
    framework runs rank with the fourth grid setting of their model.
    """
    if slowdown < 1.0:
        raise ValueError(f"slowdown must be >= 1, got {slowdown}")

    topo = topo if topo is not None else topology()
    n = cores or allowed_cores(topo)
    configs = default_suite(level, cores=n, topo=topo, recommended=recommended,
                            frameworks=frameworks)
    graphs = {(m, b): build(m, b) for m in level.models for b in level.batches}
    config_s = [slowdown * estimate_config_s(c, graphs[(c.model, c.batch)], peak)
                for c in configs]
    tasks: list[OpTask] = []
    task_s: list[float] = []
    if operators:
        for m in level.models:
            for b in level.batches:
                t = OpTask("nodes", (n,), model=m, batch=b, repeats=level.repeats)
                tasks.append(t)
                task_s.append(slowdown * estimate_task_s(t, graphs[(m, b)], peak))
        for shape in standard_shapes(level.name):
            t = OpTask("scaling", tuple(thread_counts(n)), shape, repeats=level.repeats)
            tasks.append(t)
            task_s.append(slowdown * estimate_task_s(t, shape_graph(shape), peak))
        # The decoder row: llama-tiny's generation (quick: where it is cheap,
        # without PyTorch's seconds-long child start; a decoder among the
        # level's models: always), at the scaling counts.
        runtimes = generation_frameworks(1, torch=level.name != "quick")
        for m in generation_models(level.models):
            t = generation_task(m, thread_counts(n), runtimes)
            prefill = graphs[(m, t.batch)] if (m, t.batch) in graphs else build(m, t.batch)
            idle_s = estimate_task_s(t, prefill, peak)
            if level.name == "quick" and m not in level.models and idle_s >= _QUICK_GENERATION_S:
                continue
            tasks.append(t)
            task_s.append(slowdown * idle_s)
    plan = SuitePlan(level, configs, tasks, config_s, task_s, level.budget_s,
                     slowdown=slowdown,
                     graphs={k: g.report_stats() for k, g in graphs.items()})
    if level.budget_s is not None:
        _fit(plan, level.budget_s, framework_settings(n).with_(precision=level.precision))
    return plan


def _fit(plan: SuitePlan, budget: float, compared: Settings) -> None:
    """Drop grid settings, highest rank first, until the plan fits ``budget``
    (``compared``: the native setting framework runs are compared with)."""
    rank: list[float] = []
    seen: dict[tuple[str, int], int] = {}
    has_frameworks = {(c.model, c.batch) for c in plan.configs if c.framework is not None}
    def preference(run: tuple[str, str | None]) -> int:
        return KEPT_FRAMEWORK_RUNS.index(run) if run in KEPT_FRAMEWORK_RUNS else 99

    def own_preset(c: Config) -> bool:  # a framework's own preset: its hint runs
        return c.framework is not None and c.settings.name in FRAMEWORK_PRESETS.get(c.framework,
                                                                                    ())

    kept_run: dict[tuple[str, int], tuple[str, str | None]] = {}
    preset_s: dict[tuple[str, int, str], float] = {}
    for c, s in zip(plan.configs, plan.config_s):
        if c.framework is not None and not own_preset(c):
            run, k = (c.framework, c.mode), (c.model, c.batch)
            if k not in kept_run or preference(run) < preference(kept_run[k]):
                kept_run[k] = run
        elif own_preset(c):
            key = (c.model, c.batch, c.framework or "")
            preset_s[key] = preset_s.get(key, 0.0) + s
    # Each framework's own presets are kept for one model (its cheapest), so
    # the report always reads the framework's tuner against the shared
    # setting: dropped only after every grid setting and every other
    # framework run; its run under the shared setting goes after them.
    showcase = {f: min((k for k in preset_s if k[2] == f), key=preset_s.__getitem__)
                for f in {k[2] for k in preset_s}}
    # The frameworks at a precision other than the level's (bf16 beside
    # fp32) are kept for one model, the cheapest, where its runs cost at
    # most a tenth of the budget (with its runs at the level's precision);
    # elsewhere they go first.
    other_s: dict[tuple[str, int], float] = {}
    for c, s in zip(plan.configs, plan.config_s):
        if c.framework is not None and c.settings.precision != plan.level.precision:
            other_s[(c.model, c.batch)] = other_s.get((c.model, c.batch), 0.0) + s
    other_shown = min(other_s, key=other_s.__getitem__, default=None)
    if other_shown is not None and other_s[other_shown] > budget / 10:
        other_shown = None
    for c in plan.configs:
        k = (c.model, c.batch)
        shown = c.framework is not None and showcase.get(c.framework) == (*k, c.framework)
        if own_preset(c):
            # Left out before any framework run: read against the framework's
            # run under the shared setting, never without it.
            rank.append(-0.4 if shown else 4)
            continue
        other = c.settings.precision != plan.level.precision
        if c.framework is not None and other:
            rank.append(-0.3 if k == other_shown else 3.5)
            continue
        if c.framework is not None:
            # The model whose frameworks run at the other precision too
            # keeps its runs at this one: the two read side by side.
            rank.append(-1 if kept_run.get(k) == (c.framework, c.mode) else
                        -0.5 if shown else -0.2 if k == other_shown else 3)
            continue
        if c.settings.name in KEPT or (k in has_frameworks
                                       and c.settings.with_(name="") == compared):
            rank.append(-1)
            continue
        if other and c.settings.with_(name="", precision=compared.precision) == compared:
            # The native run the frameworks at another precision are read
            # against: left out with them.
            rank.append(-0.3 if k == other_shown else 3.4)
            continue
        seen[k] = seen.get(k, -1) + 1
        rank.append(seen[k])
    order = sorted(range(len(plan.configs)), key=lambda i: rank[i], reverse=True)
    drop: set[int] = set()
    total = plan.estimate_s
    for i in order:
        if total <= budget or rank[i] <= -1:
            break
        drop.add(i)
        total -= plan.config_s[i]
    plan.dropped = [c for i, c in enumerate(plan.configs) if i in drop]
    plan.dropped_s = [e for i, e in enumerate(plan.config_s) if i in drop]
    plan.config_s = [s for i, s in enumerate(plan.config_s) if i not in drop]
    plan.configs = [c for i, c in enumerate(plan.configs) if i not in drop]
