"""The CPU-feature query (core/cpu_features.hpp and its Python view): the
kernel tier each dispatcher picks, and the Arm CPU names read from
/proc/cpuinfo texts as Linux prints them on Arm servers."""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path
from typing import Any

import pytest

from pyparbench._core import ops as _ops
from pyparbench._core import peak as _peak
from pyparbench.machine.cpu_features import (
    arm_cpu_name,
    cpu_features,
    cpu_model_name,
    parse_arm_cpuinfo,
    x86_tier_from_flags,
)
from pyparbench.machine.fingerprint import fingerprint_differences, machine_fingerprint
from pyparbench.machine.peak import fma_pipes

pytestmark = pytest.mark.aarch64

ARCH = platform.machine()


def _block(n: int, features: str, implementer: str, variant: str, part: str,
           revision: int, bogomips: str = "2100.00") -> str:
    # The format of arch/arm64/kernel/cpuinfo.c's c_show().
    return (f"processor\t: {n}\nBogoMIPS\t: {bogomips}\nFeatures\t: {features}\n"
            f"CPU implementer\t: {implementer}\nCPU architecture: 8\n"
            f"CPU variant\t: {variant}\nCPU part\t: {part}\nCPU revision\t: {revision}\n\n")


GRAVITON2 = "".join(_block(
    n, "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc "
    "dcpop asimddp ssbs", "0x41", "0x3", "0xd0c", 1, "243.75") for n in range(4))
GRAVITON3 = "".join(_block(
    n, "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt "
    "fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs "
    "paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng", "0x41", "0x1", "0xd40", 1)
    for n in range(2))
GRACE = "".join(_block(
    n, "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt "
    "fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb "
    "paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm "
    "svebf16 i8mm bf16 dgh bti", "0x41", "0x0", "0xd4f", 0, "2000.00") for n in range(3))
A64FX = "".join(_block(
    n, "fp asimd evtstrm sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm fcma dcpop sve",
    "0x46", "0x1", "0x001", 0, "200.00") for n in range(2))
AMPEREONE = "".join(_block(
    n, "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt "
    "fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 asimdfhm dit uscat ilrcpc flagm ssbs sb "
    "paca pacg dcpodp flagm2 frint i8mm bf16 rng bti ecv", "0xc0", "0x0", "0xac3", 0,
    "2000.00") for n in range(2))
COBALT = _block(0, "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
                "asimdrdm sve2", "0x6d", "0x0", "0xd49", 0)
# A phone-class SoC: four big and four little cores (RK3588).
BIG_LITTLE = "".join(
    _block(n, "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm "
           "lrcpc dcpop asimddp", "0x41", "0x2", "0xd05", 0, "48.00") for n in range(4)) + \
    "".join(_block(n, "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
                   "asimdrdm lrcpc dcpop asimddp", "0x41", "0x4", "0xd0b", 0, "48.00")
            for n in range(4, 8))
X86 = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
       "model name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: fpu sse2 avx avx2 fma "
       "avx512f avx512dq avx512bw avx512vl amx_tile\n\n")


@pytest.mark.parametrize(("text", "name"), [
    (GRAVITON2, "Arm Neoverse N1"),
    (GRAVITON3, "Arm Neoverse V1"),
    (GRACE, "Arm Neoverse V2"),
    (A64FX, "Fujitsu A64FX"),
    (AMPEREONE, "AmpereOne"),
    (COBALT, "Microsoft Azure Cobalt 100 (Neoverse N2)"),
    (BIG_LITTLE, "4x Arm Cortex-A55 + 4x Arm Cortex-A76"),
])
def test_arm_cpus_are_named_from_implementer_and_part(text: str, name: str) -> None:
    assert arm_cpu_name(text) == name
    assert cpu_model_name(text, arch="aarch64") == name
    assert cpu_model_name(text) == name  # no model name line: the Arm names


def test_the_parser_counts_cores_and_keeps_unknown_parts() -> None:
    cores = parse_arm_cpuinfo(GRAVITON2)
    assert [(c.implementer, c.part, c.count) for c in cores] == [(0x41, 0xD0C, 4)]
    unknown = GRAVITON2.replace("0xd0c", "0xfff").replace("0x41", "0x99")
    assert arm_cpu_name(unknown) == "implementer 0x99 part 0xfff"
    assert parse_arm_cpuinfo(X86) == [] and parse_arm_cpuinfo("") == []


def test_x86_model_names_and_the_emulated_case() -> None:
    assert cpu_model_name(X86) == "Intel(R) Xeon(R) Platinum 8480+"
    # An aarch64 process under a user-mode emulator reads the x86 host's
    # /proc/cpuinfo: it names no Arm core, and the host's name is not taken.
    assert cpu_model_name(X86, arch="aarch64") == ""


def test_tiers_follow_one_definition() -> None:
    flags = {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}
    assert x86_tier_from_flags(flags) == "avx512"
    assert x86_tier_from_flags(flags - {"fma"}) == "generic"
    assert x86_tier_from_flags(flags - {"avx512dq"}) == "avx2"
    assert x86_tier_from_flags({"avx2"}) == "generic"
    assert x86_tier_from_flags(set()) == "generic"


def test_the_native_query_describes_this_cpu() -> None:
    f = cpu_features()
    assert f["arch"] == {"x86_64": "x86_64", "aarch64": "aarch64"}.get(ARCH, f["arch"])
    assert f["tiers"][-1] == "generic"
    assert set(f["kernels"]) == {"direct", "embedding_bag", "decode_attention", "pool_nhwc",
                                 "byte_lookup", "peak"}
    assert f["kernels"]["direct"] == _ops.direct_isa()
    assert f["kernels"]["peak"] == _peak.isas()[0]
    if ARCH == "aarch64":
        assert "asimd" in f["flags"]
        assert f["tiers"] == ["generic"]
        assert f["kernels"]["peak"] == "neon"
        assert (f["sve_vector_bits"] > 0) == ("sve" in f["flags"])
        assert f["sve_vector_bits"] % 128 == 0
        assert not any(x.startswith("avx") for x in f["flags"])


def _cpuinfo_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


@pytest.mark.skipif(ARCH != "x86_64", reason="x86 tiers")
def test_every_dispatcher_picks_the_tier_the_cpuinfo_flags_give() -> None:
    tier = x86_tier_from_flags(_cpuinfo_flags())
    f = cpu_features()
    assert f["tiers"][0] == tier
    assert _ops.direct_isas()[0] == tier
    # The avx512 tier's byte lookups run VBMI's build where the CPU has it.
    vbmi = tier == "avx512" and "avx512vbmi" in _cpuinfo_flags()
    assert f["kernels"] == {"direct": tier, "embedding_bag": tier, "decode_attention": tier,
                            "pool_nhwc": tier, "byte_lookup": "avx512vbmi" if vbmi else tier,
                            "peak": tier}
    assert set(f["flags"]) <= _cpuinfo_flags() | {"amx_tile", "amx_bf16", "amx_int8"}


def test_fma_pipes_per_core() -> None:
    assert fma_pipes("neon", "Arm Neoverse V1") == 4
    assert fma_pipes("neon", "Arm Neoverse V2") == 4
    assert fma_pipes("neon", "Arm Neoverse N1") == 2
    assert fma_pipes("neon", "") == 2
    assert fma_pipes("avx512", "Intel(R) Xeon(R) Platinum 8480+") == 2
    assert fma_pipes("generic", "Arm Neoverse V1") == 1


def test_the_fingerprint_names_the_architecture() -> None:
    fp = machine_fingerprint()
    assert fp["arch"] == cpu_features()["arch"]
    assert fp["cpu_model"] == cpu_features()["model"]
    assert set(fp["cpu_features"]) == {"flags", "sve_vector_bits"}


def test_x86_against_aarch64_lists_the_isa() -> None:
    x86 = {"arch": "x86_64", "cpu_model": "AMD EPYC 9R14", "onednn.isa": "avx512_core_bf16"}
    arm = {"arch": "aarch64", "cpu_model": "Arm Neoverse V2", "onednn.isa": "sve_128"}
    diffs = {d.field.path: d.values for d in fingerprint_differences([x86, arm])}
    assert diffs == {"arch": ("x86_64", "aarch64"), "cpu_model": ("AMD EPYC 9R14",
                                                                  "Arm Neoverse V2"),
                     "onednn.isa": ("avx512_core_bf16", "sve_128")}


def _rewrite_machine(folder: Path, **changes: Any) -> None:
    """Sets fields of the machine fingerprint in a results folder's files."""
    def fix(machine: dict[str, Any]) -> None:
        for path, value in changes.items():
            d = machine
            *parents, last = path.split(".")
            for p in parents:
                d = d[p]
            d[last] = value
    summary = json.loads((folder / "summary.json").read_text())
    fix(summary["machine"])
    (folder / "summary.json").write_text(json.dumps(summary))
    lines = []
    for line in (folder / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if isinstance(rec.get("machine"), dict):
            fix(rec["machine"])
        lines.append(json.dumps(rec))
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")


def test_compare_of_an_x86_and_an_aarch64_folder(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("scipy.stats")
    from pyparbench.cli import main

    data = Path(__file__).resolve().parent / "data" / "compare"
    a, b = tmp_path / "x86", tmp_path / "arm"
    shutil.copytree(data / "machine_a", a)
    shutil.copytree(data / "machine_b", b)
    _rewrite_machine(a, arch="x86_64")
    _rewrite_machine(b, **{"arch": "aarch64", "cpu_model": "Arm Neoverse V2",
                           "onednn.isa": "sve_128"})
    for extra in ([], ["--normalize", "per-peak"]):
        assert main(["compare", str(a), str(b), "--json", *extra]) == 0
        res = json.loads(capsys.readouterr().out)
        diffs = {d["field"]: d["values"] for d in res["machine_differences"]}
        assert diffs["arch"] == ["x86_64", "aarch64"]
        assert diffs["onednn.isa"] == ["avx512_core_bf16", "sve_128"]
        assert diffs["cpu_model"] == ["AMD EPYC 7B13", "Arm Neoverse V2"]


# The dot-product flags as the native query names them, and as /proc/cpuinfo
# does (x86 "flags", aarch64 "Features").
DOT_FLAGS = {"x86_64": {"avx512_bf16": "avx512_bf16", "avx512_vnni": "avx512_vnni",
                        "avx_vnni": "avx_vnni"},
             "aarch64": {"dotprod": "asimddp", "bf16": "bf16", "i8mm": "i8mm"}}


@pytest.mark.aarch64
def test_dot_product_flags_and_native_precisions_follow_cpuinfo() -> None:
    if ARCH not in DOT_FLAGS:
        pytest.skip(f"no dot-product flags are asked on {ARCH}")
    key = "flags" if ARCH == "x86_64" else "Features"
    lines = [ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith(key)]
    if not lines:
        pytest.skip(f"/proc/cpuinfo has no {key!r} line: it describes another machine "
                    "(a user-mode emulator shows the host's)")
    listed = set(lines[0].split(":", 1)[1].split())
    f = cpu_features()
    for ours, theirs in DOT_FLAGS[ARCH].items():
        assert (ours in f["flags"]) == (theirs in listed), (ours, theirs)
    have = set(f["flags"])
    want = ["fp32"]
    if have & {"avx512_bf16", "amx_bf16", "bf16"}:
        want.append("bf16")
    if have & {"avx512_vnni", "avx_vnni", "amx_int8", "dotprod", "i8mm"}:
        want.append("int8")
    assert f["precisions"] == want
