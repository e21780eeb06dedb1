"""What the subcommands share: option types that name their option, the
Settings options, and JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from pyparbench import names
from pyparbench._checks import positive_int as _positive_int
from pyparbench.graph import Graph
from pyparbench.settings import Settings, preset

__all__ = ["add_settings_args", "positive_int", "print_json", "settings_from_args"]


def positive_int(option: str) -> Callable[[str], int]:
    """An argparse type: an integer >= 1, the error naming ``option``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{option} must be an integer, got {text!r}") from None
        try:
            return _positive_int(value, option)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def add_settings_args(p: argparse.ArgumentParser) -> None:
    """The Settings knobs as options (a preset, then individual overrides)."""
    g = p.add_argument_group("settings (a preset, then overrides)")
    g.add_argument("--preset", choices=names.PRESETS, help="start from a preset")
    g.add_argument("--scheduler", choices=names.SCHEDULERS)
    g.add_argument("--inter-op", type=positive_int("--inter-op"), metavar="N",
                   help="inter-op workers")
    g.add_argument("--intra-op", type=positive_int("--intra-op"), metavar="N",
                   help="threads per worker")
    g.add_argument("--operator", choices=names.OPERATORS)
    g.add_argument("--library", choices=names.LIBRARIES)
    g.add_argument("--pool", choices=names.POOLS)
    g.add_argument("--affinity",
                   help=f"{', '.join(names.AFFINITIES)}, or CPU lists such as 0,1:2,3")
    g.add_argument("--smt", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--placement", choices=names.PLACEMENTS)
    g.add_argument("--graph-opt", metavar="PASSES",
                   help="graph passes applied to the native plan: full (the default), none "
                        f"(op for op as built), one of {', '.join(names.GRAPH_PASSES)}, or "
                        "several joined by '+'")


def settings_from_args(args: argparse.Namespace, graph: Graph | None = None) -> Settings:
    """Settings from parsed options; ValueError naming a bad value."""
    base = preset(args.preset, graph=graph) if args.preset else Settings()
    changes: dict[str, Any] = {}
    for f in ("scheduler", "inter_op", "intra_op", "operator", "library", "pool", "smt",
              "placement", "graph_opt"):
        v = getattr(args, f)
        if v is not None:
            changes[f] = v
    if args.affinity is not None:
        a = args.affinity
        if a in names.AFFINITIES:
            changes["affinity"] = a
        else:
            try:
                changes["affinity"] = tuple(tuple(int(c) for c in part.split(","))
                                            for part in a.split(":"))
            except ValueError:
                raise ValueError(f"--affinity must be {', '.join(names.AFFINITIES)} or CPU "
                                 f"lists such as 0,1:2,3, got {a!r}") from None
    if changes.get("inter_op", base.inter_op) > 1 and "scheduler" not in changes:
        changes["scheduler"] = "async"
    return base.with_(**changes)
