"""The suites of ``pyparbench run``: what each level measures, and how long
that is expected to take.

Three levels, each adding to the one before:

* ``quick`` (about 2 minutes on 2 cores): the default models at batch 1,
  the presets and one grid per study layer: every inter_op x intra_op split
  of the cores (Scheduler), framework operator mode on Eigen's pool
  (Operator), the Eigen and OpenBLAS math libraries (Library); a few
  standard operator shapes and each model's heavy nodes on the roofline.
* ``default`` (about 5 minutes on 2 cores): batches 1 and 8, unpinned
  threads, framework mode on the OpenMP pool, one thread alone; more shapes.
* ``full``: every model at batches 1, 8 and 32, and the remaining knobs
  (the std pool, OpenMP wait policies, SMT, data-parallel instances,
  per-socket placement of branches); every shape.

Beside the presets, each model gets the recommender's setting (named
``recommended``, with its prediction; :mod:`pyparbench.recommend`) and,
when TensorFlow, PyTorch or ONNX Runtime are installed, the same graph at
the level's first batch in each of them (:data:`FRAMEWORK_RUNS`) under the
one setting every framework maps fully: one worker of all the cores,
pinned compactly (:func:`framework_settings`).

A level with a time budget (:data:`BUDGET_S`) is planned to fit it:
:func:`plan_suite` estimates each measurement (:func:`estimate_config_s`,
:func:`estimate_task_s`: process start, weights, warm-up and repeats at the
latency the machine's ceilings predict, times :func:`busy_slowdown` when
other processes are using the cores) and, if the total is over, drops the
least important first: the last grid settings of every model, never a
preset, nor the fastest framework's run of each model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyparbench.grid import ALL, Grid, expand_all
from pyparbench.names import PRESETS
from pyparbench.op_bench import OpTask, standard_shapes
from pyparbench.runner import MIN_MEASURE_S, Config
from pyparbench.settings import Settings, preset

if TYPE_CHECKING:
    from pyparbench.graph import Graph
    from pyparbench.peak import Peak

__all__ = ["BATCHES", "BUDGET_S", "CONFIRM_ROUNDS", "CONFIRM_SHARE", "DEFAULT_BATCHES",
           "DEFAULT_MODELS", "FRAMEWORK_RUNS", "GRIDS", "KEPT", "KEPT_FRAMEWORK_RUNS", "LEVELS",
           "REPEATS", "SuitePlan", "busy_slowdown", "default_suite",
           "estimate_config_s", "estimate_task_s", "framework_settings", "installed_frameworks",
           "level_models", "plan_suite", "sweep"]

LEVELS = ("quick", "default", "full")
DEFAULT_MODELS = ("resnet50", "googlenet", "mlp-512", "dlrm-kaggle", "transformer")
DEFAULT_BATCHES = (1, 8)
BATCHES = {"quick": (1,), "default": DEFAULT_BATCHES, "full": (1, 8, 32)}
REPEATS = {"quick": 3, "default": 5, "full": 10}
# Seconds a level is planned to fit in (None: no limit), with a margin below
# the 2 and 5 minutes it promises for what the estimate does not see.
BUDGET_S: dict[str, float | None] = {"quick": 100.0, "default": 250.0, "full": None}
# Confirmation rounds per level (pyparbench.confirm), and the share of a
# level's budget kept for them.
CONFIRM_ROUNDS = {"quick": 1, "default": 2, "full": 2}
CONFIRM_SHARE = 0.2

# Settings names a budget never drops: the presets and the recommender's.
KEPT = (*PRESETS, "recommended")
# The framework runs of each model (framework, mode), when installed: what
# each framework's users run (TensorFlow's tf.function, PyTorch eager and
# frozen TorchScript, ONNX Runtime with every graph optimisation).
FRAMEWORK_RUNS = (("tensorflow", "function"), ("torch", "eager"), ("torch", "script"),
                  ("onnxruntime", "all"))
# The framework run a budget keeps for each model (the first of these the
# plan has): the fastest runtime, so that the report always compares the
# native executor with its strongest rival; the other runs rank with the
# fourth grid setting.
KEPT_FRAMEWORK_RUNS = (("onnxruntime", "all"), ("torch", "script"), ("torch", "eager"),
                       ("tensorflow", "function"))
# The Python packages each framework run needs.
_FRAMEWORK_PACKAGES = {"tensorflow": ("tensorflow",), "torch": ("torch",),
                       "onnxruntime": ("onnxruntime", "onnx")}

_COMPACT = ("compact",)
# The settings measured besides the presets, per level, most important first.
GRIDS: dict[str, tuple[Grid, ...]] = {
    "quick": (
        # One layer after another, so a budget that drops the last settings
        # keeps one comparison of each layer as long as it can.
        # Scheduler: sync on every core, and async with every split of them.
        Grid({"inter_op": ALL, "affinity": _COMPACT}),
        # Operator: ops split into blocks on the framework's pool (TensorFlow's Eigen pool).
        Grid({"operator": ("framework",), "pool": ("eigen",), "affinity": _COMPACT}),
        # Library: the other math libraries.
        Grid({"library": ("eigen", "blas"), "affinity": _COMPACT}),
    ),
    "default": (
        Grid({"operator": ("framework",), "pool": ("openmp",), "affinity": _COMPACT}),
        Grid({"inter_op": ALL, "affinity": ("none",)}),
        # One thread alone: what the cores add.
        Grid({"inter_op": (1,), "intra_op": (1,), "affinity": _COMPACT}, fill=False),
    ),
    "full": (
        Grid({"operator": ("framework",), "pool": ("std",), "affinity": _COMPACT}),
        Grid({"omp_wait": ("passive", "active"), "affinity": _COMPACT}),
        Grid({"smt": (True,), "affinity": _COMPACT}),
        Grid({"instances": ALL, "affinity": _COMPACT}),
        Grid({"inter_op": ALL, "placement": ("per-socket",), "affinity": ("scatter",)}),
    ),
}


def _upto(level: str) -> tuple[str, ...]:
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    return LEVELS[:LEVELS.index(level) + 1]


def level_grids(level: str) -> tuple[Grid, ...]:
    """Every grid a level measures, its own after the levels before it."""
    return tuple(g for lv in _upto(level) for g in GRIDS[lv])


def level_models(level: str) -> tuple[str, ...]:
    """The models a level runs when none are named."""
    if level == "full":
        from pyparbench.models import MODELS

        return tuple(MODELS)
    _upto(level)
    return DEFAULT_MODELS


def sweep(cores: int, level: str = "default") -> list[Settings]:
    """The grid settings of ``level`` on ``cores`` cores, most important first."""
    return expand_all(level_grids(level), cores)


def installed_frameworks() -> tuple[str, ...]:
    """The frameworks whose packages are installed (found, not imported:
    each framework is only ever imported in its own child process)."""
    from importlib.util import find_spec

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
_FRAMEWORK_START_S = {"tensorflow": 6.0, "torch": 3.0, "onnxruntime": 2.5}
_FRAMEWORK_SLOWDOWN = 1.5
# Executor cost per node and run, and the share of the ceilings a model reaches.
_NODE_S = 15e-6
_EFFICIENCY = {"onednn": 0.5, "eigen": 0.25, "blas": 0.35}
# Without measured ceilings: per core.
_FALLBACK_GFLOPS, _FALLBACK_GBS = 40.0, 10.0


def _ceilings(peak: Peak | None, threads: int) -> tuple[float, float]:
    if peak is None:
        return _FALLBACK_GFLOPS * threads, _FALLBACK_GBS * max(1, min(threads, 4))
    p = peak.point(threads)
    return p.fma_gflops, p.triad_gbs


def _latency_s(graph: Graph, settings: Settings, peak: Peak | None) -> float:
    """A rough latency of one pass: compute at a share of the FMA ceiling,
    traffic at the triad bandwidth, plus the executor's per-node cost."""
    gflops, gbs = _ceilings(peak, max(1, settings.threads))
    eff = _EFFICIENCY[settings.library] * (0.7 if settings.operator == "framework" else 1.0)
    return (graph.flops / (gflops * 1e9 * eff) + graph.bytes_moved / (gbs * 1e9)
            + len(graph.nodes) * _NODE_S)


def estimate_config_s(config: Config, graph: Graph, peak: Peak | None = None) -> float:
    """Seconds one model configuration is expected to take, process start included."""
    weights = 4.0 * graph.num_params / _WEIGHTS_BPS
    runs = config.warmup + config.repeats
    latency = _latency_s(graph, config.settings, peak)
    if config.framework is not None:
        # Weights are handed over and converted once more in the child.
        return (_FRAMEWORK_START_S.get(config.framework, 3.0) + 2 * weights
                + runs * _FRAMEWORK_SLOWDOWN * latency)
    # The child times runs for at least MIN_MEASURE_S.
    return (_START_S + weights + config.warmup * latency
            + max(config.repeats * latency, MIN_MEASURE_S))


def estimate_task_s(task: OpTask, graph: Graph, peak: Peak | None = None) -> float:
    """Seconds one operator task is expected to take (``graph``: the model's
    for a nodes task, the shape's one-node graph for a scaling task)."""
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

    level: str
    configs: list[Config]
    tasks: list[OpTask]
    config_s: list[float]
    task_s: list[float]
    budget_s: float | None
    dropped: list[Config] = field(default_factory=list)
    slowdown: float = 1.0

    @property
    def estimate_s(self) -> float:
        """Expected seconds for everything planned."""
        return sum(self.config_s) + sum(self.task_s)


def busy_slowdown(loadavg: float, cpus: int, threads: int) -> float:
    """How much slower than on an idle machine a run of ``threads`` threads
    is expected to go while other processes keep ``loadavg`` CPUs busy out
    of ``cpus``: the CPUs wanted over the CPUs there are, at least 1."""
    return max(1.0, (loadavg + threads) / max(1, cpus))


def default_suite(models: Sequence[str] = DEFAULT_MODELS,
                  batches: Sequence[int] = DEFAULT_BATCHES, *, repeats: int = 5,
                  cores: int | None = None, level: str = "default",
                  recommended: Mapping[tuple[str, int], tuple[Settings, float | None]]
                  | None = None,
                  frameworks: Sequence[tuple[str, str]] = ()) -> list[Config]:
    """Every (model, batch) under the presets, the recommender's setting (from
    ``recommended``: (model, batch) -> (settings, predicted ns)), the level's
    grids, then, at the first of ``batches``, each of ``frameworks``
    ((framework, mode) pairs) under :func:`framework_settings`: presets
    first."""
    from pyparbench.models import build
    from pyparbench.settings import allowed_cores
    from pyparbench.threading.topology import topology

    topo = topology()
    n = cores or allowed_cores(topo)
    grid = sweep(n, level)
    configs = []
    for model in models:
        for batch in batches:
            chosen = [preset(p, topo, build(model, batch)) for p in PRESETS]
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
            if frameworks and batch == batches[0]:
                # The native run they are compared with: the same settings, by label.
                fs = framework_settings(n)
                native = next((s for s in chosen if s.with_(name="") == fs), fs)
                if native is fs:
                    configs.append(Config(model, batch, fs, repeats=repeats))
                configs += [Config(model, batch, native, repeats=repeats, framework=f, mode=m)
                            for f, m in frameworks]
    return configs


def plan_suite(level: str, models: Sequence[str] | None = None,
               batches: Sequence[int] | None = None, *, repeats: int | None = None,
               cores: int | None = None, peak: Peak | None = None,
               budget_s: float | None = -1.0, operators: bool = True,
               slowdown: float = 1.0,
               recommended: Mapping[tuple[str, int], tuple[Settings, float | None]]
               | None = None,
               frameworks: Sequence[tuple[str, str]] = ()) -> SuitePlan:
    """The configurations and operator tasks of a level (models, batches and
    repeats default to the level's), fitted to ``budget_s`` (default: the
    level's :data:`BUDGET_S`; None: no limit).

    ``slowdown`` multiplies every estimate: how much slower than an idle
    machine this one is now (see :func:`busy_slowdown`). ``recommended``
    and ``frameworks``: see :func:`default_suite`. Fitting drops grid
    settings by rank, the last of every model first, until the estimate
    fits; presets, the recommended setting, the native run the frameworks
    are compared with, one framework run per model (the first of
    :data:`KEPT_FRAMEWORK_RUNS`) and operator tasks are always kept; the other
    framework runs rank with the fourth grid setting of their model.
    """
    if slowdown < 1.0:
        raise ValueError(f"slowdown must be >= 1, got {slowdown}")
    from pyparbench.models import build
    from pyparbench.op_bench import shape_graph
    from pyparbench.peak import thread_counts
    from pyparbench.settings import allowed_cores
    from pyparbench.threading.topology import topology

    _upto(level)
    budget = BUDGET_S[level] if budget_s == -1.0 else budget_s
    models = list(models or level_models(level))
    batches = list(batches or BATCHES[level])
    reps = repeats or REPEATS[level]
    n = cores or allowed_cores(topology())
    configs = default_suite(models, batches, repeats=reps, cores=n, level=level,
                            recommended=recommended, frameworks=frameworks)
    graphs = {(m, b): build(m, b) for m in models for b in batches}
    config_s = [slowdown * estimate_config_s(c, graphs[(c.model, c.batch)], peak)
                for c in configs]
    tasks: list[OpTask] = []
    task_s: list[float] = []
    if operators:
        for m in models:
            for b in batches:
                t = OpTask("nodes", (n,), model=m, batch=b, repeats=reps)
                tasks.append(t)
                task_s.append(slowdown * estimate_task_s(t, graphs[(m, b)], peak))
        for shape in standard_shapes(level):
            t = OpTask("scaling", tuple(thread_counts(n)), shape, repeats=reps)
            tasks.append(t)
            task_s.append(slowdown * estimate_task_s(t, shape_graph(shape), peak))
    plan = SuitePlan(level, configs, tasks, config_s, task_s, budget, slowdown=slowdown)
    if budget is not None:
        _fit(plan, budget, framework_settings(n))
    return plan


def _fit(plan: SuitePlan, budget: float, compared: Settings) -> None:
    """Drop grid settings, highest rank first, until the plan fits ``budget``
    (``compared``: the native setting framework runs are compared with)."""
    rank: list[int] = []
    seen: dict[tuple[str, int], int] = {}
    has_frameworks = {(c.model, c.batch) for c in plan.configs if c.framework is not None}
    def preference(run: tuple[str, str | None]) -> int:
        return KEPT_FRAMEWORK_RUNS.index(run) if run in KEPT_FRAMEWORK_RUNS else 99

    kept_run: dict[tuple[str, int], tuple[str, str | None]] = {}
    for c in plan.configs:
        if c.framework is not None:
            run, k = (c.framework, c.mode), (c.model, c.batch)
            if k not in kept_run or preference(run) < preference(kept_run[k]):
                kept_run[k] = run
    for c in plan.configs:
        k = (c.model, c.batch)
        if c.framework is not None:
            rank.append(-1 if kept_run.get(k) == (c.framework, c.mode) else 3)
            continue
        if c.settings.name in KEPT or (k in has_frameworks
                                       and c.settings.with_(name="") == compared):
            rank.append(-1)
            continue
        seen[k] = seen.get(k, -1) + 1
        rank.append(seen[k])
    order = sorted(range(len(plan.configs)), key=lambda i: rank[i], reverse=True)
    drop: set[int] = set()
    total = plan.estimate_s
    for i in order:
        if total <= budget or rank[i] < 0:
            break
        drop.add(i)
        total -= plan.config_s[i]
    plan.dropped = [c for i, c in enumerate(plan.configs) if i in drop]
    plan.config_s = [s for i, s in enumerate(plan.config_s) if i not in drop]
    plan.configs = [c for i, c in enumerate(plan.configs) if i not in drop]
