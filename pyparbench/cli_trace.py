"""``pyparbench trace``: run a model once under some settings and write its
per-node trace as Chrome trace JSON (open it in Perfetto or chrome://tracing)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_settings_args", "add_trace_command", "settings_from_args"]


def add_settings_args(p: argparse.ArgumentParser) -> None:
    """The Settings knobs as options (a preset, then individual overrides)."""
    from pyparbench import settings as st

    g = p.add_argument_group("settings (a preset, then overrides)")
    g.add_argument("--preset", choices=st.PRESETS, help="start from a preset")
    g.add_argument("--scheduler", choices=st.SCHEDULERS)
    g.add_argument("--inter-op", type=int, metavar="N", help="inter-op workers")
    g.add_argument("--intra-op", type=int, metavar="N", help="threads per worker")
    g.add_argument("--operator", choices=st.OPERATORS)
    g.add_argument("--library", choices=st.LIBRARIES)
    g.add_argument("--pool", choices=st.POOLS)
    g.add_argument("--affinity", help="none, compact, scatter, or CPU lists such as 0,1:2,3")
    g.add_argument("--smt", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--placement", choices=st.PLACEMENTS)


def settings_from_args(args: argparse.Namespace, graph: Any = None) -> Any:
    """Settings from parsed options; ValueError naming a bad value."""
    from pyparbench.settings import Settings, preset

    base = preset(args.preset, graph=graph) if args.preset else Settings()
    changes: dict[str, Any] = {}
    for f in ("scheduler", "inter_op", "intra_op", "operator", "library", "pool", "smt",
              "placement"):
        v = getattr(args, f)
        if v is not None:
            changes[f] = v
    if args.affinity is not None:
        a = args.affinity
        if a in ("none", "compact", "scatter"):
            changes["affinity"] = a
        else:
            try:
                changes["affinity"] = tuple(tuple(int(c) for c in part.split(","))
                                            for part in a.split(":"))
            except ValueError:
                raise ValueError(f"--affinity must be none, compact, scatter or CPU lists "
                                 f"such as 0,1:2,3, got {a!r}") from None
    if changes.get("inter_op", base.inter_op) > 1 and "scheduler" not in changes:
        changes["scheduler"] = "async"
    return base.with_(**changes)


def _cmd_trace(args: argparse.Namespace) -> int:
    from pyparbench.models import build

    graph = build(args.model, args.batch)
    settings = settings_from_args(args, graph)
    record = graph.compile().run(settings, repeats=args.repeats, warmup=args.warmup, trace=True)
    record.write_chrome_trace(args.output)
    workers = len({e.worker for e in record.trace})
    print(f"{args.model} batch {graph[graph.inputs[0]].shape[0]}, {settings.label()}: "
          f"{record.summary.fmt('ms')}; {len(record.trace)} nodes on {workers} worker(s) "
          f"-> {args.output}")
    return 0


def add_trace_command(sub: Any) -> None:
    p = sub.add_parser("trace", help="run a model and write its per-node Chrome trace JSON",
                       description=__doc__)
    p.add_argument("model", help="a model name (see `pyparbench models`)")
    from pyparbench.cli_models import _positive

    p.add_argument("--batch", type=_positive, default=None,
                   help="batch size (default: the model's)")
    p.add_argument("-o", "--output", default="trace.json", help="output file (trace.json)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs; the last is traced")
    p.add_argument("--warmup", type=int, default=1)
    add_settings_args(p)
    p.set_defaults(func=_cmd_trace)

