"""A file replaced whole or not at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyparbench.resultfiles.atomic import write_atomic


def test_an_atomic_write_replaces_the_file_and_leaves_nothing_beside_it(tmp_path: Path
                                                                         ) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text("old\n")
    write_atomic(path, (f"{i}\n" for i in range(3)))
    assert path.read_text() == "0\n1\n2\n"
    write_atomic(str(path), "one string")
    assert path.read_text() == "one string"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.jsonl"]


def test_a_failed_atomic_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    path.write_text('{"version": 1}')

    def lines() -> Iterator[str]:
        yield "half of"
        raise RuntimeError("the writer failed")

    with pytest.raises(RuntimeError, match="the writer failed"):
        write_atomic(path, lines())
    assert path.read_text() == '{"version": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration.json"]
    with pytest.raises(OSError):  # a folder that is not there
        write_atomic(tmp_path / "no" / "such.json", "x")
