"""Build information, default threads, the CLI, and oneDNN errors.

CLI subprocesses run in safe-path mode (-P) so that they import the
installed package, not the source tree (which has no compiled core).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyparbench as ppb

# Also run in the emulated arm64 job (.ci/aarch64).
pytestmark = pytest.mark.aarch64


def test_info_reports_onednn_openmp_and_cpus() -> None:
    d = ppb.info()
    major = int(d["onednn"]["version"].split(".")[0])
    assert major in (2, 3) and major == d["onednn"]["api_major"]
    assert d["onednn"]["cpu_runtime"] == "OpenMP"
    assert d["onednn"]["isa"]
    assert "gomp" in d["openmp"]["library"] or "omp" in d["openmp"]["library"]
    assert d["cpus"]["logical"] >= d["cpus"]["physical_cores"] >= 1
    assert d["cpus"]["allowed"] == sorted(os.sched_getaffinity(0))


@pytest.mark.parametrize("argv", [["pyparbench"], ["-m", "pyparbench"]])
def test_info_cli_json(argv: list[str], tmp_path: Path) -> None:
    code = "from pyparbench.cli import main; raise SystemExit(main())"
    cmd = [sys.executable, "-P", "-c", code] \
        if argv == ["pyparbench"] else [sys.executable, "-P", *argv]
    out = subprocess.run([*cmd, "info", "--json"], check=True, capture_output=True, text=True,
                         cwd=tmp_path)
    assert json.loads(out.stdout)["onednn"] == ppb.info()["onednn"]


def test_info_cli_table(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "info"], check=True,
                         capture_output=True, text=True, cwd=tmp_path)
    assert "oneDNN ISA" in out.stdout and "OpenMP library" in out.stdout


def test_cli_rejects_unknown_command(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-P", "-m", "pyparbench", "frobnicate"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2 and "invalid choice" in out.stderr


def test_default_threads_round_trip() -> None:
    saved = ppb.get_default_threads()
    try:
        ppb.set_default_threads(1)
        assert ppb.ops.Gemm(2, 2, 2).threads == 1
        ppb.set_default_threads(3)
        assert ppb.ops.Gemm(2, 2, 2).threads == 3
    finally:
        ppb.set_default_threads(saved)
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        ppb.set_default_threads(0)
    with pytest.raises(TypeError, match="threads must be an int"):
        ppb.set_default_threads("2")  # type: ignore[arg-type]


def test_onednn_failure_is_a_dnnl_error_with_status() -> None:
    # oneDNN allows at most 12 dimensions.
    with pytest.raises(ppb.DnnlError, match="invalid_arguments") as info:
        ppb.ops.relu(np.ones((1,) * 13, np.float32))
    assert info.value.status_name == "invalid_arguments"
    assert isinstance(info.value, RuntimeError) and info.value.status == 2
