"""The machine's measured ceilings and the roofline built on them.

:func:`measure_peak` times three native kernels (``pyparbench._core.peak``)
at 1..N threads, one thread per physical core, pinned in compact order:

* fp32 multiply-add throughput: every thread runs independent vector FMA
  chains of the widest ISA this CPU runs (AVX-512, AVX2, or 128-bit
  multiply + add), enough chains to cover the FMA latency;
* STREAM-triad bandwidth (``a = b + s * c``) over arrays well beyond the
  last-level cache;
* random-row gather bandwidth: embedding-bag work (sums of table rows drawn
  at random) on a table well beyond the last-level cache, the ceiling of
  ``embedding_bag``;
* where the CPU has them, the bf16 and int8 dot-product ceilings, each of
  the instruction :func:`pyparbench._core.peak.dot_instructions` names (AMX
  tiles where the CPU has them and the ISA cap allows, else AVX-512's; on
  aarch64 the better of BFMMLA and BFDOT, of SMMLA and SDOT, at one thread).

Each figure is the best of its repeats (a ceiling is what the machine can
do; interference only lowers a run), with the median beside it.

The theoretical FMA peak is threads x clock x pipes x lanes x 2. The clock
assumed is the highest of: ``/sys/.../cpufreq/cpuinfo_max_freq`` (the
highest clock the core may reach), the clock measured on a chain of
dependent integer adds (one per cycle on x86-64), and ``/proc/cpuinfo``'s
"cpu MHz" (the current clock, or a virtual machine's nominal one); which one
is said. Two FMA pipes per core are assumed (one multiply and one add pipe
for the generic kernel).

:meth:`Peak.ceiling` places an operator on the roofline: arithmetic
intensity (FLOPs per byte moved, as :attr:`pyparbench.graph.Graph.stats`
counts them), the ceiling that bounds it (compute, triad bandwidth x
intensity, or gather bandwidth for embedding bags) and the percentage of it
reached. :func:`pyparbench.harness.folder.load_or_measure` keeps one measurement per machine
fingerprint in a results folder, so the main job measures once.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pyparbench.choices import check_precision
from pyparbench.cpuinfo import cpuinfo_value, read_cpuinfo
from pyparbench.machine.cpu_features import cpu_model_name
from pyparbench.machine.fingerprint import fingerprint_id, machine_fingerprint
from pyparbench.settings import allowed_cores

__all__ = [
    "Ceiling",
    "Clock",
    "Peak",
    "PeakPoint",
    "assumed_clock",
    "compact_cpus",
    "fma_pipes",
    "measure_peak",
    "peak_cache_path",
    "thread_counts",
]

# FMA pipes per core assumed for the theoretical peak (Intel since Haswell,
# AMD since Zen 4 at 256 bits, Zen 5 at 512; aarch64: two 128-bit NEON pipes,
# as Neoverse N1 / N2 / N3, A64FX and AmpereOne have, unless NEON_FMA_PIPES
# names the core); the generic kernel's step is a multiply and an add, one
# pipe each.
FMA_PIPES = {"avx512": 2, "avx2": 2, "neon": 2, "generic": 1}
# aarch64 cores with four 128-bit FMA pipes (cpu_features.ARM_PARTS names).
NEON_FMA_PIPES = {"Neoverse V1": 4, "Neoverse V2": 4, "Neoverse V3": 4,
                  "M1 Firestorm": 4, "M2 Avalanche": 4}
# Threads on CPUs of their own reach about N times one thread's FMA rate; below
# this many times at N >= 2 they share FMA units (SMT siblings of one core, or
# a host placing the vCPUs on them for a while): measured again after a pause.
SHARED_FMA_SCALING = 1.2
SHARED_FMA_PAUSE_S = 1.0
# Table and arrays this many times the caches of the team, so DRAM is measured.
_BEYOND_LLC = 4
_MIN_ARRAY_BYTES = 64 << 20
# The dot-product ceilings measured beside the fp32 FMA one.
DOT_PRECISIONS = ("bf16", "int8")
# The instruction of each dot-product ceiling in a peak file written before
# the files named it: AVX-512's were the only ones measured.
_DOT_INSTRUCTIONS_BEFORE = {"bf16": "vdpbf16ps", "int8": "vpdpbusd"}
# The gather's rows: the DLRM benchmark's (dim 64, 100 lookups per bag).
GATHER_DIM = 64
GATHER_BAG = 100
_CPUFREQ_MAX = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")


@dataclass(frozen=True)
class Clock:
    """The clock the theoretical peak assumes, where it comes from, and
    every reading that was available (MHz by source)."""

    mhz: float
    source: str
    readings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PeakPoint:
    """The ceilings at one thread count (best run, and the median run)."""

    threads: int
    cpus: tuple[int, ...]
    fma_gflops: float
    fma_gflops_median: float
    theoretical_gflops: float
    triad_gbs: float
    triad_gbs_median: float
    gather_gbs: float
    gather_gbs_median: float
    # Dot-product ceilings (best run), a multiply-add counting 2 as in the
    # FMA's GFLOP/s: bf16 GFLOP/s (vdpbf16ps), int8 GOP/s (vpdpbusd); None
    # where not measured (Peak.dot_absent says why).
    bf16_gflops: float | None = None
    int8_gops: float | None = None

    @property
    def fma_fraction(self) -> float:
        """Measured FMA throughput over the theoretical peak."""
        return self.fma_gflops / self.theoretical_gflops

    def compute_gflops(self, precision: str = "fp32") -> float:
        """The compute ceiling of a run at ``precision`` (Settings.precision):
        the FMA's for fp32; for bf16 the bf16 dot products' where measured,
        for int8 the int8 dot products' (GOP/s), else the FMA's (a CPU
        without such dot products emulates them with fp32 multiply-adds or
        narrower integer ones). ValueError naming an unknown precision."""
        check_precision(precision)
        if precision == "bf16" and self.bf16_gflops is not None:
            return self.bf16_gflops
        if precision == "int8" and self.int8_gops is not None:
            return self.int8_gops
        return self.fma_gflops


@dataclass(frozen=True)
class Ceiling:
    """Where one operator measurement sits on the roofline.

    ``bound`` is "compute" (the FMA ceiling), "memory" (triad bandwidth x
    intensity) or "gather" (the random-row gather bandwidth, for embedding
    bags); ``ceiling`` is that bound in GFLOP/s (compute, memory) or GB/s
    (gather), ``percent`` the share of it reached.
    """

    intensity: float
    gflops: float
    gbs: float
    bound: str
    ceiling: float
    unit: str
    percent: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Peak:
    """A ceiling measurement of this machine (see the module docstring)."""

    isa: str
    lanes: int
    fused: bool
    chains: int
    fma_pipes: int
    clock: Clock
    measured_clock_mhz: float
    points: tuple[PeakPoint, ...]
    triad_array_bytes: int
    gather_table_bytes: int
    gather_dim: int
    gather_bag: int
    llc_bytes: int
    fingerprint: dict[str, Any]
    measured_at: str
    seconds: float
    # Why the FMA ceilings may not hold (see SHARED_FMA_SCALING); "" when they do.
    fma_warning: str = ""
    # Why a dot-product ceiling ("bf16", "int8") was not measured, naming the
    # CPU flag it needs; a precision measured is not in it.
    dot_absent: dict[str, str] = field(default_factory=dict)
    # The instruction each measured dot-product ceiling is of ("tdpbf16ps",
    # "vdpbf16ps", "bfmmla", ...; see dot_instructions), by precision.
    dot_instructions: dict[str, str] = field(default_factory=dict)

    @property
    def flops_per_cycle(self) -> int:
        """FLOPs one core can start per cycle, as the theoretical peak assumes."""
        return self.fma_pipes * self.lanes * 2

    @property
    def fma_ops_per_cycle(self) -> float:
        """Vector multiply-adds per cycle one thread reached, at the measured
        clock (0.0 when the clock could not be measured)."""
        if not self.measured_clock_mhz:
            return 0.0
        one = self.point(1)
        return one.fma_gflops * 1e3 / (self.measured_clock_mhz * self.lanes * 2)

    def point(self, threads: int) -> PeakPoint:
        """The ceilings for ``threads`` threads: the largest measured count
        not above it (the smallest measured one below all of them)."""
        below = [p for p in self.points if p.threads <= threads]
        return below[-1] if below else self.points[0]

    def ceiling(self, op: str, flops: float, nbytes: float, seconds: float,
                threads: int) -> Ceiling:
        """Place one measured operator run on the roofline.

        ``flops`` and ``nbytes`` are the op's work and compulsory traffic
        (``Graph.stats`` conventions), ``seconds`` its duration, ``threads``
        the threads that ran it. An ``embedding_bag`` is bounded by the
        gather bandwidth; any other op by min(FMA peak, intensity x triad
        bandwidth).
        """
        if seconds <= 0 or nbytes <= 0:
            raise ValueError(f"seconds and bytes must be > 0, got {seconds} and {nbytes}")
        p = self.point(threads)
        intensity = flops / nbytes
        gflops = flops / seconds / 1e9
        gbs = nbytes / seconds / 1e9
        if op == "embedding_bag":
            return Ceiling(intensity, gflops, gbs, "gather", p.gather_gbs, "GB/s",
                           100.0 * gbs / p.gather_gbs)
        memory = intensity * p.triad_gbs
        if memory < p.fma_gflops:
            return Ceiling(intensity, gflops, gbs, "memory", memory, "GFLOP/s",
                           100.0 * gflops / memory)
        return Ceiling(intensity, gflops, gbs, "compute", p.fma_gflops, "GFLOP/s",
                       100.0 * gflops / p.fma_gflops)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["flops_per_cycle"] = self.flops_per_cycle
        d["fma_ops_per_cycle"] = self.fma_ops_per_cycle
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Peak:
        points = tuple(PeakPoint(**{**p, "cpus": tuple(p["cpus"])}) for p in d["points"])
        names = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in d.items() if k in names}
        kw["clock"] = Clock(**d["clock"])
        kw["points"] = points
        if "dot_instructions" not in d:
            measured = {"bf16": any(p.bf16_gflops is not None for p in points),
                        "int8": any(p.int8_gops is not None for p in points)}
            kw["dot_instructions"] = {prec: name for prec, name in
                                      _DOT_INSTRUCTIONS_BEFORE.items() if measured[prec]}
        return cls(**kw)


def thread_counts(n: int) -> list[int]:
    """Thread counts to measure up to ``n``: every one up to 8, then about
    1.5x apart, and ``n`` itself."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    out = list(range(1, min(n, 8) + 1))
    t = 8
    while t < n:
        t = int(t * 1.5)
        out.append(min(t, n))
    return sorted(set(out))


def _read_cpuinfo_mhz() -> float | None:
    mhz = cpuinfo_value(read_cpuinfo(), "cpu MHz")
    try:
        return float(mhz) if mhz is not None else None
    except ValueError:
        return None


def _read_cpufreq_max_mhz() -> float | None:
    try:
        return int(_CPUFREQ_MAX.read_text().strip()) / 1e3  # kHz
    except (OSError, ValueError):
        return None


def assumed_clock(measured_mhz: float = 0.0) -> Clock:
    """The clock for the theoretical peak: the highest of the cpufreq maximum,
    the measured clock and /proc/cpuinfo's "cpu MHz" (see the module docstring)."""
    readings: dict[str, float] = {}
    sysfs = _read_cpufreq_max_mhz()
    if sysfs:
        readings["sysfs cpuinfo_max_freq"] = sysfs
    if measured_mhz > 0:
        readings["measured (dependent-add chain)"] = measured_mhz
    cpuinfo = _read_cpuinfo_mhz()
    if cpuinfo:
        readings["/proc/cpuinfo cpu MHz"] = cpuinfo
    if not readings:
        raise RuntimeError("no clock reading: no cpufreq, no /proc/cpuinfo 'cpu MHz', and the "
                           "clock cannot be measured on this architecture")
    source = max(readings, key=lambda k: readings[k])
    return Clock(readings[source], source, readings)


def compact_cpus(threads: int) -> tuple[int, ...]:
    """One CPU per physical core, compact order (no SMT sibling shares a core)."""
    from pyparbench.threading.placement import place  # noqa: PLC0415 (framework child: no native core)
    from pyparbench.threading.topology import topology  # noqa: PLC0415 (framework child: no native core)

    placement = place(topology(), "compact", 1, threads, smt=False)
    return tuple(placement.pools[0] or ())


def _rate(work: float, ns: np.ndarray) -> tuple[float, float]:
    """(best, median) rate in units of work per ns (GFLOP/s or GB/s)."""
    return work / float(np.min(ns)), work / float(np.median(ns))


def _calibrate_fma(isa: str, cpus: Sequence[int], target_s: float) -> int:
    """Iterations that make one single-thread FMA run last about ``target_s``."""
    from pyparbench._core import peak as _p  # noqa: PLC0415 (framework child: no native core)

    iters = 100_000
    while True:
        ns, _ = _p.time_fma(1, iters, repeats=1, warmup=1, isa=isa, cpus=list(cpus[:1]))
        if ns[0] > 2e6 or iters >= 1 << 34:
            return max(1, int(iters * target_s * 1e9 / ns[0]))
        iters *= 8


def _calibrate_dot(precision: str, cpus: Sequence[int], target_s: float,
                   instruction: str = "") -> int:
    """Iterations that make one single-thread dot-product run of
    ``instruction`` ("" the first of the precision's) last about ``target_s``."""
    from pyparbench._core import peak as _p  # noqa: PLC0415 (framework child: no native core)

    iters = 1_000
    while True:
        ns, _ = _p.time_dot(precision, 1, iters, repeats=1, warmup=1, cpus=list(cpus[:1]),
                            instruction=instruction)
        if ns[0] > 2e6 or iters >= 1 << 34:
            return max(1, int(iters * target_s * 1e9 / ns[0]))
        iters *= 8


def _best_dot_instruction(precision: str, cpus: Sequence[int], target_s: float,
                          repeats: int) -> tuple[str, int]:
    """The instruction of ``precision``'s ceiling, the fastest at one thread of
    those this CPU has (:func:`pyparbench._core.peak.dot_instructions`), and
    its calibrated iterations."""
    from pyparbench._core import peak as _p  # noqa: PLC0415 (framework child: no native core)

    names = list(_p.dot_instructions(precision))
    if len(names) == 1:
        return names[0], _calibrate_dot(precision, cpus, target_s, names[0])
    rated = []
    for name in names:
        n = _calibrate_dot(precision, cpus, target_s, name)
        ns, ops = _p.time_dot(precision, 1, n, repeats=repeats, warmup=1, cpus=list(cpus[:1]),
                              instruction=name)
        rated.append((_rate(ops, ns)[0], name, n))
    _, name, n = max(rated)
    return name, n


def measure_peak(threads: Sequence[int] | None = None, *, isa: str = "",
                 repeats: int = 10, quick: bool = False) -> Peak:
    """Measure the ceilings at each thread count (default: :func:`thread_counts`
    up to the physical cores this process may use).

    ``isa``: the FMA kernel's ISA ("" the widest this CPU runs).
    ``quick``: fewer repeats and shorter runs (a few seconds on a small machine).

    Raises
    ------
    ValueError
        A thread count below 1 or above the physical cores available, or an
        ISA this CPU does not run.
    """
    from pyparbench._core import peak as _p  # noqa: PLC0415 (framework child: no native core)
    from pyparbench.threading.topology import topology  # noqa: PLC0415 (framework child: no native core)

    started = time.perf_counter()
    topo = topology()
    cores = allowed_cores(topo)
    counts = list(threads) if threads is not None else thread_counts(cores)
    bad = [t for t in counts if t < 1 or t > cores]
    if bad:
        raise ValueError(f"thread counts must be within 1..{cores} (the physical cores this "
                         f"process may use), got {bad}")
    kernel = _p.fma_kernel(isa)
    if quick:
        repeats = max(3, repeats // 2)
    from pyparbench.threading.cache_share import team_cache_bytes  # noqa: PLC0415 (framework child: no native core)

    # The caches of the widest team measured, taken whole even in a VM: the
    # arrays must be beyond whatever the hardware could keep of them.
    llc = team_cache_bytes(topo, compact_cpus(max(counts)), under_hypervisor=False)
    array_bytes = max(_BEYOND_LLC * llc, _MIN_ARRAY_BYTES)
    table_bytes = 2 * array_bytes
    elements = array_bytes // 4
    rows = table_bytes // (GATHER_DIM * 4)
    # About 128 MiB (quick: 64 MiB) of gathered rows per run.
    bags = (64 if quick else 128) * 1024 * 1024 // (GATHER_DIM * 4 * GATHER_BAG + 8 * GATHER_BAG)
    # Many short rounds: the best is one no other process interrupted.
    measured_mhz = float(_p.clock_mhz(2_000_000, 20 if quick else 50))
    # Many short FMA runs: the best one is the one no other process interrupted.
    iters = _calibrate_fma(kernel["isa"], compact_cpus(1), 0.002 if quick else 0.003)
    # The dot-product ceilings this CPU has, and why the others are absent.
    dot_absent = {p: why for p in DOT_PRECISIONS if (why := _p.dot_unavailable(p))}
    dot_kernels = {p: _best_dot_instruction(p, compact_cpus(1), 0.002 if quick else 0.003,
                                            repeats)
                   for p in DOT_PRECISIONS if p not in dot_absent}
    points = []
    one_thread = 0.0
    shared: list[str] = []
    for t in sorted(set(counts)):
        cpus = compact_cpus(t)

        def fma() -> tuple[float, float]:
            ns, flops = _p.time_fma(t, iters, repeats=6 * repeats, warmup=2, isa=kernel["isa"],
                                    cpus=list(cpus))
            return _rate(flops, ns)

        fma_best, fma_med = fma()
        if t == 1:
            one_thread = fma_best
        elif fma_best < SHARED_FMA_SCALING * one_thread:
            time.sleep(SHARED_FMA_PAUSE_S)
            fma_best, fma_med = max((fma_best, fma_med), fma())
            if fma_best < SHARED_FMA_SCALING * one_thread:
                shared.append(f"{t} threads reached {fma_best / one_thread:.2f}x one "
                              f"thread's rate")
        ns, nbytes = _p.time_triad(t, elements, repeats=2 * repeats, warmup=1, cpus=list(cpus))
        triad_best, triad_med = _rate(nbytes, ns)
        ns, nbytes = _p.time_gather(t, rows, GATHER_DIM, max(bags, t), GATHER_BAG,
                                    repeats=2 * repeats, warmup=1, cpus=list(cpus), seed=t)
        gather_best, gather_med = _rate(nbytes, ns)
        dots: dict[str, float | None] = dict.fromkeys(DOT_PRECISIONS)
        for prec, (name, n) in dot_kernels.items():
            ns, ops = _p.time_dot(prec, t, n, repeats=6 * repeats, warmup=2, cpus=list(cpus),
                                  instruction=name)
            dots[prec] = _rate(ops, ns)[0]
        points.append((t, cpus, fma_best, fma_med, triad_best, triad_med, gather_best,
                       gather_med, dots["bf16"], dots["int8"]))
    clock = assumed_clock(measured_mhz)
    pipes = fma_pipes(kernel["isa"], cpu_model_name(arch=platform.machine()))
    per_core = clock.mhz * 1e-3 * pipes * kernel["lanes"] * 2
    return Peak(
        isa=kernel["isa"], lanes=int(kernel["lanes"]), fused=bool(kernel["fused"]),
        chains=int(kernel["chains"]), fma_pipes=pipes, clock=clock,
        measured_clock_mhz=measured_mhz,
        points=tuple(PeakPoint(t, cpus, fb, fm, t * per_core, tb, tm, gb, gm, bf, i8)
                     for (t, cpus, fb, fm, tb, tm, gb, gm, bf, i8) in points),
        triad_array_bytes=int(array_bytes), gather_table_bytes=int(rows * GATHER_DIM * 4),
        gather_dim=GATHER_DIM, gather_bag=GATHER_BAG, llc_bytes=int(llc),
        fingerprint=machine_fingerprint(), measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        seconds=time.perf_counter() - started, fma_warning=_shared_fma_warning(shared),
        dot_absent=dot_absent,
        dot_instructions={p: name for p, (name, _) in dot_kernels.items()})


def fma_pipes(isa: str, model: str) -> int:
    """FMA pipes per core the theoretical peak assumes for the FMA kernel of
    ``isa`` on a CPU named ``model`` (:func:`~pyparbench.machine.cpu_features.cpu_model_name`)."""
    if isa == "neon":
        for core, pipes in NEON_FMA_PIPES.items():
            if model.endswith(core):
                return pipes
    return FMA_PIPES[isa]


def _shared_fma_warning(found: Sequence[str]) -> str:
    """What the ceilings say when threads on CPUs of their own did not add FMA
    throughput, measured twice (``found``: one line per thread count)."""
    if not found:
        return ""
    return (f"CPUs sharing FMA units: {'; '.join(found)}, measured twice "
            f"{SHARED_FMA_PAUSE_S:g} s apart (SMT siblings of one core, or a host placing "
            "the virtual CPUs on them): FMA ceilings and '% of peak' figures at those "
            "thread counts may not hold")


def peak_cache_path(directory: str | Path, fingerprint: dict[str, Any] | None = None) -> Path:
    """Where :func:`pyparbench.harness.folder.load_or_measure` keeps this
    machine's ceilings in ``directory``."""
    if fingerprint is None:
        fingerprint = machine_fingerprint()
    return Path(directory) / f"peak-{fingerprint_id(fingerprint)}.json"
