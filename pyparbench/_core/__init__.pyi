# Stubs of the compiled extension pyparbench._core (csrc/bindings/).
from . import graph as graph
from . import ops as ops
from . import peak as peak
from . import runtime as runtime
from . import threading as threading

class DnnlError(RuntimeError):
    """A oneDNN failure; ``status`` is oneDNN's status code, ``status_name`` its name."""

    status: int
    status_name: str

class PrecisionUnavailable(RuntimeError):
    """A precision this oneDNN build has no kernel for on the ISA it
    dispatches to (bf16 below avx512_core under oneDNN 2.x): a fact about
    the machine, said in one line by the command line."""
