"""Graph attributes (tuples, nested dicts) as plain JSON data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def jsonable(v: Any) -> Any:
    """Tuples become lists and keys strings, recursively."""
    if isinstance(v, Mapping):
        return {str(k): jsonable(e) for k, e in v.items()}
    if isinstance(v, (tuple, list)):
        return [jsonable(e) for e in v]
    return v
