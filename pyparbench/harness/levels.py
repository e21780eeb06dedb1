"""The levels of ``pyparbench run``: what each one measures, resolved once.

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

:func:`resolve_level` turns a level's name and the user's choices (models,
batches, repeats, confirmation rounds) into one :class:`Level` value that
the rest of the main job reads whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pyparbench import ops
from pyparbench.choices import PRECISIONS, check_precision
from pyparbench.harness.grid import ALL, Grid, expand_all
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.memory import available_bytes
from pyparbench.models import MODELS, files, resolve
from pyparbench.settings import Settings

__all__ = ["BATCHES", "BUDGET_S", "CONFIRM_ROUNDS", "CONFIRM_SHARE", "DEFAULT_BATCHES",
           "DEFAULT_MODELS", "GRIDS", "full_models", "LEVELS", "REPEATS", "Level", "levels_upto",
           "resolve_level"]

LEVELS = ("quick", "default", "full")
DEFAULT_MODELS = ("resnet50", "googlenet", "mlp-512", "dlrm-kaggle", "transformer")


def full_models(available: int | None = None) -> tuple[str, ...]:
    """The full level's models: every built-in model whose float32 weights
    fit the memory available (``available`` bytes; MemAvailable by default),
    so the server-sized decoders (llama-3.1-8b: 32 GB) join it on a server
    and stay out on a laptop; named with ``--models`` they run anywhere
    they fit and fail in one line where they do not."""
    free = available_bytes() if available is None else available
    return tuple(m for m, spec in MODELS.items()
                 if free is None or 4 * spec.build().num_params <= free)
DEFAULT_BATCHES = (1, 8)
BATCHES = {"quick": (1,), "default": DEFAULT_BATCHES, "full": (1, 8, 32)}
REPEATS = {"quick": 3, "default": 5, "full": 10}
# Seconds a level is planned to fit in (None: no limit), with a margin below
# the 2 and 5 minutes it promises for what the estimate does not see.
BUDGET_S: dict[str, float | None] = {"quick": 100.0, "default": 250.0, "full": None}
# Confirmation rounds per level (pyparbench.harness.confirm), and the share of a
# level's budget kept for them.
CONFIRM_ROUNDS = {"quick": 1, "default": 2, "full": 2}
CONFIRM_SHARE = 0.2

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


def levels_upto(name: str) -> tuple[str, ...]:
    """The level ``name`` and those before it (what it adds to).

    Raises
    ------
    ValueError
        ``name`` is not a level.
    """
    if name not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {name!r}")
    return LEVELS[:LEVELS.index(name) + 1]


@dataclass(frozen=True)
class Level:
    """What a run measures: a level with the user's choices applied.

    ``budget_s``: seconds the plan is fitted to (None: no limit, as for
    ``full`` and for the shards of a sharded suite); ``confirm_rounds``:
    further processes of the settings a regret rests on (0: none).
    """

    name: str
    models: tuple[str, ...]
    batches: tuple[int, ...]
    repeats: int
    budget_s: float | None
    confirm_rounds: int
    # The native runs' precision (Settings.precision): every preset, grid and
    # recommended setting is run at it.
    precision: str = "fp32"
    # Other precisions this CPU runs natively, measured beside it: each
    # model's presets at the level's first batch (its own rows in the
    # report); and why a precision was left out (the CPU emulates it).
    more_precisions: tuple[str, ...] = ()
    left_out: str = ""

    @property
    def grids(self) -> tuple[Grid, ...]:
        """Every grid the level measures, its own after the levels before it."""
        return tuple(g for lv in levels_upto(self.name) for g in GRIDS[lv])

    def sweep(self, cores: int) -> list[Settings]:
        """The grid settings on ``cores`` cores, most important first, at
        the level's precision (bf16: the onednn library's only)."""
        return [s.with_(precision=self.precision) for s in expand_all(self.grids, cores)
                if self.precision == "fp32" or s.library == "onednn"]


def resolve_level(name: str, *, models: Sequence[str] | None = None,
                  batches: Sequence[int] | None = None, repeats: int | None = None,
                  confirm_rounds: int | None = None, budget: bool = True,
                  shapes: Mapping[str, int] | None = None, precision: str | None = "fp32",
                  native: Sequence[str] | None = None) -> Level:
    """The level ``name`` with the user's choices; a choice left None takes
    the level's own. ``budget`` False: no time budget (a shard of a
    sharded suite, which must plan exactly like the other shards).
    ``shapes``: the sizes of the ONNX files' symbolic dimensions, by name
    (:func:`pyparbench.models.resolve`). ``precision``: the native runs'
    (``Settings.precision``); None (what ``pyparbench run`` passes when no
    ``--precision`` is given): fp32, with every other precision the CPU
    multiplies natively (``native``: the precisions it does, default
    :func:`pyparbench.machine.cpu_features.cpu_features`'s) measured beside
    it (:attr:`Level.more_precisions`).

    Raises
    ------
    ValueError
        An unknown level or model, an ONNX file that does not import, no
        models or batches, a batch or repeat count below 1, negative
        confirmation rounds; ``shapes`` without an ONNX file among the models;
        an unknown precision.
    """
    levels_upto(name)
    more, left_out = _more_precisions(precision, native)
    precision = "fp32" if precision is None else precision
    check_precision(precision)
    chosen = tuple(models) if models is not None else (
        full_models() if name == "full" else DEFAULT_MODELS)
    unknown = [m for m in chosen if m not in MODELS and not files.looks_like_file(m)
               and not files.is_file_key(m)]
    if unknown:
        raise ValueError(f"unknown model(s) {unknown}; valid names: {', '.join(MODELS)}, "
                         "or an ONNX file's path")
    # A file becomes its name (file name and content hash), checked before anything runs.
    if shapes and not any(files.looks_like_file(m) or files.is_file_key(m) for m in chosen):
        raise ValueError(f"--shape sizes an ONNX file's symbolic dimensions, and no file is "
                         f"among the models ({', '.join(chosen)})")
    chosen = tuple(dict.fromkeys(resolve(m, shapes) for m in chosen))
    sizes = tuple(batches) if batches is not None else BATCHES[name]
    for what, values in (("models", chosen), ("batches", sizes)):
        if not values:
            raise ValueError(f"{what} must not be empty")
    bad = [b for b in sizes if isinstance(b, bool) or not isinstance(b, int) or b < 1]
    if bad:
        raise ValueError(f"batch sizes must be integers >= 1, got {bad[0]!r}")
    for m in chosen:
        if files.is_file_key(m):
            for b in sizes:  # a fixed batch dimension that differs: refused now, not mid-run
                files.load(m, b)
    reps = REPEATS[name] if repeats is None else repeats
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {reps!r}")
    rounds = CONFIRM_ROUNDS[name] if confirm_rounds is None else confirm_rounds
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise ValueError(f"confirmation rounds must be an integer >= 0, got {rounds!r}")
    return Level(name, chosen, sizes, reps, BUDGET_S[name] if budget else None, rounds,
                 precision, more, left_out)


def _native_precisions() -> list[str]:
    """The precisions this CPU multiplies natively (its flags) that this
    oneDNN build runs natively too: an aarch64 oneDNN without the Arm
    Compute Library has no bf16 matmul on any CPU, and one that would
    emulate is not native (:func:`pyparbench.ops.implementation`); nor is
    int8 where oneDNN's int8 product runs without the CPU's int8 dot
    product (:func:`pyparbench.ops.quantized_implementation`)."""
    out = []
    for p in cpu_features()["precisions"]:
        if p == "bf16":
            a = np.ones((16, 16), np.float32)
            try:
                if ops.implementation("gemm", a, a, precision="bf16").emulated:
                    continue
            except (RuntimeError, ImportError):  # no bf16 kernel, or no ml_dtypes
                continue
        if p == "int8":
            x, w = np.ones((16, 16), np.uint8), np.ones((16, 16), np.int8)
            try:
                if not ops.quantized_implementation("quantized_linear", x, w, x_scale=1.0,
                                                    weight_scale=np.ones(16, np.float32))[1]:
                    continue
            except RuntimeError:  # no int8 kernel in this oneDNN build
                continue
        out.append(p)
    return out


def _more_precisions(asked: str | None, native: Sequence[str] | None
                     ) -> tuple[tuple[str, ...], str]:
    """The precisions measured beside fp32 when none was asked for (those
    the CPU multiplies natively, :data:`~pyparbench.choices.PRECISIONS`
    order), and why the others are left out."""
    if asked is not None:
        return (), ""
    have = set(_native_precisions() if native is None else native)
    more = tuple(p for p in PRECISIONS if p != "fp32" and p in have)
    out = [p for p in PRECISIONS if p != "fp32" and p not in have]
    why = (f"{', '.join(out)} left out: not native here (the CPU has no AVX512_BF16, "
           "AMX-BF16 or Arm BF16 for bf16, no VNNI, AMX-INT8, SDOT or I8MM for int8, or "
           "this oneDNN build would emulate it or has no such kernel); --precision asks "
           "for it anyway"
           if out else "")
    return more, why
