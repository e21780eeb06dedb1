"""Writing a file whole or not at all: the text goes to a new file beside
it, reaches the disk, then replaces the old one in one rename, so that a
crash, a full disk or an error while writing leaves the old file as it was
and a reader never sees half of the new one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: str | Path, text: str | Iterable[str]) -> None:
    """Replace ``path`` with ``text`` (one string, or pieces written in
    turn, such as the lines of a JSONL file) atomically.

    Raises
    ------
    OSError
        The folder cannot take the new file; ``path`` is then untouched.
    """
    path = Path(path)
    # A unique name in the same folder: two writers never share a temporary
    # file, and the rename stays on one file system.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for piece in [text] if isinstance(text, str) else text:
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
