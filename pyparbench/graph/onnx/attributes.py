"""A node's attributes as Python values, read the same way by the rewrites
and the converters."""

from __future__ import annotations

from typing import Any

import onnx
from onnx import helper

__all__ = ["as_text", "node_attrs"]


def node_attrs(n: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes by name, as Python values."""
    return {a.name: helper.get_attribute_value(a) for a in n.attribute}


def as_text(v: Any) -> str:
    """A string attribute (bytes in the file) as text."""
    return v.decode() if isinstance(v, bytes) else str(v)
