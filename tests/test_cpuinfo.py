"""/proc/cpuinfo, read in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyparbench import cpuinfo

X86 = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
cpu MHz\t\t: 2899.970
flags\t\t: fpu vme avx2 hypervisor
"""


def test_cpuinfo_values_are_the_first_line_of_each_key() -> None:
    text = X86 + X86.replace("2899.970", "1200.000")
    assert cpuinfo.cpuinfo_value(text, "cpu MHz") == "2899.970"
    assert cpuinfo.cpuinfo_value(text, "model name") == (
        "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz")
    assert "hypervisor" in (cpuinfo.cpuinfo_value(text, "flags") or "").split()
    # A key is the whole name before the colon, not a prefix of it.
    assert cpuinfo.cpuinfo_value(text, "cpu") is None
    assert cpuinfo.cpuinfo_value("", "flags") is None


def test_a_machine_without_cpuinfo_reads_as_empty(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpuinfo, "CPUINFO", tmp_path / "missing")
    assert cpuinfo.read_cpuinfo() == ""
