"""pyparbench: how deep-learning operators and graphs behave under CPU parallelism knobs."""

from pyparbench import ops
from pyparbench._core import DnnlError
from pyparbench.info import info
from pyparbench.threads import get_default_threads, set_default_threads

__version__ = "0.1.0"
__all__ = ["DnnlError", "get_default_threads", "info", "ops", "set_default_threads"]
