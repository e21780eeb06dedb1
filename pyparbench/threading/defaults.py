"""The default intra-op thread count of kernels created with ``threads=None``."""

from __future__ import annotations

from pyparbench._checks import thread_count
from pyparbench._core import runtime as _rt


def get_default_threads() -> int:
    """Intra-op threads a kernel gets when created with ``threads=None``."""
    return int(_rt.get_default_threads())


def set_default_threads(threads: int) -> None:
    """Set the intra-op threads for kernels created from now on with ``threads=None``.

    Raises
    ------
    ValueError
        If ``threads`` < 1 or over ``pyparbench._checks.MAX_THREADS``.
    TypeError
        If ``threads`` is not an int.
    """
    _rt.set_default_threads(thread_count(threads, "threads"))
