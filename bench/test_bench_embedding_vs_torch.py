"""Smoke test of bench/embedding_bag_vs_torch.py (CI: ``pytest bench --benchmark-disable``).

Tiny shapes, one round: the children start, both libraries agree on what
they time, and the table and the JSON come out. For figures, run the script.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from embedding_bag_vs_torch import bytes_moved, main, make_indices, make_table


def test_inputs() -> None:
    for align, offset in (("64", 0), ("4", 4)):
        t = make_table(100, 16, align)
        assert t.shape == (100, 16) and t.dtype == np.float32 and t.ctypes.data % 64 == offset
    for dist in ("uniform", "zipf"):
        idx, off = make_indices(1000, 8, 20, dist, "int32")
        assert idx.dtype == off.dtype == np.int32 and idx.size == 160
        assert 0 <= idx.min() and idx.max() < 1000
        assert list(off) == list(range(0, 160, 20))


@pytest.mark.parametrize("api", ["function", "prepared"])
def test_script_runs(api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "r.json"
    assert main(["--rows", "500", "--dim", "16", "--batch", "4", "--lookups", "5",
                 "--dist", "uniform", "zipf", "--threads", "1", "--rounds", "1",
                 "--calls", "3", "--api", api, "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert len(res["rows"]) == 2 and len(res["ceiling"]) == 1
    for r in res["rows"]:
        assert r["api"] == api
        assert r["pyparbench_ms"] > 0 and r["torch_ms"] > 0 and r["speedup"] > 0
        assert r["pyparbench_pct_ceiling"] > 0
    assert "speed-up" in capsys.readouterr().out


@pytest.mark.parametrize("api", ["function", "prepared"])
def test_script_times_the_byte_rowwise_table(api: str, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "r.json"
    assert main(["--rows", "500", "--dim", "16", "--batch", "4", "--lookups", "5",
                 "--table", "fp32", "byte_rowwise", "--threads", "1", "--rounds", "1",
                 "--calls", "3", "--api", api, "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert [r["table"] for r in res["rows"]] == ["fp32", "byte_rowwise"]
    fp32, byte = res["rows"]
    assert byte["pyparbench_ms"] > 0 and byte["torch_ms"] > 0
    # The ceiling is an fp32 gather's: a share for the fp32 rows alone.
    assert fp32["pyparbench_pct_ceiling"] > 0 and byte["pyparbench_pct_ceiling"] is None


def test_bytes_moved_counts_the_row_format() -> None:
    # 4 bags of 5 lookups, dim 16: rows, 8-byte indices, the float output.
    assert bytes_moved(16, 4, 5) == 20 * 64 + 20 * 8 + 4 * 16 * 4
    assert bytes_moved(16, 4, 5, "byte_rowwise") == 20 * (16 + 8) + 20 * 8 + 4 * 16 * 4
