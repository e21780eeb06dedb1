"""The PyTorch module a user's ONNX file was exported from, given through the Python API.

PyTorch cannot run an ONNX file, so for a file PyTorch's rows say "not
applicable: a file (no original module)", unless the module is given:
:func:`attach_module` exports it with ``torch.export`` (its batch dimension
dynamic where the module allows, else fixed at ``batch``), checks that it
computes what the file does, saves the exported program (``.pt2``) and
registers it under the file's model name for this process and the children
it starts (:data:`MODULES_ENV`). A PyTorch child then runs that module in
each mode (eager: the exported program's module; script: it traced and
frozen; compile: ``torch.compile`` of it) on the inputs every runtime is
given. TensorFlow's rows stay not applicable (no TensorFlow model is taken).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pyparbench.models.files as files
from pyparbench.reference import output_error

__all__ = ["MODULES_ENV", "attach_module", "attached_module"]

# file model name -> path of the exported program of its PyTorch module.
MODULES_ENV = "PYPARBENCH_TORCH_MODULES"
# How far the module's outputs may be from ONNX Runtime's on the file.
_AGREEMENT = 1e-3


def attached_module(name: str) -> Path | None:
    """The exported program attached to file model ``name``, or None."""
    path = files.env_registry(MODULES_ENV).get(name)
    return Path(path) if path is not None else None


def attach_module(model: str | os.PathLike[str], module: Any, *, batch: int = 1,
                  directory: str | os.PathLike[str] | None = None) -> str:
    """Give PyTorch the module an ONNX file was exported from; returns the
    file's model name (as :func:`pyparbench.models.resolve` gives it).

    Parameters
    ----------
    model
        The ONNX file's path, or its model name (``my.onnx@<sha256[:12]>``).
    module
        The ``torch.nn.Module`` (put in eval mode); its ``forward`` takes the
        file's inputs in the file's order and returns its outputs in order.
    batch
        The batch of the example inputs it is exported with (its batch
        dimension is made dynamic where the module allows).
    directory
        Where the exported program goes (default: the system's temporary
        folder); it must stay there while runs use it.

    Raises
    ------
    ValueError
        Not an ONNX file (a model pyparbench builds runs as its own
        translation), a file that does not import, a module that
        ``torch.export`` cannot export, or one whose outputs are not the
        file's (max |module - ORT| / max |ORT| above 1e-3 on random inputs).
    """
    import torch

    name = os.fspath(model)
    if files.is_file_key(name):
        files.file_path(name)  # registered: usable as it is
    elif files.looks_like_file(name):
        name = files.register(name)
    else:
        raise ValueError(f"model {name!r} is not an ONNX file (a model pyparbench builds "
                         "runs in PyTorch as its own translation): a module is attached to a "
                         "file")
    module = module.eval()
    # A batch of 1 would be specialised (torch.export fixes sizes 0 and 1):
    # the dynamic export takes 2 at least.
    dim = torch.export.Dim("batch", min=1, max=1 << 16)
    example, order, shapes, feeds = _example(name, batch)  # the file imported once
    wide = example if batch >= 2 else tuple(torch.cat([t, t]) for t in example)
    try:
        program = torch.export.export(module, wide,
                                      dynamic_shapes=tuple({0: dim} for _ in wide))
    except Exception:  # a module that fixes its batch: exported at this one
        try:
            program = torch.export.export(module, example)
        except Exception as e:
            raise ValueError(f"torch.export cannot export the module given for {name}: "
                             f"{type(e).__name__}: {str(e).splitlines()[0][:300]}") from None
    _check_agreement(name, program.module(), example, order, shapes, feeds)
    folder = Path(directory) if directory is not None else Path(tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"pyparbench-module-{name.replace('@', '-')}.pt2"
    torch.export.save(program, str(path))
    files.env_register(MODULES_ENV, name, str(path.resolve()))
    return name


def _example(name: str, batch: int) -> tuple[tuple[Any, ...], list[str], dict[str, Any],
                                             dict[str, Any]]:
    """The file's inputs at ``batch`` as tensors in the file's order and
    shapes, with those names, shapes and the arrays."""
    import torch

    graph = files.load(name, batch)
    shapes = graph.meta["onnx_input_shapes"]
    feeds = graph.random_inputs(seed=0)
    order = [graph.nodes[i].name for i in graph.inputs]
    return (tuple(torch.from_numpy(feeds[k].reshape(shapes[k])) for k in order), order,
            shapes, feeds)


def _check_agreement(name: str, module: Any, example: tuple[Any, ...], order: list[str],
                     shapes: dict[str, Any], feeds: dict[str, Any]) -> None:
    """Refuse a module whose outputs are not ONNX Runtime's on the file."""
    try:
        import onnxruntime as ort  # type: ignore[import-untyped]
    except ImportError:  # nothing to check against
        return
    import torch

    sess = ort.InferenceSession(str(files.file_path(name)),
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, {k: feeds[k].reshape(shapes[k]) for k in order})
    with torch.inference_mode():
        out = module(*example)
    got = [out] if isinstance(out, torch.Tensor) else list(out)
    if len(got) != len(want):
        raise ValueError(f"the module given for {name} returns {len(got)} output(s), the "
                         f"file {len(want)}")
    names = [o.name for o in sess.get_outputs()]
    try:
        err = output_error(dict(zip(names, (g.detach().numpy() for g in got), strict=True)),
                           dict(zip(names, want, strict=True)), labels=("the module", "the file"))
    except ValueError as e:
        raise ValueError(f"the module given for {name}: {e}") from None
    if not err <= _AGREEMENT:
        raise ValueError(f"the module given for {name} is not the file's network: max "
                         f"|module - ORT| / max |ORT| = {err:.2e} on random inputs "
                         f"(at most {_AGREEMENT:g})")
