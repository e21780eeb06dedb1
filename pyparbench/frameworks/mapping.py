"""How pyparbench's settings become each framework's own knobs.

=============  =============================  ===============================  ================================
pyparbench     TensorFlow 2.21                PyTorch 2.13                     ONNX Runtime
=============  =============================  ===============================  ================================
intra_op       set_intra_op_parallelism_      torch.set_num_threads            intra_op_num_threads
               threads
inter_op       set_inter_op_parallelism_      torch.set_num_interop_threads    inter_op_num_threads
               threads
scheduler      sync: set_synchronous_         sync: one straight-line          sync: ORT_SEQUENTIAL;
               execution(True); async:        forward; async (``script``       async: ORT_PARALLEL
               False (the graph runs on the   mode): parallel branches run
               inter-op pool)                 with torch.jit.fork; eager and
                                              compile: not applicable
operator       library with onednn (oneDNN    library (oneDNN / MKL thread     framework (MLAS splits each op
               threads each op), framework    each op on OpenMP); framework:   on ORT's pool); library: not
               with eigen (Eigen splits ops   not applicable                   applicable
               on the pool); else n/a
library        onednn: TF_ENABLE_ONEDNN_OPTS  onednn: torch.backends.mkldnn    not applicable (MLAS always)
               =1; eigen: =0; blas: n/a       on; blas: off (convolution as
                                              im2col + MKL sgemm); eigen: n/a
pool           eigen (TF's own pool); other   openmp (the intra-op team);      eigen (ORT's pool derives from
               values n/a                     other values n/a                 Eigen's); other values n/a
affinity, smt  the child's CPU mask, set      the CPU mask; with one inter-op  the CPU mask, and
               before import                  worker also GOMP_CPU_AFFINITY    session.intra_op_thread_
                                              (one CPU per OpenMP thread)      affinities (one CPU per thread)
omp_wait       not applicable (no OpenMP)     OMP_WAIT_POLICY /                passive or 0: allow_spinning 0;
                                              GOMP_SPINCOUNT                   active or a count: 1
instances      not applicable (one copy)      not applicable                   not applicable
placement      per-socket: not applicable     per-socket: not applicable       per-socket: not applicable
graph_opt      full: Grappler (always on);    full: as the mode optimises      full: the mode (optimisation
               other values n/a               (freeze, inductor); other n/a    level); other values n/a
=============  =============================  ===============================  ================================

OpenVINO (its CPU plugin; property names as ``compile_model`` takes them):
intra_op is INFERENCE_NUM_THREADS per stream (the total is instances x
intra_op), instances are NUM_STREAMS (each stream one infer request on its
own threads), affinity is ENABLE_CPU_PINNING (the child's CPU mask holds
exactly the streams' CPUs), smt is ENABLE_HYPER_THREADING, and the mode is
INFERENCE_PRECISION_HINT (f32, bf16, f16; unset in mode ``auto``, where
OpenVINO picks it as its users get it: bf16 on a CPU with bf16 dot
products, and the compiled model's pick is read back). PERFORMANCE_HINT is
left unset (``benchmark_app -hint none``): the explicit streams and threads
decide. Not applicable: inter_op > 1 and the async scheduler (a stream runs
its nodes in order), omp_wait (TBB threads, no OpenMP), library other than
oneDNN, operator framework, pools other than TBB's, graph_opt.
OpenVINO's own tuner is a preset (:data:`OPENVINO_PRESETS`): its LATENCY
or THROUGHPUT hint at the mode's precision, or no property at all.

Modes (the ways each framework's users run a model): TensorFlow ``function``
(a ``tf.function``, XLA off) or ``xla`` (``jit_compile=True``); PyTorch
``eager``, ``script`` (``torch.jit.freeze`` of ``torch.jit.script`` under
eval and inference mode) or ``compile`` (``torch.compile``, inductor); ONNX
Runtime ``all``, ``extended``, ``basic`` or ``disabled`` (the graph
optimisation level); OpenVINO ``f32``, ``bf16``, ``f16`` or ``auto`` (the
inference precision, or OpenVINO's own pick; at ``Settings.precision`` bf16
the f32 mode is bf16, :func:`precision_mode`). A bf16 run calls PyTorch's module under
``torch.autocast`` (knob ``bf16_mode``), sets TensorFlow's grappler oneDNN bf16
auto-mixed-precision (``auto_mixed_precision_onednn_bfloat16``) and
OpenVINO's bf16 hint; ONNX Runtime runs none
(:mod:`pyparbench.frameworks.precision`). A requested value with no counterpart is recorded in
the result's ``not_applicable`` list with the reason and the closest
setting the framework takes (``instead``), never dropped silently.

A plain OpenMP program (``"openmp"``, for deployment: pyparbench runs none)
takes the environment: OMP_NUM_THREADS (``inter_op,intra_op`` with
OMP_MAX_ACTIVE_LEVELS=2 for nested teams), OMP_PLACES with OMP_PROC_BIND
(``close``; ``spread,close`` nested) when pinned, OMP_WAIT_POLICY or
GOMP_SPINCOUNT (and KMP_BLOCKTIME in ms for the Intel / LLVM runtime).
PyTorch's environment also carries OMP_NUM_THREADS = intra_op, the count
it starts with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pyparbench.choices import DEFAULT_MODES, FRAMEWORKS, MODES, check_framework, check_mode
from pyparbench.frameworks.precision import TORCH_BF16_MODE
from pyparbench.settings import INTEL_SPINCOUNT, Settings

__all__ = ["DEFAULT_MODES", "FRAMEWORKS", "MODES", "OPENMP", "OPENVINO_PRESETS", "FrameworkConfig",
           "NotApplicable", "check_framework", "check_mode", "default_knobs", "map_settings",
           "precision_mode", "preset_knobs"]

# A plain OpenMP program: not a framework pyparbench runs, but one a setting
# is deployed to (its environment).
OPENMP = "openmp"

# OpenVINO's own tuner as presets: the hint it is given (None: no property at
# all, not even the precision: OpenVINO left entirely to itself).
OPENVINO_PRESETS: dict[str, str | None] = {"openvino-latency": "LATENCY",
                                           "openvino-throughput": "THROUGHPUT",
                                           "openvino-defaults": None}


@dataclass(frozen=True)
class NotApplicable:
    """A requested knob value the framework has no counterpart for."""

    knob: str
    value: Any
    reason: str
    instead: str = ""  # the closest setting the framework takes, as it takes it


@dataclass
class FrameworkConfig:
    """One framework's side of a Settings: environment of the child, the
    knobs it applies after import, and what does not map."""

    framework: str
    mode: str
    settings: Settings
    cpus: list[int] | None
    env: dict[str, str] = field(default_factory=dict)
    knobs: dict[str, Any] = field(default_factory=dict)
    not_applicable: list[NotApplicable] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"framework": self.framework, "mode": self.mode,
                "settings": self.settings.as_dict(), "cpus": self.cpus, "env": self.env,
                "knobs": self.knobs,
                "not_applicable": [asdict(n) for n in self.not_applicable]}


def _common(cfg: FrameworkConfig) -> None:
    s = cfg.settings
    if s.instances != 1:
        cfg.not_applicable.append(NotApplicable(
            "instances", s.instances, "the framework runs one copy of the model on all the "
            "threads; data-parallel copies are pyparbench's executor (run_model)",
            f"{s.instances} processes, each on its own CPUs (one launch line per instance)"))
    if s.placement != "shared":
        cfg.not_applicable.append(NotApplicable(
            "placement", s.placement, "no framework here places parallel branches on core "
            "groups; branches share every thread the child may use",
            "shared: every branch on the process's CPUs"))
    if s.graph_opt != "full":
        cfg.not_applicable.append(NotApplicable(
            "graph_opt", s.graph_opt, "a framework optimises the graph its own way, as its "
            "mode says (Grappler in TensorFlow, freezing in TorchScript, inductor, ONNX "
            "Runtime's optimisation level)", "the framework's own optimisation"))
    if cfg.cpus is not None:
        cfg.knobs["cpu_mask"] = list(cfg.cpus)


def _tensorflow(cfg: FrameworkConfig) -> None:
    s = cfg.settings
    na = cfg.not_applicable
    cfg.knobs.update({
        "inter_op_parallelism_threads": s.inter_op,
        "intra_op_parallelism_threads": s.intra_op,
        "synchronous_execution": s.scheduler == "sync",
        "jit_compile": cfg.mode == "xla",
    })
    if s.library == "blas":
        na.append(NotApplicable("library", "blas", "TensorFlow's CPU kernels are oneDNN or "
                                "Eigen; its default (oneDNN) is used", "TF_ENABLE_ONEDNN_OPTS=1"))
        onednn = True
    else:
        onednn = s.library == "onednn"
    cfg.env["TF_ENABLE_ONEDNN_OPTS"] = "1" if onednn else "0"
    cfg.knobs["onednn"] = onednn
    if s.precision == "bf16":  # grappler rewrites the function's graph with bf16 casts
        cfg.knobs["auto_mixed_precision_onednn_bfloat16"] = True
    if (s.operator == "library") != onednn:
        na.append(NotApplicable(
            "operator", s.operator, "TensorFlow ties the operator mode to the library: "
            f"{'oneDNN threads each op itself' if onednn else 'Eigen splits each op on the intra-op pool'}",
            f"operator={'library' if onednn else 'framework'}"))
    if s.pool != "eigen":
        na.append(NotApplicable("pool", s.pool, "TensorFlow always runs its own Eigen "
                                "non-blocking thread pools", "Eigen's pool of "
                                f"intra_op_parallelism_threads={s.intra_op}"))
    if s.omp_wait is not None:
        na.append(NotApplicable("omp_wait", s.omp_wait, "TensorFlow's oneDNN runs on "
                                "TensorFlow's thread pool, not OpenMP: OMP_WAIT_POLICY, "
                                "GOMP_SPINCOUNT and KMP_BLOCKTIME set none of its threads",
                                "none (Eigen's pool spins briefly, then sleeps)"))
    if cfg.cpus is not None:
        # The pools' threads bind to no CPU; the process mask confines them.
        na.append(NotApplicable("affinity", _affinity_name(s), "TensorFlow binds no pool "
                                "thread to a CPU",
                                "the process confined to its CPUs (the launch line)"))


def _torch(cfg: FrameworkConfig) -> None:
    from pyparbench.threading.omp import omp_wait_env  # noqa: PLC0415 (framework child: no native core)

    s = cfg.settings
    na = cfg.not_applicable
    fork = cfg.mode == "script" and s.scheduler == "async" and s.inter_op > 1
    cfg.knobs.update({"num_threads": s.intra_op, "num_interop_threads": s.inter_op,
                      "fork_branches": fork})
    if s.scheduler == "async" and cfg.mode != "script":
        na.append(NotApplicable(
            "scheduler", "async", f"torch {cfg.mode} mode runs ops in program order; "
            "parallel branches (torch.jit.fork) need the script mode",
            "TorchScript with torch.jit.fork on each parallel branch (the inter-op pool "
            "runs them)"))
    if s.library == "eigen":
        na.append(NotApplicable("library", "eigen", "PyTorch has no Eigen kernels; its "
                                "default (oneDNN convolutions, MKL matrix products) is used",
                                "torch.backends.mkldnn.enabled = True"))
        cfg.knobs["mkldnn"] = True
    else:
        cfg.knobs["mkldnn"] = s.library == "onednn"
    if s.precision == "bf16":  # bf16 runs on the onednn library only (Settings)
        cfg.knobs["bf16_mode"] = TORCH_BF16_MODE
    if s.operator != "library":
        na.append(NotApplicable("operator", s.operator, "PyTorch threads each op inside "
                                "its kernel (OpenMP); it never cuts an op into tasks",
                                f"operator=library on {s.intra_op} OpenMP threads"))
    if s.pool != "openmp":
        na.append(NotApplicable("pool", s.pool, "PyTorch's intra-op threads are an OpenMP "
                                "team (the pool library is fixed when PyTorch is built)",
                                f"an OpenMP team of {s.intra_op} (OMP_NUM_THREADS)"))
    # The intra-op count PyTorch (and MKL, oneDNN) start with, before set_num_threads.
    cfg.env["OMP_NUM_THREADS"] = str(s.intra_op)
    cfg.env.update(omp_wait_env(s.omp_wait))
    if cfg.mode == "compile":
        # Inductor's generated kernels then show in the profiler by name.
        cfg.env["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] = "1"
    if cfg.cpus is not None and s.inter_op == 1:
        # One OpenMP team: each thread on its own CPU, as the native executor pins.
        cfg.env["GOMP_CPU_AFFINITY"] = " ".join(str(c) for c in cfg.cpus[:s.intra_op])
        cfg.knobs["gomp_cpu_affinity"] = cfg.env["GOMP_CPU_AFFINITY"]
    elif cfg.cpus is not None:
        na.append(NotApplicable("affinity", _affinity_name(s), "each inter-op worker "
                                "starts its own OpenMP team, and one GOMP_CPU_AFFINITY list "
                                "would bind every team to the same CPUs",
                                "the process confined to its CPUs (the launch line)"))


def _onnxruntime(cfg: FrameworkConfig) -> None:
    s = cfg.settings
    na = cfg.not_applicable
    level = _LEVELS[cfg.mode]
    cfg.knobs.update({
        "intra_op_num_threads": s.intra_op, "inter_op_num_threads": s.inter_op,
        "execution_mode": "ORT_SEQUENTIAL" if s.scheduler == "sync" else "ORT_PARALLEL",
        "graph_optimization_level": level,
    })
    na.append(NotApplicable("library", s.library, "ONNX Runtime's CPU provider always runs "
                            "its MLAS kernels", "MLAS"))
    if s.operator != "framework":
        na.append(NotApplicable("operator", s.operator, "ONNX Runtime's kernels always "
                                "split their work on its intra-op pool",
                                f"operator=framework on intra_op_num_threads={s.intra_op}"))
    if s.pool != "eigen":
        na.append(NotApplicable("pool", s.pool, "ONNX Runtime always runs its own thread "
                                "pool (derived from Eigen's)", "ONNX Runtime's pool"))
    if s.omp_wait is not None:
        spin = not (s.omp_wait == "passive" or s.omp_wait == 0)
        cfg.knobs["session.intra_op.allow_spinning"] = "1" if spin else "0"
        cfg.knobs["session.inter_op.allow_spinning"] = "1" if spin else "0"
        if isinstance(s.omp_wait, int) and s.omp_wait > 0:
            na.append(NotApplicable("omp_wait", s.omp_wait, "ONNX Runtime spins or not; "
                                    "a spin count becomes spinning on",
                                    "session.intra_op.allow_spinning=1"))
    if cfg.cpus is not None and s.intra_op > 1:
        # The calling thread is the team's first member and keeps the process
        # mask; ORT numbers logical processors from 1.
        cfg.knobs["session.intra_op_thread_affinities"] = ";".join(
            str(c + 1) for c in cfg.cpus[1:s.intra_op])


def _openvino(cfg: FrameworkConfig) -> None:
    s = cfg.settings
    na = cfg.not_applicable
    # Streams are instances: _common's line about one copy does not hold here.
    na[:] = [n for n in na if n.knob != "instances"]
    cfg.knobs.update({"NUM_STREAMS": s.instances,
                      "INFERENCE_NUM_THREADS": s.instances * s.intra_op,
                      "ENABLE_CPU_PINNING": cfg.cpus is not None,
                      "ENABLE_HYPER_THREADING": s.smt})
    if cfg.mode != "auto":  # at bf16: bf16 (precision_mode); auto: OpenVINO's pick
        cfg.knobs["INFERENCE_PRECISION_HINT"] = cfg.mode
    if s.inter_op > 1 or s.scheduler == "async":
        na.append(NotApplicable(
            "inter_op", f"{s.scheduler} {s.inter_op}", "an OpenVINO stream runs its nodes "
            "one after another; parallel work is more streams (instances)",
            f"sync, one stream of INFERENCE_NUM_THREADS={s.intra_op}"))
    if s.library != "onednn" or s.operator != "library":
        na.append(NotApplicable("library", f"{s.operator}/{s.library}", "OpenVINO's CPU "
                                "plugin runs its own oneDNN kernels, each threaded inside",
                                "operator=library on oneDNN"))
    # No pool of pyparbench's is TBB.
    na.append(NotApplicable("pool", s.pool, "OpenVINO's threads are TBB's (its streams "
                            "executor)", f"TBB, INFERENCE_NUM_THREADS={s.instances * s.intra_op}"))
    if s.omp_wait is not None:
        na.append(NotApplicable("omp_wait", s.omp_wait, "OpenVINO runs on TBB, which has "
                                "no wait policy to set", "TBB's own (spin briefly, then sleep)"))


def _openmp(cfg: FrameworkConfig) -> None:
    """A plain OpenMP program: its environment only (any OpenMP runtime reads
    the OMP_ variables; GOMP_ ones are libgomp's, KMP_ ones the Intel / LLVM
    runtime's)."""
    from pyparbench.threading.omp import omp_wait_env  # noqa: PLC0415 (framework child: no native core)

    s = cfg.settings
    na = cfg.not_applicable
    if s.inter_op > 1:
        # Nested teams: the outer level runs the independent work (one thread
        # per worker), each of them an inner team of intra_op threads.
        cfg.env["OMP_NUM_THREADS"] = f"{s.inter_op},{s.intra_op}"
        cfg.env["OMP_MAX_ACTIVE_LEVELS"] = "2"
    else:
        cfg.env["OMP_NUM_THREADS"] = str(s.intra_op)
    if cfg.cpus is not None:
        # Places in placement order: spread hands each outer thread a block
        # of intra_op places (its worker's CPUs), close binds its team there.
        cfg.env["OMP_PLACES"] = ",".join(f"{{{c}}}" for c in cfg.cpus)
        cfg.env["OMP_PROC_BIND"] = "spread,close" if s.inter_op > 1 else "close"
    cfg.env.update(omp_wait_env(s.omp_wait))
    if isinstance(s.omp_wait, int) and not isinstance(s.omp_wait, bool):
        # The Intel / LLVM runtime counts milliseconds, not spins (see INTEL_SPINCOUNT).
        cfg.env["KMP_BLOCKTIME"] = str(round(s.omp_wait / INTEL_SPINCOUNT))
    if s.library != "onednn" or s.operator != "library":
        na.append(NotApplicable("library", f"{s.operator}/{s.library}", "the program's own "
                                "code decides how each op is computed and split",
                                "the program's parallel loops on the OpenMP team"))
    if s.pool != "openmp":
        na.append(NotApplicable("pool", s.pool, "an OpenMP program's threads are OpenMP's",
                                f"an OpenMP team of {s.intra_op}"))


def _affinity_name(s: Settings) -> str:
    return s.affinity if isinstance(s.affinity, str) else "explicit"


MAPPERS = {"tensorflow": _tensorflow, "torch": _torch, "onnxruntime": _onnxruntime,
           "openvino": _openvino}
_LEVELS = {"all": "ORT_ENABLE_ALL", "extended": "ORT_ENABLE_EXTENDED",
           "basic": "ORT_ENABLE_BASIC", "disabled": "ORT_DISABLE_ALL"}


def precision_mode(framework: str, mode: str | None, precision: str) -> str:
    """The framework's mode at the run's ``precision``: OpenVINO's mode is
    its inference precision, so at bf16 its f32 mode (the default) is bf16;
    every other mode is ``mode`` (None: the default).

    Raises
    ------
    ValueError
        An unknown framework or mode; OpenVINO's f16 mode at bf16 (two
        precisions asked for), or its auto mode at bf16 (OpenVINO's pick is
        f32 on a CPU without bf16: not a bf16 run).
    """
    mode = check_mode(framework, mode)
    if framework == "openvino" and precision == "bf16":
        if mode == "f16":
            raise ValueError("OpenVINO mode 'f16' is an inference precision of its own: "
                             "it does not run at precision 'bf16' (use mode f32 or bf16)")
        if mode == "auto":
            raise ValueError("OpenVINO mode 'auto' leaves the precision to OpenVINO (f32 on a "
                             "CPU without bf16): it does not run at precision 'bf16' (use "
                             "mode bf16, or auto at precision fp32)")
        return "bf16"
    return mode


def default_knobs(framework: str, mode: str | None = None) -> dict[str, Any]:
    """The knobs of a framework left at its own defaults: only what its
    ``mode`` says (how the model is built), no thread count, scheduler,
    spinning or affinity; the child then sets nothing and the process keeps
    every CPU (as a user's ``python serve.py`` with no setting).

    Raises
    ------
    ValueError
        An unknown framework or mode.
    """
    mode = check_mode(framework, mode)
    if framework == "tensorflow":
        return {"jit_compile": mode == "xla"}
    if framework == "torch":
        return {"fork_branches": False}
    if framework == "openvino":  # the precision, OpenVINO's pick only in mode auto
        return {} if mode == "auto" else {"INFERENCE_PRECISION_HINT": mode}
    return {"graph_optimization_level": _LEVELS[mode]}


def preset_knobs(name: str, mode: str | None = None) -> dict[str, Any]:
    """The knobs of OpenVINO's preset ``name`` (:data:`OPENVINO_PRESETS`) in
    ``mode`` (its precision): its hint and the precision, streams and
    threads left to its tuner; ``openvino-defaults``: no property at all.

    Raises
    ------
    ValueError
        An unknown preset or mode.
    """
    if name not in OPENVINO_PRESETS:
        raise ValueError(f"unknown OpenVINO preset {name!r}; valid: "
                         f"{', '.join(OPENVINO_PRESETS)}")
    hint = OPENVINO_PRESETS[name]
    if hint is None:
        return {}
    return {**default_knobs("openvino", mode), "PERFORMANCE_HINT": hint}


def map_settings(framework: str, settings: Settings, mode: str | None = None,
                 cpus: Sequence[int] | None = None) -> FrameworkConfig:
    """The framework's side of ``settings``.

    Parameters
    ----------
    framework, mode
        One of :data:`FRAMEWORKS` and one of its :data:`MODES` (None: the
        default); or ``"openmp"`` (a plain OpenMP program: its environment,
        mode ``"program"``).
    settings
        The requested settings.
    cpus
        The CPUs the child is confined to when the settings pin threads (in
        placement order: pool 0's first), None when not pinned.

    Raises
    ------
    ValueError
        An unknown framework or mode.
    TypeError
        ``settings`` is not a Settings.
    """
    if not isinstance(settings, Settings):
        raise TypeError(f"settings must be a pyparbench Settings, got {settings!r}")
    if framework == OPENMP:
        if mode not in (None, "program"):
            raise ValueError(f"an OpenMP program has one mode, 'program', got {mode!r}")
        mode = "program"
    else:
        mode = precision_mode(framework, mode, settings.precision)
    cfg = FrameworkConfig(framework, mode, settings, None if cpus is None else list(cpus))
    _common(cfg)
    (_openmp if framework == OPENMP else MAPPERS[framework])(cfg)
    return cfg
