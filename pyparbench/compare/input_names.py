"""The names the inputs go by in compare's tables: A, B, C, ..."""

from __future__ import annotations

from collections.abc import Sequence

from pyparbench.resultfiles import ResultSet

__all__ = ["input_name", "input_names"]


def input_name(i: int) -> str:
    """The name of the ``i``-th input (from 0): A ... Z, then A1, B1, ..."""
    return chr(ord("A") + i % 26) + (str(i // 26) if i >= 26 else "")


def input_names(inputs: Sequence[ResultSet]) -> list[str]:
    """A, B, C, ... (Z, then A1, B1, ...)."""
    return [input_name(i) for i in range(len(inputs))]
