"""pyparbench: how deep-learning operators and graphs behave under CPU parallelism knobs."""

from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = [
    "DnnlError",
    "get_default_threads",
    "info",
    "memory",
    "ops",
    "recommend",
    "set_default_threads",
    "threading",
    "topology",
]


def _check_core() -> None:
    # Without its compiled core this is the source folder, not an installed
    # package (typically: Python started in the repository root put it first
    # on sys.path). Say so in one sentence instead of failing deep inside.
    spec = importlib.util.find_spec("pyparbench._core")
    if spec is None or spec.origin is None or not spec.origin.endswith((".so", ".pyd")):
        here = Path(__file__).resolve().parent
        raise ImportError(
            f"pyparbench was imported from {here}, which has no compiled core "
            "(pyparbench/_core*.so): build and install it with `bash setup.sh` or "
            "`pip install .`, then run Python from another folder or with -P "
            "(python -P ignores the current directory)")


_check_core()

try:
    # One source for the version: the installed distribution's (pyproject.toml).
    __version__ = version("pyparbench")
except PackageNotFoundError:  # a build used in place, not installed
    __version__ = "0+unknown"

from pyparbench import memory, ops, recommend, threading  # noqa: E402
from pyparbench._core import DnnlError  # noqa: E402
from pyparbench.info import info  # noqa: E402
from pyparbench.threading.defaults import get_default_threads, set_default_threads  # noqa: E402
from pyparbench.threading.topology import topology  # noqa: E402
