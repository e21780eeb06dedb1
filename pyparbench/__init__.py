"""pyparbench: how deep-learning operators and graphs behave under CPU parallelism knobs."""

from typing import Any

__version__ = "0.1.0"
__all__ = [
    "DnnlError",
    "get_default_threads",
    "info",
    "memory",
    "ops",
    "set_default_threads",
    "threading",
    "topology",
]

try:
    from pyparbench._core import DnnlError
except ImportError as _exc:
    # Not built: the module is missing, or only its .pyi stubs' folder is there.
    if _exc.name != "pyparbench._core":
        raise
    # The pure-Python parts (graph, models, reference) still import; the
    # native names raise when used.
    _CORE_MISSING: ImportError | None = _exc
else:
    _CORE_MISSING = None
    from pyparbench import memory, ops, threading
    from pyparbench.info import info
    from pyparbench.threading.topology import topology
    from pyparbench.threads import get_default_threads, set_default_threads


def __getattr__(name: str) -> Any:
    if _CORE_MISSING is not None and name in __all__:
        raise ImportError(f"pyparbench.{name} needs the native core (pyparbench._core), "
                          "which is not built: pip install the package") from _CORE_MISSING
    raise AttributeError(f"module 'pyparbench' has no attribute {name!r}")
