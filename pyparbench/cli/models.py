"""``pyparbench models``: every registered model with its size and graph metrics."""

from __future__ import annotations

import argparse
from typing import Any

from pyparbench.cli._common import positive_int, print_json

__all__ = ["add_command", "model_rows"]


def model_rows(batch: int | None = None) -> list[dict[str, Any]]:
    """One dict per registered model: its description and ``Graph.summary()`` metrics.

    Building a graph allocates no weights, so this is quick even for the
    models with gigabytes of embedding tables.
    """
    from pyparbench.models import MODELS

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
            "heavy_ops": s["heavy_ops"],
            "depth": s["depth"],
            "avg_width": s["avg_width"],
            "max_width": s["max_width"],
            "work_span": s["work_span"],
            "bytes_moved": s["bytes_moved"],
            "nodes": s["nodes"],
        })
    return rows


def _print_table(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="pyparbench models",
                  caption="heavy ops: conv2d, linear, matmul, embedding_bag; "
                          "avg w = heavy / depth; --json adds work/span, bytes")
    table.add_column("model", style="bold", no_wrap=True)
    for col in ("batch", "GFLOPs", "params", "heavy", "depth", "avg w", "max w"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(r["model"], str(r["batch"]), f"{r['gflops']:.3f}",
                      f"{r['params'] / 1e6:.2f}M", str(r["heavy_ops"]), str(r["depth"]),
                      f"{r['avg_width']:.2f}", str(r["max_width"]))
    Console().print(table)


def _cmd_models(args: argparse.Namespace) -> int:
    rows = model_rows(args.batch)
    if args.json:
        print_json(rows)
    else:
        _print_table(rows)
    return 0


def add_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``models [--batch N] [--json]`` to the ``pyparbench`` subcommands.

    ``subparsers`` is what ``ArgumentParser.add_subparsers()`` returned; the
    command's handler is set as ``func`` and returns the exit status.
    """
    p = subparsers.add_parser(
        "models", help="every model: batch, GFLOPs, parameters, heavy ops, depth, width")
    p.add_argument("--batch", type=positive_int("--batch"), default=None,
                   help="batch size for every model (default: each model's own)")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.set_defaults(func=_cmd_models)
