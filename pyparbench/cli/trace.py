"""``pyparbench trace``: run a model once under some settings and write its
per-node trace as Chrome trace JSON (open it in Perfetto or chrome://tracing)."""

from __future__ import annotations

import argparse
from collections import Counter

from pyparbench.cli._common import (
    add_settings_args,
    add_shape_arg,
    model_from_args,
    non_negative_int,
    output_file,
    positive_int,
    settings_from_args,
)
from pyparbench.executor import compile_graph
from pyparbench.models import build

__all__ = ["add_command"]


def _cmd_trace(args: argparse.Namespace) -> int:
    output_file(args.output, "-o")  # before the run, not after it
    args.model = model_from_args(args)  # an ONNX file: its name, checked before the run
    graph = build(args.model, args.batch)
    settings = settings_from_args(args, graph)
    record = compile_graph(graph).run(settings, repeats=args.repeats, warmup=args.warmup,
                                      trace=True)
    record.write_chrome_trace(args.output)
    workers = len({e.worker for e in record.trace})
    print(f"{args.model} batch {graph[graph.inputs[0]].shape[0]}, {settings.label()}: "
          f"{record.summary.fmt('ms')}; {len(record.trace)} nodes on {workers} worker(s) "
          f"-> {args.output}")
    # A convolution names its oneDNN implementation; a small node run alone
    # names the direct kernel that computed it (direct:<isa>).
    kernels = Counter(e.kernel for e in record.trace if e.kernel)
    convs = Counter({k: n for k, n in kernels.items() if not k.startswith("direct:")})
    direct = Counter({k: n for k, n in kernels.items() if k.startswith("direct:")})
    # At bf16, the linear and matmul nodes name theirs too.
    library = "convolution kernels" if settings.precision == "fp32" else "oneDNN kernels"
    for title, found in ((library, convs), ("direct kernels", direct)):
        if found:
            print(f"{title}: " + ", ".join(f"{k} x{n}" for k, n in found.most_common()))
    if settings.precision != "fp32":
        p = record.resolved["precision"]
        emulated = p["emulated_nodes"]
        print(f"{settings.precision}: {p['bf16_nodes']} matrix nodes "
              f"({len(emulated)} emulated{': ' + ', '.join(emulated) if emulated else ''}), "
              f"{p['conversions']} conversions to bf16")
    return 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("trace", help="run a model and write its per-node Chrome trace JSON",
                       description=__doc__)
    p.add_argument("model", help="a model name (see `pyparbench models`) or an ONNX file")
    add_shape_arg(p)
    p.add_argument("--batch", type=positive_int("--batch"), default=None,
                   help="batch size (default: the model's)")
    p.add_argument("-o", "--output", default="trace.json", help="output file (trace.json)")
    p.add_argument("--repeats", type=positive_int("--repeats"), default=3,
                   help="timed runs; the last is traced")
    p.add_argument("--warmup", type=non_negative_int("--warmup"), default=1,
                   help="untimed runs first")
    add_settings_args(p)
    p.set_defaults(func=_cmd_trace)

