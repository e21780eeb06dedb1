"""A user's ONNX file taken wherever a model name is: its name, its path, its graph.

A file is named ``<file name>@<sha256[:12]>`` (``my.onnx@3f2a9c01b7de``): the
name records, plans, the report and ``compare`` carry. The content hash in
the name means that a changed file is a different model: a resumed run
never reuses the old file's results, and ``compare`` matches rows of the
same bytes only.

The name alone does not say where the file is, so :func:`register` keeps
name -> absolute path in this process and in its environment
(:data:`FILES_ENV`, JSON), which every child process inherits: a child
loads the file by path, and refuses it when its bytes no longer hash to
the name (the file changed after the run was planned).

A file whose inputs have symbolic dimensions besides the batch (a sequence
length, the past of a decoder's cache) is measured at sizes given by name,
and those sizes are part of its model name:
``decoder.onnx@3f2a9c01b7de:past_sequence_length=127,sequence_length=1``
(sorted by name), so that runs of one file at two sizes are two models.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyparbench._checks import check_shapes

if TYPE_CHECKING:
    from pyparbench.graph import Graph

__all__ = ["FILES_ENV", "env_register", "env_registry", "file_name", "file_path", "is_file_key",
           "looks_like_file", "load", "register", "shapes_of", "with_shapes"]

# name -> absolute path of every file registered by this process or a parent.
FILES_ENV = "PYPARBENCH_MODEL_FILES"
_HASH_LEN = 12


def looks_like_file(token: str) -> bool:
    """Whether ``token`` names a file rather than a built-in model: it ends
    in ``.onnx``, has a path separator, or is an existing file."""
    return token.endswith(".onnx") or os.sep in token or Path(token).is_file()


def _split(name: str) -> tuple[str, dict[str, int]] | None:
    """(``<file>@<digest>``, the sizes its suffix gives), or None where
    ``name`` is not a file's model name."""
    base, colon, suffix = name.partition(":") if "@" in name else (name, "", "")
    stem, at, digest = base.rpartition("@")
    if not (stem and at and len(digest) == _HASH_LEN
            and all(c in "0123456789abcdef" for c in digest)):
        return None
    shapes: dict[str, int] = {}
    for part in suffix.split(",") if colon else ():
        dim, eq, size = part.partition("=")
        if not (dim and eq and size.isdigit() and int(size) >= 1) or dim in shapes:
            return None
        shapes[dim] = int(size)
    return base, shapes


def is_file_key(name: str) -> bool:
    """Whether ``name`` is a file's model name (``<file>@<12 hex digits>``,
    then ``:name=size,...`` where it sets symbolic dimensions)."""
    return _split(name) is not None


def shapes_of(name: str) -> dict[str, int]:
    """The symbolic dimensions' sizes file model name ``name`` sets ({}: none).

    Raises
    ------
    ValueError
        ``name`` is not a file's model name.
    """
    split = _split(name)
    if split is None:
        raise ValueError(f"{name!r} is not an ONNX file's model name")
    return split[1]


def with_shapes(name: str, shapes: Mapping[str, int] | None) -> str:
    """File model name ``name`` (without sizes) with ``shapes`` set."""
    if not shapes:
        return name
    return name + ":" + ",".join(f"{k}={shapes[k]}" for k in sorted(shapes))


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_name(path: str | os.PathLike[str]) -> str:
    """The model name of the file at ``path``: ``<file name>@<sha256[:12]>``.

    Raises
    ------
    ValueError
        No such file.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"ONNX file {str(path)!r}: no such file")
    return f"{p.name}@{_digest(p)[:_HASH_LEN]}"


def env_registry(env: str) -> dict[str, str]:
    """The name -> path map kept in environment variable ``env`` (JSON),
    which children inherit; {} where unset.

    Raises
    ------
    ValueError
        A value that is not a JSON object of strings.
    """
    raw = os.environ.get(env, "")
    if not raw:
        return {}
    try:
        got = json.loads(raw)
    except ValueError:
        raise ValueError(f"{env} is not JSON: {raw[:200]!r}") from None
    if not isinstance(got, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in got.items()):
        raise ValueError(f"{env} must map model names to paths, got {raw[:200]!r}")
    return got


def env_register(env: str, name: str, path: str) -> None:
    """Add ``name`` -> ``path`` to the map in ``env``, for this process and
    the children it starts from now on."""
    registry = env_registry(env)
    registry[name] = path
    os.environ[env] = json.dumps(registry)


def _registry() -> dict[str, str]:
    return env_registry(FILES_ENV)


def register(path: str | os.PathLike[str], *, check: bool = True,
             shapes: Mapping[str, int] | None = None) -> str:
    """The model name of the ONNX file at ``path`` with its symbolic
    dimensions sized by ``shapes`` (by name; the batch aside), registered so
    that this process and its children find the file by that name.

    ``check``: import the file once (at its own batch, or 1 where symbolic)
    so that a file that is not ONNX, has ops the importer cannot map, or a
    symbolic dimension ``shapes`` does not size, is refused here, before
    anything runs.

    Raises
    ------
    ValueError
        No such file; with ``check``, a file that does not import (one line,
        or one error listing every unsupported op).
    """
    shapes = check_shapes(shapes)
    name = file_name(path)
    if check:
        from pyparbench.graph import from_onnx  # noqa: PLC0415 (heavy: onnx)

        from_onnx(path, shapes=shapes)
    env_register(FILES_ENV, name, str(Path(path).resolve()))
    return with_shapes(name, shapes)


def file_path(name: str) -> Path:
    """Where the registered file of model name ``name`` is.

    Raises
    ------
    ValueError
        ``name`` is not registered in this process or a parent.
    """
    split = _split(name)
    path = _registry().get(split[0] if split is not None else name)
    if path is None:
        raise ValueError(f"model {name!r} is an ONNX file's name, but no file of that name "
                         f"was given to this run (pass the file's path instead)")
    return Path(path)


def load(name: str, batch: int | None = None, **kw: Any) -> Graph:
    """The graph of registered file ``name`` at ``batch``, named ``name``.

    ``seed`` is accepted and ignored (a file's weights are its own); no
    other keyword argument is.

    Raises
    ------
    ValueError
        An unregistered name, another keyword argument, a file whose bytes
        no longer hash to ``name`` (it changed after the run was planned),
        or a file that does not import at ``batch``.
    """
    kw.pop("seed", None)
    if kw:
        raise ValueError(f"model {name!r} is an ONNX file: builder options "
                         f"{', '.join(sorted(kw))} do not apply")
    from pyparbench.graph import from_onnx  # noqa: PLC0415 (heavy: onnx)

    path = file_path(name)
    graph = from_onnx(path, batch=batch, shapes=shapes_of(name), name=name)
    if not name.partition(":")[0].endswith("@" + str(graph.meta["sha256"])[:_HASH_LEN]):
        raise ValueError(f"ONNX file {str(path)!r} changed since it was named {name!r} "
                         "(its content hash differs): run it again to measure the new file")
    # ONNX Runtime runs the file itself, not a translation of the graph.
    graph.meta.update({"model": name, "onnx_file": str(path)})
    return graph
