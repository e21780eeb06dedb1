"""JSON files read with a bound on their size, naming the file they refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyparbench.resultfiles import ResultFileError, read_json, read_json_object


def test_a_bounded_json_read_refuses_an_oversized_file_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"keys": ["k"] * 100}))
    assert read_json_object(path)["keys"] == ["k"] * 100
    with pytest.raises(ResultFileError, match=f"{path}: .*over the 64-byte limit"):
        read_json_object(path, max_bytes=64)
    with pytest.raises(ResultFileError, match=f"{tmp_path / 'gone.json'}: cannot read it"):
        read_json(tmp_path / "gone.json")


def test_a_json_object_read_refuses_any_other_value_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "recommendations.json"
    path.write_text("[1, 2]")
    assert read_json(path) == [1, 2]
    with pytest.raises(ResultFileError, match=f"{path}: a JSON array, not an object"):
        read_json_object(path)
    path.write_text('{"cut": ')
    with pytest.raises(ResultFileError, match=f"{path}: not complete JSON"):
        read_json_object(path)
