"""The machine's ceilings (`pyparbench peak`): native kernels, the
theoretical peak beside the measured one, the roofline placement, the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from pyparbench._core import peak as native
from pyparbench.cli.info import _precisions as info_precisions
from pyparbench.cli.peak import peak_renderable
from pyparbench.machine import peak as peak_mod
from pyparbench.harness.folder import load_or_measure
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.machine.peak import (
    Clock,
    Peak,
    PeakPoint,
    assumed_clock,
    compact_cpus,
    peak_cache_path,
    thread_counts,
)
from pyparbench.resultfiles.measurements import read_peak_file

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow


def _peak_json(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "peak", "--json", "--quick",
                          *args], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def _holds(values: list[float], tolerance: float = 0.6) -> bool:
    """Each value at least ``tolerance`` of the best one at fewer threads
    (bandwidth rises or holds with threads, up to noise)."""
    return all(v >= tolerance * max(values[:i]) for i, v in enumerate(values) if i)


def test_peak_json_measures_every_thread_count_near_the_theoretical_peak() -> None:
    data = _peak_json()
    points = data["points"]
    assert [p["threads"] for p in points] == thread_counts(len(points[-1]["cpus"]))
    for p in points:
        # Measured FMA throughput within a sane band of what the ISA and clock allow.
        assert 0.05 <= p["fma_gflops"] / p["theoretical_gflops"] <= 1.5, p
        assert p["triad_gbs"] > 0 and p["gather_gbs"] > 0
        assert len(p["cpus"]) == p["threads"] == len(set(p["cpus"]))
    if not (_holds([p["triad_gbs"] for p in points])
            and _holds([p["gather_gbs"] for p in points])):
        # Another process took the cores during the first measurement: once more.
        points = _peak_json()["points"]
    assert _holds([p["triad_gbs"] for p in points]), points
    assert _holds([p["gather_gbs"] for p in points]), points
    clock = data["clock"]
    assert clock["source"] in clock["readings"]
    assert clock["mhz"] == max(clock["readings"].values())
    assert data["isa"] == native.isas()[0]


def test_peak_table_says_the_isa_and_the_clock_it_assumes() -> None:
    out = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "peak", "--quick"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert f"ISA: {native.isas()[0]}" in out.stdout
    assert "clock assumed:" in out.stdout and "MHz from" in out.stdout
    assert "FMA GFLOP/s" in out.stdout and "gather GB/s" in out.stdout


def test_the_isa_matches_the_cpu_flags() -> None:
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    isas = native.isas()
    assert isas[-1] == "generic"
    assert ("avx512" in isas) == ({"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags)
    assert ("avx2" in isas) == ({"avx2", "fma"} <= flags)


# Every ISA the FMA kernel is built for anywhere: those this CPU does not run
# (native.isas(), from its features) are skipped, naming the ISA.
@pytest.mark.aarch64
@pytest.mark.parametrize("isa", ["avx512", "avx2", "neon", "generic"])
def test_fma_work_is_counted_from_the_kernel_shape(isa: str) -> None:
    if isa not in native.isas():
        pytest.skip(f"this CPU does not run the {isa} FMA kernel (it runs "
                    f"{', '.join(native.isas())})")
    k = native.fma_kernel(isa)
    ns, flops = native.time_fma(1, 1000, repeats=2, isa=isa)
    assert flops == 2 * k["lanes"] * k["chains"] * 1000
    assert len(ns) == 2 and np.all(ns > 0)


@pytest.mark.aarch64
def test_triad_and_gather_count_bytes_as_documented() -> None:
    ns, nbytes = native.time_triad(1, 1 << 16, repeats=2)
    assert nbytes == 3 * 4 * (1 << 16) and np.all(ns > 0)
    ns, nbytes = native.time_gather(1, 1000, 16, 10, 4, repeats=2)
    # Gathered rows and their int64 indices, and the output written.
    assert nbytes == 40 * (16 * 4 + 8) + 10 * 16 * 4 and np.all(ns > 0)


@pytest.mark.aarch64
def test_bad_arguments_raise_value_errors() -> None:
    with pytest.raises(ValueError, match="isa 'sse9' is not one this CPU runs"):
        native.fma_kernel("sse9")
    with pytest.raises(ValueError, match="threads"):
        native.time_fma(0, 10)
    with pytest.raises(ValueError, match="cpus lists 1 CPUs for 2 threads"):
        native.time_triad(2, 1 << 10, cpus=[0])
    with pytest.raises(ValueError, match="bag"):
        native.time_gather(1, 10, 4, 2, 0)


def test_the_clock_chain_measures_a_plausible_clock() -> None:
    mhz = native.clock_mhz(1_000_000, 5)
    assert 200 < mhz < 8000


@pytest.mark.parametrize("sysfs, cpuinfo", [
    (3700.0, 2100.0),  # bare metal: cpufreq's maximum above the current clock
    (None, 2100.0),  # a VM: no cpufreq
    (None, None),  # no reading but the measured one
])
def test_the_assumed_clock_is_the_highest_reading_and_says_which(
        monkeypatch: pytest.MonkeyPatch, sysfs: float | None, cpuinfo: float | None) -> None:
    # The readings are set here, not read from this machine (a VM has no
    # cpufreq; its /proc/cpuinfo may say anything).
    import pyparbench.machine.peak as peak_mod

    monkeypatch.setattr(peak_mod, "_read_cpufreq_max_mhz", lambda: sysfs)
    monkeypatch.setattr(peak_mod, "_read_cpuinfo_mhz", lambda: cpuinfo)
    read = {k: v for k, v in (("sysfs cpuinfo_max_freq", sysfs),
                              ("/proc/cpuinfo cpu MHz", cpuinfo)) if v}
    c = assumed_clock(measured_mhz=1e6)  # higher than any reading
    assert c.mhz == 1e6 and c.source == "measured (dependent-add chain)"
    assert c.readings == {**read, "measured (dependent-add chain)": 1e6}
    c = assumed_clock(measured_mhz=3000.0)
    want = max({**read, "measured (dependent-add chain)": 3000.0}.items(), key=lambda kv: kv[1])
    assert (c.source, c.mhz) == want
    if read:
        c = assumed_clock()
        assert c.readings == read and (c.source, c.mhz) == max(read.items(),
                                                                key=lambda kv: kv[1])
    else:
        with pytest.raises(RuntimeError, match="no clock reading"):
            assumed_clock()


def _synthetic_peak() -> Peak:
    point = PeakPoint(threads=1, cpus=(0,), fma_gflops=100.0, fma_gflops_median=90.0,
                      theoretical_gflops=128.0, triad_gbs=10.0, triad_gbs_median=9.0,
                      gather_gbs=5.0, gather_gbs_median=4.0)
    two = PeakPoint(threads=2, cpus=(0, 1), fma_gflops=200.0, fma_gflops_median=180.0,
                    theoretical_gflops=256.0, triad_gbs=16.0, triad_gbs_median=15.0,
                    gather_gbs=8.0, gather_gbs_median=7.0)
    return Peak(isa="avx2", lanes=8, fused=True, chains=12, fma_pipes=2,
                clock=Clock(4000.0, "x", {"x": 4000.0}), measured_clock_mhz=4000.0,
                points=(point, two), triad_array_bytes=1, gather_table_bytes=1, gather_dim=64,
                gather_bag=100, llc_bytes=1, fingerprint={}, measured_at="", seconds=0.0)


def test_an_op_is_placed_under_the_ceiling_that_bounds_it() -> None:
    peak = _synthetic_peak()
    # 100 FLOP/B: compute-bound at 2 threads (100 * 16 GB/s > 200 GFLOP/s).
    c = peak.ceiling("conv2d", flops=1e9, nbytes=1e7, seconds=0.01, threads=2)
    assert (c.bound, c.ceiling, c.unit) == ("compute", 200.0, "GFLOP/s")
    assert c.gflops == pytest.approx(100.0) and c.percent == pytest.approx(50.0)
    # 1 FLOP/B: memory-bound, ceiling intensity x triad.
    c = peak.ceiling("linear", flops=1e8, nbytes=1e8, seconds=0.01, threads=1)
    assert (c.bound, c.ceiling) == ("memory", 10.0) and c.percent == pytest.approx(100.0)
    # An embedding bag against the gather bandwidth, in GB/s.
    c = peak.ceiling("embedding_bag", flops=1e6, nbytes=4e7, seconds=0.01, threads=2)
    assert (c.bound, c.unit, c.ceiling) == ("gather", "GB/s", 8.0)
    assert c.gbs == pytest.approx(4.0) and c.percent == pytest.approx(50.0)
    # More threads than measured: the largest measured count.
    assert peak.point(64).threads == 2
    assert Peak.from_dict(json.loads(json.dumps(peak.as_dict()))) == peak


def test_the_measurement_is_cached_per_machine(tmp_path: Path) -> None:
    first, cached = load_or_measure(tmp_path, quick=True)
    assert not cached and peak_cache_path(tmp_path).exists()
    again, cached = load_or_measure(tmp_path, quick=True)
    assert cached and again == first
    fresh, cached = load_or_measure(tmp_path, quick=True, remeasure=True)
    assert not cached and fresh.measured_at >= first.measured_at


@pytest.mark.parametrize("rates, warned", [
    ({1: [100.0], 2: [190.0]}, False),  # each thread on a core of its own
    ({1: [100.0], 2: [104.0, 103.0]}, True),  # two CPUs, one core's FMA units, twice
    ({1: [100.0], 2: [104.0, 195.0]}, False),  # a passing spell: measured again, it holds
])
def test_cpus_sharing_fma_units_are_measured_again_then_flagged(
        monkeypatch: pytest.MonkeyPatch, rates: dict[int, list[float]], warned: bool) -> None:
    """N threads below 1.2x one thread's FMA rate: measured again after a
    pause; a figure that stays low is kept and flagged, in the peak file too."""
    import pyparbench.machine.peak as peak_mod

    calls: dict[int, int] = {}

    def fake_fma(threads: int, iters: int, **kw: Any) -> tuple[np.ndarray, float]:
        i = calls.get(threads, 0)
        calls[threads] = i + 1
        rate = rates[threads][min(i, len(rates[threads]) - 1)]
        return np.full(4, 1e6), rate * 1e6  # flops / ns = GFLOP/s

    # A synthetic machine of two cores (whatever this one has) and no real
    # measurement: the FMA rates above, any bandwidth and clock.
    import importlib

    topology_mod = importlib.import_module("pyparbench.threading.topology")
    two_cores = topology_mod.topology("package:1 core:2 pu:1")
    real_topology = topology_mod.topology
    monkeypatch.setattr(topology_mod, "topology",
                        lambda synthetic=None: two_cores if synthetic is None
                        else real_topology(synthetic))
    assert compact_cpus(2) == (0, 1)
    monkeypatch.setattr(native, "time_fma", fake_fma)
    monkeypatch.setattr(native, "time_triad", lambda *a, **kw: (np.full(4, 1e6), 1e6))
    monkeypatch.setattr(native, "time_gather", lambda *a, **kw: (np.full(4, 1e6), 1e6))
    monkeypatch.setattr(native, "clock_mhz", lambda *a: 3000.0)
    monkeypatch.setattr(peak_mod, "_calibrate_fma", lambda *a: 1)
    monkeypatch.setattr(peak_mod, "SHARED_FMA_PAUSE_S", 0.0)
    peak = peak_mod.measure_peak([1, 2], quick=True, repeats=3)
    two = peak.point(2)
    assert two.fma_gflops == pytest.approx(max(rates[2]))
    assert calls[2] == (1 if rates[2][0] >= 120.0 else 2)
    assert bool(peak.fma_warning) is warned
    if warned:
        assert "CPUs sharing FMA units: 2 threads reached 1.04x" in peak.fma_warning
        assert Peak.from_dict(json.loads(json.dumps(peak.as_dict()))).fma_warning == \
            peak.fma_warning


# Each dot-product instruction: its precision, the CPU flags it needs
# (besides x86's AVX-512 tier for the vector ones), its operations (a
# multiply-add counting 2, from the instruction's definition), and the
# instructions of one round of its kernel (16 vector chains, 4 AMX tiles).
DOT_INSTRUCTIONS = {
    "tdpbf16ps": ("bf16", ("amx_tile", "amx_bf16"), 2 * 16 * 16 * 32, 4),
    "tdpbusd": ("int8", ("amx_tile", "amx_int8"), 2 * 16 * 16 * 64, 4),
    "vdpbf16ps": ("bf16", ("avx512_bf16",), 2 * 16 * 2, 16),
    "vpdpbusd": ("int8", ("avx512_vnni",), 2 * 16 * 4, 16),
    "bfmmla": ("bf16", ("bf16",), 2 * 2 * 2 * 4, 16),
    "bfdot": ("bf16", ("bf16",), 2 * 4 * 2, 16),
    "smmla": ("int8", ("i8mm",), 2 * 2 * 2 * 8, 16),
    "sdot": ("int8", ("dotprod",), 2 * 4 * 4, 16),
}


def _exact_dot_result(instruction: str, n: int) -> float:
    """The sum of a kernel's accumulators after n rounds, from its operands
    (bf16 2^-10, int8 1): vector chain c starts at c in every lane, AMX tiles
    at 0; each output element gains its products' sum a round."""
    if instruction.startswith("tdp"):
        per_element = 32 * 2.0**-20 if instruction == "tdpbf16ps" else 64
        return 4 * 256 * per_element * n
    lanes = 16 if instruction.startswith("v") else 4
    _, _, ops, _ = DOT_INSTRUCTIONS[instruction]
    # Products per output lane a round: the instruction's multiply-adds over
    # its lanes; each product is 2^-20 (bf16) or 1 (int8).
    products = ops // 2 // lanes
    value = 2.0**-20 if DOT_INSTRUCTIONS[instruction][0] == "bf16" else 1
    return lanes * sum(range(16)) + 16 * lanes * products * value * n


@pytest.mark.aarch64
@pytest.mark.parametrize("instruction", sorted(DOT_INSTRUCTIONS))
def test_each_dot_kernel_counts_its_work_and_computes_the_exact_sum(instruction: str) -> None:
    """Where the CPU runs the instruction (else skipped, naming the flags),
    its kernel's work counts a multiply-add as 2 per the instruction's
    definition, and one run's accumulators sum to the exact value."""
    precision, flags, ops, per_round = DOT_INSTRUCTIONS[instruction]
    if instruction not in native.dot_instructions(precision):
        cpu = cpu_features()
        missing = [f for f in flags if f not in cpu["flags"]]
        pytest.skip(f"this CPU does not run {instruction} (flags missing: "
                    f"{', '.join(missing) or 'none, but the ISA cap or Linux turned it off'})")
    assert native.dot_instruction_ops(instruction) == ops
    ns, work = native.time_dot(precision, 2, 100, repeats=2, instruction=instruction)
    assert work == ops * per_round * 100 * 2 and len(ns) == 2 and np.all(ns > 0)
    for n in (1, 1000):
        assert native.dot_result(instruction, n) == _exact_dot_result(instruction, n)


@pytest.mark.aarch64
@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_dot_ceiling_is_measured_where_the_cpu_has_a_flag(precision: str) -> None:
    """With an instruction of the precision, the ceiling can be timed;
    without, the reason names the flags and timing refuses."""
    cpu = cpu_features()
    why = native.dot_unavailable(precision)
    names = native.dot_instructions(precision)
    assert all(DOT_INSTRUCTIONS[n][0] == precision for n in names)
    if not names:
        assert why, precision
        flags = {f for name, (prec, fs, _, _) in DOT_INSTRUCTIONS.items() if prec == precision
                 for f in fs}
        assert any(f in why for f in flags) or cpu["arch"] in why, why
        with pytest.raises(ValueError, match=f"{precision} dot products"):
            native.time_dot(precision, 1, 10)
        return
    assert why == ""
    with pytest.raises(ValueError, match="is not one measured here"):
        native.time_dot(precision, 1, 10, instruction="vpdpbusd" if precision == "bf16"
                        else "vdpbf16ps")


X86_AVX512 = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"]
SAPPHIRE_RAPIDS = [*X86_AVX512, "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8"]
ZEN5 = [*X86_AVX512, "avx512_bf16", "avx512_vnni"]
NEOVERSE_V1 = ["asimd", "sve", "bf16", "i8mm", "dotprod"]
NEOVERSE_N1 = ["asimd", "dotprod"]


@pytest.mark.aarch64
@pytest.mark.parametrize("arch, flags, cap, bf16, int8", [
    ("x86_64", SAPPHIRE_RAPIDS, "", ["tdpbf16ps"], ["tdpbusd"]),
    ("x86_64", SAPPHIRE_RAPIDS, "AVX512_CORE_AMX", ["tdpbf16ps"], ["tdpbusd"]),
    ("x86_64", SAPPHIRE_RAPIDS, "avx10_1_512_amx", ["tdpbf16ps"], ["tdpbusd"]),
    ("x86_64", SAPPHIRE_RAPIDS, "ALL", ["tdpbf16ps"], ["tdpbusd"]),
    # The ISA cap below AMX turns the tiles off: AVX-512's ceilings instead.
    ("x86_64", SAPPHIRE_RAPIDS, "AVX512_CORE_BF16", ["vdpbf16ps"], ["vpdpbusd"]),
    ("x86_64", SAPPHIRE_RAPIDS[:-1], "", ["tdpbf16ps"], ["vpdpbusd"]),  # no amx_int8
    ("x86_64", [f for f in SAPPHIRE_RAPIDS if f != "amx_tile"], "", ["vdpbf16ps"], ["vpdpbusd"]),
    ("x86_64", ZEN5, "", ["vdpbf16ps"], ["vpdpbusd"]),
    # A cap below a vector extension turns it off too, as in oneDNN's kernels.
    ("x86_64", ZEN5, "AVX512_CORE", [], []),
    ("x86_64", ZEN5, "avx2", [], []),
    ("x86_64", ZEN5, "AVX512_CORE_VNNI", [], ["vpdpbusd"]),
    ("x86_64", ZEN5, "AVX512_CORE_BF16", ["vdpbf16ps"], ["vpdpbusd"]),
    ("x86_64", ZEN5, "AVX10_1_512", ["vdpbf16ps"], ["vpdpbusd"]),
    ("x86_64", SAPPHIRE_RAPIDS, "AVX512_CORE_VNNI", [], ["vpdpbusd"]),
    ("x86_64", ["avx2", "fma", "avx_vnni"], "", [], []),
    ("x86_64", ["avx512_bf16", "avx512_vnni"], "", [], []),  # without the AVX-512 tier
    ("aarch64", NEOVERSE_V1, "", ["bfmmla", "bfdot"], ["smmla", "sdot"]),
    ("aarch64", NEOVERSE_N1, "", [], ["sdot"]),
    ("aarch64", ["asimd", "i8mm"], "", [], ["smmla"]),
    ("aarch64", ["asimd"], "", [], []),
    ("ppc64", [], "", [], []),
])
def test_dot_instruction_choice_follows_the_flags_and_the_isa_cap(
        arch: str, flags: list[str], cap: str, bf16: list[str], int8: list[str]) -> None:
    assert native.dot_choice("bf16", arch, flags, cap) == bf16
    assert native.dot_choice("int8", arch, flags, cap) == int8


def test_the_isa_cap_turns_amx_off_on_a_cpu_with_it() -> None:
    """ONEDNN_MAX_CPU_ISA below AMX (read by the process as oneDNN reads it)
    measures AVX-512's ceilings on a CPU with AMX."""
    have = cpu_features()["flags"]
    for flag in ("amx_tile", "amx_bf16", "amx_int8"):
        if flag not in have:
            pytest.skip(f"this CPU has no {flag}: its AMX ceilings cannot be turned off")
    code = ("from pyparbench._core import peak; "
            "print(peak.dot_instructions('bf16') + peak.dot_instructions('int8'))")
    for cap, want in (("AVX512_CORE_AMX", "['tdpbf16ps', 'tdpbusd']"),
                      ("AVX512_CORE_BF16", "['vdpbf16ps', 'vpdpbusd']")):
        out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                             timeout=60, check=True,
                             env={**os.environ, "ONEDNN_MAX_CPU_ISA": cap, "DNNL_MAX_CPU_ISA": ""})
        assert out.stdout.strip() == want, (cap, out.stdout, out.stderr)


def test_an_isa_cap_below_the_cpus_dot_products_measures_none() -> None:
    """Under ONEDNN_MAX_CPU_ISA=AVX512_CORE oneDNN emulates bf16 and runs
    int8 without VNNI: peak measures no dot-product ceiling it would not meet,
    and says the cap is why."""
    have = cpu_features()["flags"]
    for flag in ("avx512_bf16", "avx512_vnni"):
        if flag not in have:
            pytest.skip(f"this CPU has no {flag}: no dot product for the cap to turn off")
    code = ("from pyparbench._core import peak; "
            "print(peak.dot_instructions('bf16') + peak.dot_instructions('int8')); "
            "print(peak.dot_unavailable('bf16')); print(peak.dot_unavailable('int8'))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                         timeout=60, check=True,
                         env={**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
                              "DNNL_MAX_CPU_ISA": ""})
    instructions, bf16_why, int8_why = out.stdout.strip().splitlines()
    assert instructions == "[]", out.stdout
    assert "ONEDNN_MAX_CPU_ISA=AVX512_CORE turns off this CPU's bf16" in bf16_why
    assert "AVX512_CORE_BF16 or above" in bf16_why
    assert "ONEDNN_MAX_CPU_ISA=AVX512_CORE turns off this CPU's int8" in int8_why
    shown = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "info"], capture_output=True,
                           text=True, timeout=120, check=True,
                           env={**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
                                "DNNL_MAX_CPU_ISA": "", "COLUMNS": "200"}).stdout
    assert "bf16 (off under ONEDNN_MAX_CPU_ISA=AVX512_CORE)" in shown, shown


@pytest.mark.aarch64
@pytest.mark.parametrize("arch, flags, cap, bf16, int8", [
    ("x86_64", ZEN5, "AVX512_CORE", True, True),
    ("x86_64", ZEN5, "AVX512_CORE_VNNI", True, False),
    ("x86_64", ZEN5, "AVX512_CORE_BF16", False, False),
    ("x86_64", ZEN5, "", False, False),
    ("x86_64", SAPPHIRE_RAPIDS, "AVX512_CORE_BF16", False, False),  # AMX off, AVX-512 runs
    ("x86_64", SAPPHIRE_RAPIDS, "AVX2", True, True),
    # A CPU without the instructions: none under the cap either, but the CPU is why.
    ("x86_64", ["avx2", "fma", "avx_vnni"], "AVX2", False, False),
    ("x86_64", ["avx512_bf16", "avx512_vnni"], "AVX2", False, False),  # no AVX-512 tier
    ("aarch64", NEOVERSE_V1, "AVX2", False, False),  # no cap limits Arm's
])
def test_the_isa_cap_is_blamed_only_for_dot_products_the_cpu_has(
        arch: str, flags: list[str], cap: str, bf16: bool, int8: bool) -> None:
    assert native.dot_capped("bf16", arch, flags, cap) is bf16
    assert native.dot_capped("int8", arch, flags, cap) is int8


@pytest.mark.aarch64
@pytest.mark.parametrize("arch, flags, precisions, want", [
    ("x86_64", ZEN5, ["fp32", "bf16", "int8"],
     "fp32, bf16 (off under ONEDNN_MAX_CPU_ISA=AVX2), int8 (off under ONEDNN_MAX_CPU_ISA=AVX2)"),
    # AVX-VNNI makes int8 native but peak has no kernel for it: the CPU, not the cap.
    ("x86_64", ["avx2", "fma", "avx_vnni"], ["fp32", "int8"], "fp32, int8"),
    ("x86_64", ["avx512_bf16", "avx512_vnni"], ["fp32", "bf16", "int8"], "fp32, bf16, int8"),
    ("x86_64", ["avx2", "fma"], ["fp32"], "fp32"),
])
def test_info_names_the_isa_cap_where_the_core_blames_it(
        arch: str, flags: list[str], precisions: list[str], want: str) -> None:
    """`pyparbench info`'s precisions under ONEDNN_MAX_CPU_ISA=AVX2, for CPUs
    with and without the dot products the cap turns off (peak measures none
    on either)."""
    cpu = {"arch": arch, "flags": flags, "precisions": precisions,
           "dot_instructions": {"bf16": [], "int8": []}}
    assert info_precisions(cpu, "AVX2") == want


def test_info_under_a_cap_says_what_the_core_says() -> None:
    """In a process under an ISA cap, `pyparbench info` says a precision is off
    under the cap exactly where the core's reason (dot_unavailable) blames the
    cap, and names the cap the core read (ONEDNN_MAX_CPU_ISA before
    DNNL_MAX_CPU_ISA)."""
    code = ("import json; from pyparbench._core import peak; "
            "print(json.dumps([peak.isa_cap(), "
            "{p: peak.dot_unavailable(p) for p in ('bf16', 'int8')}]))")
    for onednn, dnnl, cap in (("AVX512_CORE", "", "AVX512_CORE"), ("", "AVX2", "AVX2"),
                              ("AVX512_CORE_VNNI", "AVX2", "AVX512_CORE_VNNI")):
        env = {**os.environ, "ONEDNN_MAX_CPU_ISA": onednn, "DNNL_MAX_CPU_ISA": dnnl,
               "COLUMNS": "250"}
        out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                             timeout=60, check=True, env=env)
        read_cap, why = json.loads(out.stdout)
        assert read_cap == cap
        shown = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "info"],
                               capture_output=True, text=True, timeout=120, check=True,
                               env=env).stdout
        row = next(ln for ln in shown.splitlines() if "native precisions" in ln)
        for p in ("bf16", "int8"):
            blamed = f"the ISA cap ONEDNN_MAX_CPU_ISA={cap} turns off" in why[p]
            assert (f"{p} (off under ONEDNN_MAX_CPU_ISA={cap})" in row) is blamed, (row, why)


@pytest.mark.aarch64
def test_dot_ceiling_bad_arguments() -> None:
    with pytest.raises(ValueError, match="precision must be 'bf16' or 'int8', got 'fp16'"):
        native.dot_unavailable("fp16")
    with pytest.raises(ValueError, match="precision must be 'bf16' or 'int8', got 'fp16'"):
        native.dot_choice("fp16", "x86_64", ZEN5)
    with pytest.raises(ValueError, match="'vfmadd' is not a dot-product instruction"):
        native.dot_instruction_ops("vfmadd")
    with pytest.raises(ValueError, match="'vfmadd' does not run on this CPU"):
        native.dot_result("vfmadd", 1)


def test_the_better_of_two_dot_instructions_is_measured_and_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a precision has two instructions (Arm's BFMMLA and BFDOT), the
    faster at one thread is measured at every thread count and named."""
    rates = {"bfmmla": 40e6, "bfdot": 70e6, "smmla": 200e6, "sdot": 90e6}  # per ns per thread
    timed: list[tuple[int, str]] = []

    def fake_dot(p: str, t: int, *a: Any, instruction: str = "", **kw: Any
                 ) -> tuple[np.ndarray, float]:
        timed.append((t, instruction))
        return np.full(4, 1e6), t * rates[instruction]

    monkeypatch.setattr(native, "time_fma", lambda *a, **kw: (np.full(4, 1e6), 50e6))
    monkeypatch.setattr(native, "time_triad", lambda *a, **kw: (np.full(4, 1e6), 1e6))
    monkeypatch.setattr(native, "time_gather", lambda *a, **kw: (np.full(4, 1e6), 1e6))
    monkeypatch.setattr(native, "clock_mhz", lambda *a: 3000.0)
    monkeypatch.setattr(native, "dot_unavailable", lambda p: "")
    monkeypatch.setattr(native, "dot_instructions",
                        lambda p: ["bfmmla", "bfdot"] if p == "bf16" else ["smmla", "sdot"])
    monkeypatch.setattr(native, "time_dot", fake_dot)
    monkeypatch.setattr(peak_mod, "_calibrate_fma", lambda *a: 1)
    monkeypatch.setattr(peak_mod, "_calibrate_dot", lambda *a: 1)
    peak = peak_mod.measure_peak([1], quick=True, repeats=3)
    assert peak.dot_instructions == {"bf16": "bfdot", "int8": "smmla"}
    assert peak.point(1).bf16_gflops == pytest.approx(70.0)
    assert peak.point(1).int8_gops == pytest.approx(200.0)
    # Both rated at one thread, then only the better one measured.
    assert {i for _, i in timed} == set(rates)
    assert [i for _, i in timed].count("bfmmla") == 1
    console = Console(width=140, record=True)
    console.print(peak_renderable(peak))
    text = console.export_text()
    assert "bf16 GFLOP/s (bfdot)" in text and "int8 GOP/s (smmla)" in text


def test_peak_reports_dot_ceilings_or_why_not(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    """measure_peak carries a bf16 / int8 figure per thread count where it was
    measured, and the reason where not; the peak file keeps both, and a file
    written before the figures existed still reads."""
    import pyparbench.machine.peak as peak_mod

    monkeypatch.setattr(native, "time_fma", lambda *a, **kw: (np.full(4, 1e6), 50e6))
    monkeypatch.setattr(native, "time_triad", lambda *a, **kw: (np.full(4, 1e6), 1e6))
    monkeypatch.setattr(native, "time_gather", lambda *a, **kw: (np.full(4, 1e6), 1e6))
    monkeypatch.setattr(native, "clock_mhz", lambda *a: 3000.0)
    monkeypatch.setattr(native, "dot_unavailable",
                        lambda p: "" if p == "bf16" else "this CPU has no AVX512_VNNI")
    monkeypatch.setattr(native, "dot_instructions",
                        lambda p: ["vdpbf16ps"] if p == "bf16" else [])
    monkeypatch.setattr(native, "time_dot", lambda p, t, *a, **kw: (np.full(4, 1e6), t * 90e6))
    monkeypatch.setattr(peak_mod, "_calibrate_fma", lambda *a: 1)
    monkeypatch.setattr(peak_mod, "_calibrate_dot", lambda *a: 1)
    peak = peak_mod.measure_peak([1], quick=True, repeats=3)
    assert peak.point(1).bf16_gflops == pytest.approx(90.0)
    assert peak.point(1).int8_gops is None
    assert peak.dot_absent == {"int8": "this CPU has no AVX512_VNNI"}
    assert peak.dot_instructions == {"bf16": "vdpbf16ps"}
    assert Peak.from_dict(json.loads(json.dumps(peak.as_dict()))) == peak
    old = peak.as_dict()
    # Written before the instructions were named: AVX-512's, the only ones then.
    del old["dot_instructions"]
    (tmp_path / "peak.json").write_text(json.dumps(old))
    assert read_peak_file(tmp_path / "peak.json", 1 << 20) == peak
    del old["dot_absent"]
    for p in old["points"]:
        del p["bf16_gflops"], p["int8_gops"]
    (tmp_path / "peak.json").write_text(json.dumps(old))
    read = read_peak_file(tmp_path / "peak.json", 1 << 20)
    assert read.point(1).bf16_gflops is None and read.dot_absent == {}
    assert read.dot_instructions == {}
    console = Console(width=140, record=True)
    console.print(peak_renderable(peak))
    text = console.export_text()
    assert "bf16 GFLOP/s (vdpbf16ps)" in text and "int8 GOP/s" not in text
    assert "int8 dot products not measured: this CPU has no AVX512_VNNI" in text
