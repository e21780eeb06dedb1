"""An ONNX file's weights moved into one external data file beside it.

A protobuf message, and so an ONNX file, is capped at 2 GB: a larger model
keeps its initializers as external data, raw bytes in another file of the
same folder that the ``.onnx`` names with an offset and a length, which
ONNX Runtime reads from the model's folder. PyTorch's TorchScript exporter
switches to external data by itself past 2 GB, one file per tensor (148 for
a 1B decoder); :func:`weights_to_one_file` gathers them, or an in-file
model's initializers, into ``<file>.onnx.data``, one tensor at a time: no
more than the largest tensor is ever held, where ``onnx.save_model``'s own
``save_as_external_data`` needs the whole model loaded first.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import IO, Any

__all__ = ["external_data_files", "weights_to_one_file"]

# Each tensor's offset in the data file is a multiple of this, so that a
# runtime may map it into memory page by page instead of reading it.
_ALIGN = 4096


def external_data_files(path: str | Path) -> list[Path]:
    """The external data files the ONNX file at ``path`` names (each once,
    in the folder of ``path``); none for a model that holds its weights."""
    import onnx  # noqa: PLC0415 (optional, heavy)

    model = onnx.load(str(path), load_external_data=False)
    folder = Path(path).parent
    names = {_location(t) for t in model.graph.initializer
             if t.data_location == onnx.TensorProto.EXTERNAL}
    return [folder / n for n in sorted(names)]


def _location(tensor: Any) -> str:
    return str({e.key: e.value for e in tensor.external_data}["location"])


def weights_to_one_file(path: str | Path) -> Path:
    """Every initializer of the ONNX file at ``path``, in the file or in
    external files of its own, written into ``<path>.data`` (the ``.onnx``
    rewritten to name it). Each file copied from is removed once its last
    tensor is copied, so the folder holds the weights about once, not twice.
    The data file's path back.

    Raises
    ------
    FileNotFoundError
        No ONNX file at ``path``, or an external file it names missing
        (named).
    ValueError
        An external file shorter than the tensor it should hold (named).
    """
    import onnx  # noqa: PLC0415 (optional, heavy)

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no ONNX file at {path}")
    model = onnx.load(str(path), load_external_data=False)
    data = path.with_name(path.name + ".data")
    # Tensors left to copy from each external file.
    left = Counter(_location(t) for t in model.graph.initializer
                   if t.data_location == onnx.TensorProto.EXTERNAL)
    # Written under another name first: the file may be re-gathered from a
    # data file of this very name.
    partial = path.with_name(path.name + ".data.partial")
    with partial.open("wb") as out:
        for tensor in model.graph.initializer:
            offset = -out.tell() % _ALIGN
            out.write(b"\0" * offset)
            start = out.tell()
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                source = _copy_external(tensor, path.parent, out)
                left[source.name] -= 1
                if not left[source.name]:
                    source.unlink()
            elif tensor.HasField("raw_data"):
                out.write(tensor.raw_data)
                tensor.ClearField("raw_data")
            else:
                continue  # a typed field (int64 shapes and the like): left in the file
            length = out.tell() - start
            del tensor.external_data[:]
            for key, value in (("location", data.name), ("offset", str(start)),
                               ("length", str(length))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            tensor.data_location = onnx.TensorProto.EXTERNAL
    partial.replace(data)
    onnx.save_model(model, str(path))
    return data


def _copy_external(tensor: Any, folder: Path, out: IO[bytes]) -> Path:
    """Copy the bytes an external tensor names into ``out`` in chunks; the
    file they came from."""
    entries = {e.key: e.value for e in tensor.external_data}
    source = folder / str(entries["location"])
    offset = int(entries.get("offset", 0))
    if not source.is_file():
        raise FileNotFoundError(f"external data {source} of tensor "
                                f"{tensor.name!r} is missing")
    length = int(entries["length"]) if "length" in entries \
        else source.stat().st_size - offset
    with source.open("rb") as f:
        f.seek(offset)
        left = length
        while left:
            chunk = f.read(min(left, 64 << 20))
            if not chunk:
                raise ValueError(f"external data {source} ends {left} bytes before tensor "
                                 f"{tensor.name!r}'s {length}")
            out.write(chunk)
            left -= len(chunk)
    return source
