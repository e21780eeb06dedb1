"""What the subcommands share: option types that name their option, the
Settings options, and JSON output."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyparbench import choices
from pyparbench.graph import Graph
from pyparbench.models import MODELS, resolve
from pyparbench.settings import Settings, preset

__all__ = ["PRECISION_HELP", "add_precision_arg", "add_settings_args", "add_shape_arg",
           "model_from_args", "non_negative_int", "output_file", "output_folder",
           "positive_float", "positive_int", "print_json", "settings_from_args",
           "shapes_from_args"]


def _number_type(option: str, convert: Callable[[str], Any], noun: str, bound: str,
                 ok: Callable[[Any], bool]) -> Callable[[str], Any]:
    """An argparse type: ``convert(text)``, which must satisfy ``ok``; its
    errors name ``option``: "OPTION must be NOUN" or "OPTION must be BOUND"."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} must be {noun}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{option} must be {bound}, got {text}")
        return value

    return parse


def positive_int(option: str) -> Callable[[str], int]:
    """An argparse type: an integer >= 1, the error naming ``option``."""
    return _number_type(option, int, "an integer", ">= 1", lambda v: v >= 1)


def non_negative_int(option: str) -> Callable[[str], int]:
    """An argparse type: an integer >= 0, the error naming ``option``."""
    return _number_type(option, int, "an integer", ">= 0", lambda v: v >= 0)


def positive_float(option: str) -> Callable[[str], float]:
    """An argparse type: a finite number > 0, the error naming ``option``."""
    return _number_type(option, float, "a number", "a number > 0",
                        lambda v: math.isfinite(v) and v > 0)


def output_folder(path: str | Path, option: str) -> Path:
    """``path`` as a folder to write into, made if need be, checked before
    any work starts (absolute, from the user's working directory).

    Raises
    ------
    ValueError
        A file where the folder should be, or a folder that cannot be made
        or written (naming the option and the path).
    """
    p = Path(path).expanduser().absolute()
    if p.exists() and not p.is_dir():
        raise ValueError(f"{option} {path}: a file, not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"{option} {path}: cannot make the folder: {e.strerror or e}") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path}: the folder cannot be written")
    return p


def output_file(path: str | Path, option: str) -> Path:
    """``path`` as a file to write, checked before any work starts: its
    folder exists and can be written, and it is not a folder.

    Raises
    ------
    ValueError
        Naming the option, the path and what is wrong.
    """
    p = Path(path).expanduser().absolute()
    if p.is_dir():
        raise ValueError(f"{option} {path}: a folder, not a file")
    if not p.parent.is_dir():
        raise ValueError(f"{option} {path}: no folder {p.parent}")
    if not os.access(p.parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"{option} {path}: cannot be written")
    return p


def _shape(text: str) -> tuple[str, int]:
    name, eq, size = text.partition("=")
    if not (name and eq and size.strip().isdigit() and int(size) >= 1):
        raise argparse.ArgumentTypeError(f"--shape takes NAME=SIZE (a symbolic dimension of "
                                         f"the file's inputs and an int >= 1), got {text!r}")
    return name.strip(), int(size)


def add_shape_arg(p: argparse.ArgumentParser) -> None:
    """``--shape NAME=SIZE``, repeatable: the size of an ONNX file's
    symbolic dimension (a sequence length, a decoder's past), by the name the
    file gives it; the batch is ``--batch``."""
    p.add_argument("--shape", type=_shape, action="append", default=[], metavar="NAME=SIZE",
                   help="the size of a symbolic dimension of an ONNX file's inputs, by its "
                        "name in the file (repeat for several; the batch is --batch)")


def shapes_from_args(args: argparse.Namespace) -> dict[str, int]:
    """``--shape`` as a dict.

    Raises
    ------
    ValueError
        One name given two sizes.
    """
    out: dict[str, int] = {}
    for name, size in args.shape:
        if out.get(name, size) != size:
            raise ValueError(f"--shape {name} given twice: {out[name]} and {size}")
        out[name] = size
    return out


def model_from_args(args: argparse.Namespace) -> str:
    """``args.model`` resolved (:func:`pyparbench.models.resolve`): an ONNX
    file checked and named, its symbolic dimensions sized by ``--shape``.

    Raises
    ------
    ValueError
        An unknown model, a file that does not import, or ``--shape`` for a
        built-in model (it has no symbolic dimension).
    """
    shapes = shapes_from_args(args)
    if shapes and args.model in MODELS:
        raise ValueError(f"--shape sizes an ONNX file's symbolic dimensions; {args.model!r} is "
                         "a built-in model (its sizes are --batch)")
    return resolve(args.model, shapes)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def add_settings_args(p: argparse.ArgumentParser) -> None:
    """The Settings knobs as options (a preset, then individual overrides)."""
    g = p.add_argument_group("settings (a preset, then overrides)")
    g.add_argument("--preset", choices=choices.PRESETS, help="start from a preset")
    g.add_argument("--scheduler", choices=choices.SCHEDULERS)
    g.add_argument("--inter-op", type=positive_int("--inter-op"), metavar="N",
                   help="inter-op workers")
    g.add_argument("--intra-op", type=positive_int("--intra-op"), metavar="N",
                   help="threads per worker")
    g.add_argument("--operator", choices=choices.OPERATORS)
    g.add_argument("--library", choices=choices.LIBRARIES)
    g.add_argument("--pool", choices=choices.POOLS)
    g.add_argument("--affinity",
                   help=f"{', '.join(choices.AFFINITIES)}, or CPU lists such as 0,1:2,3")
    g.add_argument("--smt", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--placement", choices=choices.PLACEMENTS)
    g.add_argument("--graph-opt", metavar="PASSES",
                   help="graph passes applied to the native plan: full (the default), none "
                        f"(op for op as built), one of {', '.join(choices.GRAPH_PASSES)}, or "
                        "several joined by '+'")
    add_precision_arg(g)


# What --precision says, on every command that takes it.
PRECISION_HELP = ("the run's number format: fp32 (the default), bf16 (weights stored in "
                  "bf16, conv / linear / matmul activations converted to bf16, fp32 "
                  "accumulation, the other ops and the outputs fp32), or int8 (conv / linear "
                  "int8 on grids calibrated on generated data: speed figures, not accuracy "
                  "ones; matmuls and the other ops fp32); bf16 and int8 on the onednn library")


def add_precision_arg(p: argparse.ArgumentParser | argparse._ArgumentGroup,
                      help: str = PRECISION_HELP) -> None:  # noqa: A002 (argparse's name)
    """``--precision fp32|bf16`` (argparse's error, exit 2, names another value)."""
    p.add_argument("--precision", choices=choices.PRECISIONS, default=None, help=help)


def settings_from_args(args: argparse.Namespace, graph: Graph | None = None) -> Settings:
    """Settings from parsed options; ValueError naming a bad value."""
    base = preset(args.preset, graph=graph) if args.preset else Settings()
    changes: dict[str, Any] = {}
    for f in ("scheduler", "inter_op", "intra_op", "operator", "library", "pool", "smt",
              "placement", "graph_opt", "precision"):
        v = getattr(args, f)
        if v is not None:
            changes[f] = v
    if args.affinity is not None:
        a = args.affinity
        if a in choices.AFFINITIES:
            changes["affinity"] = a
        else:
            try:
                changes["affinity"] = tuple(tuple(int(c) for c in part.split(","))
                                            for part in a.split(":"))
            except ValueError:
                raise ValueError(f"--affinity must be {', '.join(choices.AFFINITIES)} or CPU "
                                 f"lists such as 0,1:2,3, got {a!r}") from None
    if changes.get("inter_op", base.inter_op) > 1 and "scheduler" not in changes:
        changes["scheduler"] = "async"
    return base.with_(**changes)
