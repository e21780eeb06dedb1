"""The quantisation grid of a QDQ file's value (a QuantizeLinear's scale,
zero point and integer type), as the importer keeps it between the
QuantizeLinear / DequantizeLinear converters and the int8 matrix nodes."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["QuantGrid"]


@dataclass(frozen=True)
class QuantGrid:
    """Per-tensor scale (float32, > 0), zero point and type ("uint8" / "int8")."""

    scale: float
    zero_point: int
    dtype: str
