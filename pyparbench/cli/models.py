"""``pyparbench models``: every registered model with its size and graph
metrics; ``models --describe FILE`` (or a model's name) describes one graph,
a user's ONNX file imported as :func:`pyparbench.graph.from_onnx` makes it."""

from __future__ import annotations

import argparse
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from pyparbench.cli._common import add_shape_arg, positive_int, print_json, shapes_from_args
from pyparbench.models import MODELS
from pyparbench.models.files import file_name, with_shapes

__all__ = ["add_command", "describe", "model_rows"]


def model_rows(batch: int | None = None) -> list[dict[str, Any]]:
    """One dict per registered model: its description, ``Graph.summary()``
    metrics and the bytes of its float32 weights.

    Building a graph allocates no weights, so this is quick even for the
    models with gigabytes of embedding tables.
    """
    rows = []
    for name, spec in MODELS.items():
        s = spec.build(batch).summary()
        rows.append({
            "model": name,
            "kind": spec.kind,
            "family": spec.family,
            "description": spec.description,
            "batch": s["meta"]["batch"],
            "gflops": s["gflops"],
            "params": s["params"],
            "weight_bytes": 4 * s["params"],  # float32
            "heavy_ops": s["heavy_ops"],
            "depth": s["depth"],
            "avg_width": s["avg_width"],
            "max_width": s["max_width"],
            "work_span": s["work_span"],
            "bytes_moved": s["bytes_moved"],
            "nodes": s["nodes"],
        })
    return rows


def describe(model: str, batch: int | None = None,
             shapes: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The graph of ``model`` (a built-in model's name, or an ONNX file's
    path, its symbolic dimensions sized by ``shapes``) described: nodes,
    FLOPs, parameters, heavy ops, depth, average and largest width (the
    study's tuner's input), op counts, and for a file its name, content
    hash and symbolic dimensions.

    Raises
    ------
    ValueError
        Neither a model's name nor a file, or a file that does not import.
    """
    if model in MODELS:
        if shapes:
            raise ValueError(f"--shape sizes an ONNX file's symbolic dimensions; {model!r} is a "
                             "built-in model (its sizes are --batch)")
        graph = MODELS[model].build(batch)
        source: dict[str, Any] = {"kind": MODELS[model].kind, "family": MODELS[model].family}
    elif Path(model).is_file():
        from pyparbench.graph import from_onnx  # noqa: PLC0415 (heavy: onnx)

        # Named as runs, records and reports name it: file name, content hash, sizes.
        graph = from_onnx(model, batch=batch, shapes=shapes,
                          name=with_shapes(file_name(model), shapes))
        source = {"file": str(model), "sha256": graph.meta["sha256"],
                  "symbolic": graph.meta["symbolic"]}
    else:
        raise ValueError(f"--describe: {model!r} is neither a model ({', '.join(MODELS)}) "
                         "nor a file")
    s = graph.summary()
    return {"model": graph.name, **source, "batch": s["meta"].get("batch"),
            "nodes": s["nodes"], "gflops": s["gflops"], "flops": s["flops"],
            "params": s["params"], "heavy_ops": s["heavy_ops"], "depth": s["depth"],
            "avg_width": s["avg_width"], "max_width": s["max_width"],
            "work_span": s["work_span"], "bytes_moved": s["bytes_moved"],
            "inputs": s["inputs"], "outputs": s["outputs"], "op_counts": s["op_counts"]}


def _print_description(d: dict[str, Any]) -> None:
    table = Table(title=f"pyparbench models --describe {d['model']}", show_header=False,
                  caption="heavy ops: conv2d, linear, matmul, embedding_bag; "
                          "avg width = heavy ops / depth of the heavy-op graph")
    table.add_column("", style="bold", no_wrap=True)
    table.add_column("")
    rows = []
    if "file" in d:
        rows += [("file", d["file"]), ("sha256", d["sha256"]),
                 ("symbolic", ", ".join(f"{k} = {v}" for k, v in d["symbolic"].items())
                  or "none (the batch aside)")]
    rows += [("batch", str(d["batch"])), ("nodes", str(d["nodes"])),
             ("GFLOPs", f"{d['gflops']:.4f}"), ("params", f"{d['params']:,}"),
             ("heavy ops", str(d["heavy_ops"])), ("depth", str(d["depth"])),
             ("avg width", f"{d['avg_width']:.2f}"), ("max width", str(d["max_width"])),
             ("inputs", ", ".join(f"{k} {tuple(v)}" for k, v in d["inputs"].items())),
             ("outputs", ", ".join(f"{k} {tuple(v)}" for k, v in d["outputs"].items())),
             ("ops", ", ".join(f"{k} {v}" for k, v in d["op_counts"].items()))]
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)


def _bytes(n: int) -> str:
    return f"{n / 1e9:.1f}GB" if n >= 1e9 else f"{n / 1e6:.1f}MB"


def _print_table(rows: list[dict[str, Any]]) -> None:
    table = Table(title="pyparbench models",
                  caption="weights: float32 bytes; heavy ops: conv2d, linear, matmul, "
                          "embedding_bag; avg w = heavy / depth; --json adds parameters, "
                          "work/span, bytes moved; at --precision int8 the conv2d / linear "
                          "nodes run int8 on grids calibrated on generated data: speed "
                          "figures, not accuracy ones")
    table.add_column("model", style="bold", no_wrap=True)
    for col in ("batch", "GFLOPs", "weights", "heavy", "depth", "avg w", "max w"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(r["model"], str(r["batch"]), f"{r['gflops']:.3f}",
                      _bytes(r["weight_bytes"]),
                      str(r["heavy_ops"]), str(r["depth"]),
                      f"{r['avg_width']:.2f}", str(r["max_width"]))
    Console().print(table)


def _cmd_models(args: argparse.Namespace) -> int:
    if args.describe is not None:
        d = describe(args.describe, args.batch, shapes_from_args(args))
        if args.json:
            print_json(d)
        else:
            _print_description(d)
        return 0
    rows = model_rows(args.batch)
    if args.json:
        print_json(rows)
    else:
        _print_table(rows)
    return 0


def add_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``models [--batch N] [--json] [--describe FILE|MODEL]`` to the
    ``pyparbench`` subcommands.

    ``subparsers`` is what ``ArgumentParser.add_subparsers()`` returned; the
    command's handler is set as ``func`` and returns the exit status.
    """
    p = subparsers.add_parser(
        "models", help="every model: batch, GFLOPs, parameters, weight bytes, heavy ops, depth, "
                       "width")
    p.add_argument("--batch", type=positive_int("--batch"), default=None,
                   help="batch size for every model (default: each model's own)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--describe", metavar="FILE|MODEL", default=None,
                   help="describe one graph: an ONNX file (imported with its own weights) or "
                        "a model's name: nodes, FLOPs, parameters, heavy ops, depth, width")
    add_shape_arg(p)
    p.set_defaults(func=_cmd_models)
