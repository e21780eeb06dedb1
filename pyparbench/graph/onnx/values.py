"""What the ONNX import passes between the importer and its converters: a
value (a node id, a constant array, or the poison of a node that could not
be mapped) and the refusal of a node the IR cannot run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy.typing as npt
import onnx

__all__ = ["F32", "INT_TYPES", "MAX_FOLD_ELEMENTS", "POISON", "Array", "Poison", "Unsupported",
           "Value", "bad"]

Array = npt.NDArray[Any]
F32 = onnx.TensorProto.FLOAT
INT_TYPES = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)
# The most elements one folded constant (or a Pad's result) may have.
MAX_FOLD_ELEMENTS = 1 << 26


class Unsupported(Exception):
    """A node of a supported op type that this file uses in a way the IR lacks."""


@dataclass(frozen=True)
class Poison:
    """The value of a node that could not be mapped (its readers are skipped)."""


POISON = Poison()
Value = int | Array | Poison  # a node id, a constant, or poison


def bad(source: str, why: str) -> ValueError:
    """The one-line refusal of a whole file: ``source`` names it."""
    return ValueError(f"{source}: {why}")
