"""pyparbench: how deep-learning operators and graphs behave under CPU parallelism knobs."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

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


from pyparbench._version import __version__

# A framework's child process (pyparbench.frameworks) sets this: the
# framework's own OpenMP and oneDNN runtimes must not meet the core's, so
# only the pure-Python modules (graph, models, settings, timing) are used.
_NO_CORE = os.environ.get("PYPARBENCH_NO_CORE") == "1"

if not _NO_CORE:
    _check_core()
    from pyparbench import memory, ops, threading
    from pyparbench._core import DnnlError
    from pyparbench.machine.info import info
    from pyparbench.recommender import recommend
    from pyparbench.threading.defaults import get_default_threads, set_default_threads
    from pyparbench.threading.topology import topology


def __getattr__(name: str) -> Any:
    if _NO_CORE and name in __all__:
        raise ImportError(f"pyparbench.{name} needs the native core, which this process "
                          "does not load (PYPARBENCH_NO_CORE=1)")
    raise AttributeError(f"module 'pyparbench' has no attribute {name!r}")
