"""pytest plugin: benchmark pyparbench kernels with pytest-benchmark.

Installed with pyparbench (entry point ``pytest11``: ``pyparbench``), or
loaded with ``-p pyparbench.pytest_plugin``. It gives:

* the machine fingerprint in every saved pytest-benchmark run:
  ``machine_info["pyparbench"]`` holds oneDNN's version, CPU runtime and
  ISA, the OpenMP runtime, the CPU model, the topology (sockets, NUMA nodes,
  cores, caches), the CPUs the process may use and the frequency governor,
  so that ``pyparbench compare`` can say how two machines differ;
* ``ppb_bench(kernel, *args, rounds=200, warmup=3)``: times a prepared
  kernel in its C++ loop (``kernel.timeit``) and records each run's time
  in the test's pytest-benchmark statistics, so no Python call overhead is
  in the figures; returns the per-run nanoseconds. The rounds run in
  blocks (10 of 20 runs by default), each its own warmed-up loop after a
  short pause, and ``extra_info["ppb_blocks"]`` records their run counts:
  ``pyparbench compare`` tests one process a side on the blocks (batch
  means, :mod:`pyparbench.compare.batch_means`);
* ``ppb_model(model, batch=1, settings=None, rounds=20, warmup=3)``: a
  model, built-in by name or a user's ONNX file by path, compiled once and
  timed whole under ``settings`` (default: one thread), each run recorded
  as ``ppb_bench`` records a kernel's, the model's name (an ONNX file's:
  ``my.onnx@<sha256[:12]>``) in ``extra_info["model"]``; returns the
  per-run nanoseconds; ``--ppb-precision fp32|bf16`` runs every such
  model at that precision (``Settings.precision``, over the settings'
  own) and records it in ``extra_info["precision"]``;
* ``ppb_pinned(*kernels)``: a ``with`` scope that pins the kernels' OpenMP
  team (compact placement over physical cores by default) and audits it:
  on leaving, the threads that ran are checked against the request, and a
  difference fails the test (``ThreadingMismatchError``);
* ``ppb_threads``: the thread count of the current test, parametrized over
  ``--ppb-threads 1,2,max`` or the test's ``@pytest.mark.ppb_threads(1, 2)``
  (the option wins, then the marker, then 1, 2, 4, ... up to the CPUs this
  process may use).

Example::

    import numpy as np, pyparbench as ppb

    def test_gemm(ppb_bench, ppb_pinned, ppb_threads):
        g = ppb.ops.Gemm(1024, 1024, 1024, threads=ppb_threads)
        a = np.random.rand(*g.a_shape).astype(np.float32)
        b = np.random.rand(*g.b_shape).astype(np.float32)
        out = np.empty(g.output_shape, np.float32)
        with ppb_pinned(g):
            ppb_bench(g, a, b, None, out)

pytest-benchmark has no public call for recording times measured
elsewhere; ``ppb_bench`` uses the fixture's ``_make_stats`` (present since
pytest-benchmark 3), the workaround given in ionelmc/pytest-benchmark#52,
an open request for such a call. Without pytest-benchmark installed the plugin
still loads, and ``ppb_bench`` skips its test.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pytest

from pyparbench.choices import PRECISIONS, check_precision
from pyparbench.executor import compile_graph
from pyparbench.machine.fingerprint import machine_fingerprint
from pyparbench.models import build, resolve
from pyparbench.settings import Settings
from pyparbench.threading.audit import audit
from pyparbench.threading.placement import place
from pyparbench.threading.topology import topology, topology_dict

if TYPE_CHECKING:
    import numpy.typing as npt

    from pyparbench.threading.audit import AuditReport

__all__ = ["KernelBench", "ModelBench", "ModelKernel", "PinnedTeam", "fingerprint", "pinned",
           "thread_counts"]

MARKER = "ppb_threads"
RUNS_PER_BLOCK = 4  # the default blocks: rounds // 4 of them, at most MAX_BLOCKS
# 200 runs in 10 blocks by default: on a shared 2-core VM, two processes of
# the same code were 5-26 % apart (sd of log medians over 4 runs of 32
# benchmarks) with 20 runs in 5 blocks, 2-13 % with 200 in 10; the same-code
# rows marked significant fell from 9.4 % to 5.2 % and a planted 1.5x was
# found in 97 % of rows instead of 54 % (bench/compare_gate.py pytest).
DEFAULT_ROUNDS = 200
MAX_BLOCKS = 10
PAUSE_S = 0.05  # between blocks: each meets the machine at another moment


class _Kernel(Protocol):
    """What ``ppb_bench`` and ``ppb_pinned`` need of a prepared kernel."""

    @property
    def threads(self) -> int: ...
    def timeit(self, *args: Any, repeats: int, warmup: int) -> npt.NDArray[np.float64]: ...


# -- options, markers, parametrization ----------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--ppb-threads`` and ``--ppb-precision``."""
    group = parser.getgroup("pyparbench")
    group.addoption("--ppb-precision", metavar="|".join(PRECISIONS), default=None,
                    help="the precision ppb_model runs models at (fp32 or bf16; default: "
                         "the settings' own, fp32 unless given)")
    group.addoption("--ppb-threads", metavar="LIST", default=None,
                    help="thread counts for tests using the ppb_threads fixture, e.g. 1,2,max "
                         "(max: the CPUs this process may use); overrides their marker")


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker; check ``--ppb-threads`` and ``--ppb-precision`` once."""
    config.addinivalue_line(
        "markers", f"{MARKER}(*counts): thread counts for the ppb_threads fixture of this test "
                   "(ints, or 'max' for the CPUs this process may use)")
    precision = config.getoption("--ppb-precision")
    if precision is not None:
        try:
            check_precision(precision)
        except ValueError as e:
            raise pytest.UsageError(f"--ppb-precision {precision}: {e}") from None
    text = config.getoption("--ppb-threads")
    if text is not None:
        # Checked once here, so a bad value is one usage error, not an error per test.
        try:
            thread_counts(text.split(","))
        except ValueError as e:
            raise pytest.UsageError(f"--ppb-threads {text}: {e}") from None


def _allowed_cpus() -> int:
    return len(os.sched_getaffinity(0))


def thread_counts(values: Sequence[object]) -> list[int]:
    """Thread counts from a marker's arguments or the option's comma-separated
    items: positive ints, or ``"max"`` (the CPUs this process may use);
    duplicates dropped, order kept.

    Raises
    ------
    ValueError
        An item that is neither, naming it.
    """
    out: list[int] = []
    for v in values:
        if isinstance(v, str):
            v = v.strip()
            n = _allowed_cpus() if v == "max" else (int(v) if v.isdigit() else None)
        elif isinstance(v, int) and not isinstance(v, bool):
            n = v
        else:
            n = None
        if n is None or n < 1:
            raise ValueError(f"thread counts are integers >= 1 or 'max', got {v!r}")
        if n not in out:
            out.append(n)
    if not out:
        raise ValueError("no thread counts given")
    return out


def _default_counts() -> list[int]:
    cpus = _allowed_cpus()
    counts = [1 << i for i in range(cpus.bit_length()) if 1 << i <= cpus]
    return counts if counts[-1] == cpus else [*counts, cpus]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize the ``ppb_threads`` fixture of each test that uses it."""
    if MARKER not in metafunc.fixturenames:
        return
    text = metafunc.config.getoption("--ppb-threads")
    marker = metafunc.definition.get_closest_marker(MARKER)
    if text is not None:
        counts = thread_counts(text.split(","))
    elif marker is not None:
        try:
            counts = thread_counts(marker.args)
        except ValueError as e:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: @pytest.mark.{MARKER}: "
                                    f"{e}") from None
    else:
        counts = _default_counts()
    metafunc.parametrize(MARKER, counts, ids=[f"t{n}" for n in counts], indirect=True)


@pytest.fixture
def ppb_threads(request: pytest.FixtureRequest) -> int:
    """The thread count of this test (see ``--ppb-threads`` and the marker)."""
    return int(request.param)


# -- the fingerprint --------------------------------------------------------------


def fingerprint() -> dict[str, Any]:
    """pyparbench's machine fingerprint with the topology, for machine_info."""
    return {**machine_fingerprint(), "topology": topology_dict(topology())}


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-benchmark, which may be absent
def pytest_benchmark_update_machine_info(config: pytest.Config,
                                         machine_info: dict[str, Any]) -> None:
    """Add pyparbench's fingerprint to a saved run's machine_info."""
    try:
        machine_info["pyparbench"] = fingerprint()
    except Exception as e:  # a broken install must not lose the user's whole run
        machine_info["pyparbench"] = {"error": f"{type(e).__name__}: {e}"}


# -- timing a kernel in its C++ loop ------------------------------------------------


class KernelBench:
    """``ppb_bench``: time a prepared kernel's C++ loop into pytest-benchmark."""

    def __init__(self, benchmark: Any) -> None:
        self.benchmark = benchmark

    def __call__(self, kernel: _Kernel, *args: Any, rounds: int = DEFAULT_ROUNDS,
                 warmup: int = 3, blocks: int | None = None, pause: float = PAUSE_S
                 ) -> npt.NDArray[np.float64]:
        """Run ``kernel.timeit(*args, repeats=n, warmup=warmup)`` for each of
        ``blocks`` blocks of the ``rounds`` (default ``rounds // 4``, from 1 to
        10), sleeping ``pause`` seconds between blocks, and record each run's
        time as one round of this test's benchmark; the blocks' run counts go
        to ``extra_info["ppb_blocks"]``.

        Returns
        -------
        numpy.ndarray
            Nanoseconds per run (one run with ``--benchmark-disable``).
        """
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"rounds must be an int >= 1, got {rounds!r}")
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
        if blocks is None:
            blocks = max(1, min(MAX_BLOCKS, rounds // RUNS_PER_BLOCK))
        if isinstance(blocks, bool) or not isinstance(blocks, int) or not 1 <= blocks <= rounds:
            raise ValueError(f"blocks must be an int from 1 to rounds ({rounds}), got {blocks!r}")
        if isinstance(pause, bool) or not isinstance(pause, (int, float)) or not pause >= 0:
            raise ValueError(f"pause must be a number of seconds >= 0, got {pause!r}")
        bench = self.benchmark
        if bench.disabled:
            # Smoke-test mode: one run through pytest-benchmark's own path.
            ns: npt.NDArray[np.float64] = bench.pedantic(
                kernel.timeit, args=args, kwargs={"repeats": 1, "warmup": 0})
            return ns
        if not hasattr(bench, "_make_stats"):
            raise RuntimeError("this pytest-benchmark has no _make_stats: ppb_bench needs "
                               "pytest-benchmark 3 to 5")
        if bench._mode:
            from pytest_benchmark.fixture import FixtureAlreadyUsed  # noqa: PLC0415 (optional: pytest-benchmark)

            bench.has_error = True
            raise FixtureAlreadyUsed(f"the benchmark fixture was already used in "
                                     f"{bench._mode} mode: one measurement per test")
        bench._mode = "ppb_bench(...)"
        sizes = [rounds // blocks + (i < rounds % blocks) for i in range(blocks)]
        try:
            parts = []
            for i, n in enumerate(sizes):
                if i and pause:
                    time.sleep(pause)
                parts.append(np.asarray(kernel.timeit(*args, repeats=n, warmup=warmup),
                                        dtype=np.float64))
            ns = np.concatenate(parts)
            stats = bench._make_stats(1)
            for t in ns:
                stats.update(float(t) * 1e-9)  # pytest-benchmark keeps seconds
        except Exception:
            bench.has_error = True
            raise
        info = bench.extra_info
        info["timer"] = "kernel.timeit (C++ loop, per run)"
        info["threads"] = int(kernel.threads)
        info["ppb_blocks"] = sizes
        cpus = getattr(kernel, "pinned_cpus", None)
        if cpus:
            info["pinned_cpus"] = list(cpus)
        flops = getattr(kernel, "flops", None)
        if isinstance(flops, (int, float)) and flops > 0:
            info["gflop"] = float(flops) / 1e9
            info["gflops_median"] = float(flops) / float(np.median(ns))
        return ns


@pytest.fixture
def ppb_bench(request: pytest.FixtureRequest) -> KernelBench:
    """Time a prepared kernel in its C++ loop: ``ppb_bench(kernel, *args)``."""
    return KernelBench(_benchmark(request, "ppb_bench"))


def _benchmark(request: pytest.FixtureRequest, fixture: str) -> Any:
    """pytest-benchmark's ``benchmark`` fixture; the test skipped without it."""
    try:
        return request.getfixturevalue("benchmark")
    except pytest.FixtureLookupError:
        pytest.skip(f"{fixture} needs pytest-benchmark (pip install pytest-benchmark)")


class ModelKernel:
    """A model compiled once under some settings, timed the way
    ``ppb_bench`` times a kernel: ``timeit(repeats=, warmup=)`` runs it whole."""

    def __init__(self, model: str, batch: int = 1, settings: Any = None) -> None:
        self.name = resolve(model)  # a file: refused here when it does not import
        self.graph = build(self.name, batch)
        self.settings = settings if settings is not None else Settings()
        if self.settings.instances != 1:
            raise ValueError(f"instances={self.settings.instances}: ppb_model runs one copy "
                             "of the model")
        self.flops = float(self.graph.flops)
        self._cg = compile_graph(self.graph)
        self._cg.set_inputs(self.graph.random_inputs())

    @property
    def threads(self) -> int:
        return int(self.settings.inter_op * self.settings.intra_op)

    def timeit(self, *args: Any, repeats: int, warmup: int) -> npt.NDArray[np.float64]:
        rec = self._cg.run(self.settings, repeats=repeats, warmup=warmup)
        return np.asarray(rec.ns, dtype=np.float64)


class ModelBench:
    """``ppb_model``: time a whole model (a name or an ONNX file) into pytest-benchmark."""

    def __init__(self, benchmark: Any, precision: str | None = None) -> None:
        self._bench = KernelBench(benchmark)
        self._precision = precision  # --ppb-precision, over the settings' own

    def __call__(self, model: str, batch: int = 1, settings: Any = None, *, rounds: int = 20,
                 warmup: int = 3) -> npt.NDArray[np.float64]:
        """Compile ``model`` at ``batch`` and record ``rounds`` runs of it
        under ``settings``; returns the per-run nanoseconds.

        Raises
        ------
        ValueError
            An unknown model, an ONNX file that does not import, bad counts.
        """
        if self._precision is not None:
            settings = (settings if settings is not None else Settings()).with_(
                precision=self._precision)
        kernel = ModelKernel(model, batch, settings)
        ns = self._bench(kernel, rounds=rounds, warmup=warmup)
        self._bench.benchmark.extra_info.update(
            {"model": kernel.name, "batch": batch, "settings": kernel.settings.label(),
             "precision": kernel.settings.precision,
             "timer": "CompiledGraph.run (whole model, per run)"})
        return ns


@pytest.fixture
def ppb_model(request: pytest.FixtureRequest) -> ModelBench:
    """Time a whole model: ``ppb_model("./my.onnx", batch=8, settings=...)``."""
    return ModelBench(_benchmark(request, "ppb_model"),
                      request.config.getoption("--ppb-precision"))


# -- pinning, checked by the audit ----------------------------------------------------


@dataclass
class PinnedTeam:
    """What ``ppb_pinned`` set up: the CPUs, and the audit filled in on leaving."""

    cpus: tuple[int, ...]
    report: AuditReport | None = None
    kernels: list[Any] = field(default_factory=list)


@contextmanager
def pinned(*kernels: Any, cpus: Sequence[int] | None = None, affinity: str = "compact",
           smt: bool = False, strict: bool = True) -> Iterator[PinnedTeam]:
    """Pin the kernels' OpenMP teams and audit what runs inside the block.

    Each kernel's team of ``kernel.threads`` threads goes on the first CPUs
    of one placement (``affinity`` over this machine's topology, or ``cpus``
    given); the kernels share them, as they run one after another. On
    leaving, the audit compares the threads that ran with the request, and
    the earlier pinning of each kernel is restored.

    Raises
    ------
    ThreadingMismatchError
        (``strict``) a kernel ran on other CPUs or with another team than
        requested, or did not run at all in the block.
    ValueError
        No kernels, or CPUs this process may not use.

    A team larger than the machine's physical cores (CPUs with ``smt``)
    skips the test: it cannot be pinned one thread per core.
    """
    if not kernels:
        raise ValueError("ppb_pinned needs at least one prepared kernel")
    threads = max(int(k.threads) for k in kernels)
    if cpus is None:
        try:
            chosen = place(topology(), affinity, 1, threads, smt=smt).pools[0]
        except ValueError as e:
            pytest.skip(f"cannot pin {threads} thread(s) here: {e}")
        if chosen is None:
            raise ValueError(f"affinity {affinity!r} does not pin; use compact or scatter")
        team = tuple(chosen)
    else:
        team = tuple(int(c) for c in cpus)
        if len(team) < threads:
            raise ValueError(f"{len(team)} CPUs given for a team of {threads} threads")
    before = [list(k.pinned_cpus) for k in kernels]
    try:
        for k in kernels:
            k.pin(list(team[:k.threads]))
        result = PinnedTeam(team, kernels=list(kernels))
        with audit(*kernels, strict=strict) as report:
            result.report = report
            yield result
    finally:
        for k, old in zip(kernels, before):
            if old:
                k.pin(old)
            else:
                k.unpin()


@pytest.fixture
def ppb_pinned() -> Callable[..., Any]:
    """``with ppb_pinned(kernel, ...) as team:`` pins and audits (see :func:`pinned`)."""
    return pinned
