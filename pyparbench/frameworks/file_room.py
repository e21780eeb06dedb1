"""Room for the model file a generation writes before it runs (a GGUF file
for llama.cpp, an ONNX export for ONNX Runtime): checked before anything is
written, so that a 1B decoder on a small machine fails in one line naming
what it needs, not minutes later with a full disk or a killed process."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from pyparbench.memory import available_bytes

__all__ = ["check_room"]


def check_room(what: str, folder: str | Path, *, disk_bytes: int, memory_bytes: int,
               available: int | None = None) -> None:
    """Raise where ``folder``'s file system has less free space than
    ``disk_bytes`` or the machine less memory available (``available``:
    MemAvailable by default) than ``memory_bytes``, naming ``what``, the need
    and what there is.

    Raises
    ------
    OSError
        ENOSPC: too little free disk in ``folder``.
    MemoryError
        Too little memory available.
    """
    free = shutil.disk_usage(folder).free
    if disk_bytes > free:
        raise OSError(errno.ENOSPC, f"{what} needs {disk_bytes / 1e9:.1f} GB of disk in "
                                    f"{folder}; it has {free / 1e9:.1f} GB free (set TMPDIR "
                                    f"to a folder with more)")
    memory = available_bytes() if available is None else available
    if memory is not None and memory_bytes > memory:
        raise MemoryError(f"{what} needs about {memory_bytes / 1e9:.1f} GB of memory; this "
                          f"machine has {memory / 1e9:.1f} GB available")
