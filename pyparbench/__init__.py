"""pyparbench: how deep-learning operators and graphs behave under CPU parallelism knobs."""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyparbench._version import __version__

if TYPE_CHECKING:
    from pyparbench import memory, ops, threading
    from pyparbench._core import DnnlError, PrecisionUnavailable
    from pyparbench.machine.info import info
    from pyparbench.recommender import recommend
    from pyparbench.threading.defaults import get_default_threads, set_default_threads
    from pyparbench.threading.topology import topology

__all__ = [
    "DnnlError",
    "PrecisionUnavailable",
    "__version__",
    "get_default_threads",
    "info",
    "memory",
    "ops",
    "recommend",
    "set_default_threads",
    "threading",
    "topology",
]

# The public API, loaded on first use: `import pyparbench` (and with it every
# `import pyparbench.<module>`) then costs no native core, recommender or
# numpy until a name is asked for. name -> (module, attribute; None: the module).
_LAZY: dict[str, tuple[str, str | None]] = {
    "DnnlError": ("pyparbench._core", "DnnlError"),
    "PrecisionUnavailable": ("pyparbench._core", "PrecisionUnavailable"),
    "get_default_threads": ("pyparbench.threading.defaults", "get_default_threads"),
    "info": ("pyparbench.machine.info", "info"),
    "memory": ("pyparbench.memory", None),
    "ops": ("pyparbench.ops", None),
    "recommend": ("pyparbench.recommender", "recommend"),
    "set_default_threads": ("pyparbench.threading.defaults", "set_default_threads"),
    "threading": ("pyparbench.threading", None),
    "topology": ("pyparbench.threading.topology", "topology"),
}


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


# A framework's child process (pyparbench.frameworks) sets this: the
# framework's own OpenMP and oneDNN runtimes must not meet the core's, so
# only the pure-Python modules (graph, models, settings, timing) are used.
_NO_CORE = os.environ.get("PYPARBENCH_NO_CORE") == "1"

if not _NO_CORE:
    _check_core()


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'pyparbench' has no attribute {name!r}")
    if _NO_CORE:
        raise ImportError(f"pyparbench.{name} needs the native core, which this process "
                          "does not load (PYPARBENCH_NO_CORE=1)")
    module_name, attribute = where
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
