"""What the CPU is and what it has, on x86-64 and aarch64 alike.

* :func:`cpu_features` asks the native core (``core/cpu_features.hpp``, the
  one query every per-ISA dispatcher uses): the architecture, the flags
  (x86: avx2, fma, avx512f/bw/vl/dq, amx_*; aarch64: asimd, sve, sve2,
  bf16, i8mm), the SVE vector length, and the build each per-ISA kernel
  family runs.
* :func:`cpu_model_name` names the CPU: x86's ``model name`` line of
  /proc/cpuinfo; on aarch64, which has none, the implementer and part
  numbers mapped to names (:func:`parse_arm_cpuinfo`), such as
  "Arm Neoverse V1".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pyparbench.cpuinfo import cpuinfo_value, read_cpuinfo

__all__ = ["ARM_IMPLEMENTERS", "ARM_PARTS", "ArmCore", "arm_cpu_name", "cpu_features",
           "cpu_model_name", "parse_arm_cpuinfo", "x86_tier_from_flags"]

# "CPU implementer" of /proc/cpuinfo (MIDR_EL1 bits 31:24), as Linux's
# arch/arm64/include/asm/cputype.h names them.
ARM_IMPLEMENTERS: dict[int, str] = {
    0x41: "Arm", 0x42: "Broadcom", 0x43: "Cavium", 0x46: "Fujitsu", 0x48: "HiSilicon",
    0x4E: "NVIDIA", 0x50: "APM", 0x51: "Qualcomm", 0x61: "Apple", 0x6D: "Microsoft",
    0xC0: "Ampere",
}

# (implementer, "CPU part") -> core name. The server cores first: AWS
# Graviton2 and Ampere Altra are Neoverse N1, Graviton3 V1, Graviton4,
# NVIDIA Grace and Google Axion V2, Microsoft Cobalt 100 N2 (under
# Microsoft's own implementer code).
ARM_PARTS: dict[tuple[int, int], str] = {
    (0x41, 0xD0C): "Neoverse N1",
    (0x41, 0xD40): "Neoverse V1",
    (0x41, 0xD49): "Neoverse N2",
    (0x41, 0xD4F): "Neoverse V2",
    (0x41, 0xD84): "Neoverse V3",
    (0x41, 0xD8E): "Neoverse N3",
    (0x41, 0xD4A): "Neoverse E1",
    (0x41, 0xD03): "Cortex-A53",
    (0x41, 0xD04): "Cortex-A35",
    (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD07): "Cortex-A57",
    (0x41, 0xD08): "Cortex-A72",
    (0x41, 0xD09): "Cortex-A73",
    (0x41, 0xD0A): "Cortex-A75",
    (0x41, 0xD0B): "Cortex-A76",
    (0x41, 0xD0D): "Cortex-A77",
    (0x41, 0xD41): "Cortex-A78",
    (0x41, 0xD44): "Cortex-X1",
    (0x41, 0xD46): "Cortex-A510",
    (0x41, 0xD47): "Cortex-A710",
    (0x41, 0xD48): "Cortex-X2",
    (0x41, 0xD4D): "Cortex-A715",
    (0x41, 0xD4E): "Cortex-X3",
    (0x41, 0xD80): "Cortex-A520",
    (0x41, 0xD81): "Cortex-A720",
    (0x41, 0xD82): "Cortex-X4",
    (0x43, 0x0AF): "ThunderX2",
    (0x46, 0x001): "A64FX",
    (0x48, 0xD01): "TaiShan v110 (Kunpeng 920)",
    (0x4E, 0x004): "Carmel",
    (0x50, 0x000): "X-Gene",
    (0x61, 0x022): "M1 Icestorm",
    (0x61, 0x023): "M1 Firestorm",
    (0x61, 0x032): "M2 Blizzard",
    (0x61, 0x033): "M2 Avalanche",
    (0x6D, 0xD49): "Azure Cobalt 100 (Neoverse N2)",
    (0xC0, 0xAC3): "AmpereOne",
    (0xC0, 0xAC4): "AmpereOne AC04",
}


@dataclass(frozen=True)
class ArmCore:
    """One kind of core of an aarch64 CPU, as /proc/cpuinfo lists it."""

    implementer: int
    part: int
    vendor: str  # the implementer's name; "" when unknown
    name: str  # the core's name; "part 0x..." when unknown
    count: int  # logical CPUs of this kind

    @property
    def full_name(self) -> str:
        """"Arm Neoverse V1", "AmpereOne", "implementer 0x.. part 0x..."."""
        vendor = self.vendor or f"implementer 0x{self.implementer:02x}"
        if self.name.startswith(vendor):
            return self.name
        return f"{vendor} {self.name}"


_FIELD = re.compile(r"^\s*(CPU implementer|CPU part)\s*:\s*(0x[0-9a-fA-F]+)\s*$")


def parse_arm_cpuinfo(text: str) -> list[ArmCore]:
    """The kinds of cores an aarch64 /proc/cpuinfo lists (one block per
    logical CPU, each with "CPU implementer" and "CPU part"), in order of
    first appearance, with how many CPUs each; [] for a text without them
    (x86's, or a container's empty one)."""
    counts: dict[tuple[int, int], int] = {}
    implementer: int | None = None
    for line in text.splitlines():
        m = _FIELD.match(line)
        if not m:
            continue
        value = int(m.group(2), 16)
        if m.group(1) == "CPU implementer":
            implementer = value
        elif implementer is not None:
            key = (implementer, value)
            counts[key] = counts.get(key, 0) + 1
            implementer = None
    return [ArmCore(imp, part, ARM_IMPLEMENTERS.get(imp, ""),
                    ARM_PARTS.get((imp, part), f"part 0x{part:03x}"), n)
            for (imp, part), n in counts.items()]


def arm_cpu_name(text: str) -> str:
    """The aarch64 CPU's name from a /proc/cpuinfo text: "Arm Neoverse V2";
    a CPU with several kinds of cores lists each with its count, the most
    numerous first ("4x Arm Cortex-A76 + 4x Arm Cortex-A55"); "" when the
    text names no Arm core."""
    cores = sorted(parse_arm_cpuinfo(text), key=lambda c: -c.count)
    if not cores:
        return ""
    if len(cores) == 1:
        return cores[0].full_name
    return " + ".join(f"{c.count}x {c.full_name}" for c in cores)


def cpu_model_name(text: str | None = None, arch: str = "") -> str:
    """The CPU's name: the first ``model name`` of /proc/cpuinfo (x86), the
    Arm core names on aarch64 (whose kernel prints no model name; a text
    with one there is another machine's, as a user-mode emulator shows the
    host's); "" when unknown. ``text``: a /proc/cpuinfo text (None: this
    machine's); ``arch``: the architecture ("" any: Arm names when the text
    has no model name)."""
    if text is None:
        text = read_cpuinfo()
    if arch == "aarch64":
        return arm_cpu_name(text)
    name = cpuinfo_value(text, "model name")
    return name if name is not None else arm_cpu_name(text)


def x86_tier_from_flags(flags: set[str]) -> str:
    """The x86 kernel tier a CPU with these /proc/cpuinfo flags runs, by the
    native core's definition (core/cpu_features.hpp): "avx512" (AVX-512 F,
    BW, VL, DQ with AVX2 and FMA), "avx2" (AVX2 and FMA), else "generic"."""
    avx2 = {"avx2", "fma"} <= flags
    if avx2 and {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "avx512"
    return "avx2" if avx2 else "generic"


def cpu_features() -> dict[str, Any]:
    """What the running CPU has (the native query) and its name: ``arch``,
    ``flags`` (the set ones), ``precisions`` (those it multiplies natively:
    "fp32"; "bf16" with AVX512_BF16, AMX-BF16 or Arm BF16; "int8" with an
    int8 dot product: AVX512_VNNI, AVX-VNNI, AMX-INT8, SDOT or I8MM),
    ``sve_vector_bits`` (0: no SVE), ``tiers``
    (the x86 kernel tiers it runs, widest first, then "generic"),
    ``kernels`` (the build each per-ISA kernel family runs: direct,
    embedding_bag, decode_attention, pool_nhwc, byte_lookup — "avx512vbmi"
    where the avx512 tier's lookups run AVX512_VBMI —, peak),
    ``dot_instructions`` (by precision, the
    instructions of ``pyparbench peak``'s bf16 and int8 dot-product ceilings
    on this CPU: "tdpbf16ps", "vdpbf16ps", "bfmmla"...; empty where none) and
    ``model`` (:func:`cpu_model_name`)."""
    from pyparbench._core import runtime as _rt  # noqa: PLC0415 (framework child: no native core)

    d = dict(_rt.cpu_features())
    d["flags"] = list(d["flags"])
    d["precisions"] = list(d["precisions"])
    d["tiers"] = list(d["tiers"])
    d["kernels"] = dict(d["kernels"])
    d["dot_instructions"] = {k: list(v) for k, v in d["dot_instructions"].items()}
    d["model"] = cpu_model_name(arch=str(d["arch"]))
    return d
