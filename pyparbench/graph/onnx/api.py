"""The import's entry: :func:`from_onnx` reads and checks the file
(:mod:`~pyparbench.graph.onnx.load`), then imports its nodes
(:mod:`~pyparbench.graph.onnx.importer`) with the converters of
:mod:`~pyparbench.graph.onnx.registry`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import onnx

from pyparbench._checks import check_shapes
from pyparbench.graph.ir import Graph
from pyparbench.graph.onnx.importer import Importer
from pyparbench.graph.onnx.load import (
    DEFAULT_MAX_BYTES,
    check,
    default_opset,
    load,
    read_inputs,
)
from pyparbench.graph.onnx.registry import CONVERTERS, INTEGER_READERS

__all__ = ["from_onnx"]


def from_onnx(model: str | os.PathLike[str] | onnx.ModelProto, *, batch: int | None = None,
              shapes: Mapping[str, int] | None = None, name: str | None = None,
              max_bytes: int = DEFAULT_MAX_BYTES) -> Graph:
    """The ONNX model ``model`` (a path or a ModelProto) as a Graph with its own weights.

    Parameters
    ----------
    model
        A path to an ``.onnx`` file (external data beside it), or a ModelProto.
    batch
        The batch size of every input whose first dimension is symbolic
        (default 1); an input whose first dimension is fixed must have
        this batch when one is given.
    shapes
        The size of each other symbolic dimension of the inputs, by the name
        the file gives it (``{"past_sequence_length": 127}``); a file with a
        symbolic dimension this does not size is refused, naming it and
        every symbolic dimension the file has.
    name
        The graph's name (default: the file's stem, or the model's graph name).
    max_bytes
        The largest file (with its external data) read.

    Returns
    -------
    Graph
        Its ``meta`` holds ``batch``, ``family`` "onnx", ``source`` (the file
        name), ``sha256`` (of the file's bytes), ``opset`` and
        ``onnx_input_shapes`` (each input's shape in the file, with the batch
        and ``shapes`` set; the graph's inputs have these shapes, int64 ids
        included) and ``symbolic`` (each symbolic dimension's name, the
        batch aside, and the size ``shapes`` gave it).

    Raises
    ------
    ValueError
        One line for a file that is not ONNX, truncated, too large, missing
        its external data, computing in another dtype than float32, with
        NaN or infinite weights, declaring an opset newer than the installed
        onnx knows, or with a Conv whose kernel_shape contradicts its weights;
        for a batch that contradicts a fixed one, a symbolic dimension
        ``shapes`` does not size or a name in it the file does not have; and one listing every op the
        IR cannot run (type, count, first node), before anything is built.
    """
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)
                              or batch < 1):
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"max_bytes must be an int >= 1, got {max_bytes!r}")
    proto, src, digest = load(model, max_bytes)
    # First the opset: onnx's checker reads a newer one's ops as its own.
    opset = default_opset(proto, src)
    check(proto, src)
    if name is None:
        name = (Path(os.fspath(model)).stem if not isinstance(model, onnx.ModelProto)
                else proto.graph.name or "onnx_model")
    inputs = read_inputs(proto.graph, src, batch, shapes)
    graph = Importer(proto, src, inputs, name, opset, CONVERTERS, INTEGER_READERS).run()
    graph.meta.update({"source": Path(os.fspath(model)).name
                       if not isinstance(model, onnx.ModelProto) else "model",
                       "sha256": digest,
                       # Every size given is of a dimension the file names.
                       "symbolic": dict(sorted(check_shapes(shapes).items()))})
    return graph
